// File paths: the one place that takes a path apart, for the store's files,
// the temporary files beside them and the free space of their filesystem.
#ifndef COLIKV_SRC_CORE_PATH_H
#define COLIKV_SRC_CORE_PATH_H

#include <string>

namespace colikv {
namespace detail {

// The directory of a path as its last '/' splits it: "." for a bare name,
// "/" for a name in the root. Reads no file system.
std::string directory_of(const std::string& path);

// The name a chain of symbolic links starting at path ends at, which need
// not exist (SQLite opens, and creates, the file at the end of the chain); a
// path that is no link is returned as it is. Throws kInvalidArgument naming
// path after 40 links, as the kernel's ELOOP would.
std::string follow_links(const std::string& path);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_PATH_H
