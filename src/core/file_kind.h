// What a path that is not a regular file is, for messages that refuse it.
#ifndef COLIKV_SRC_CORE_FILE_KIND_H
#define COLIKV_SRC_CORE_FILE_KIND_H

#include <sys/stat.h>

namespace colikv {
namespace detail {

inline const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_FILE_KIND_H
