// File paths (path.h).
#include "core/path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <vector>

#include "colikv/error.h"

namespace colikv {
namespace detail {

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string follow_links(const std::string& path) {
  std::string at = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(at.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return at;
    std::vector<char> buf(PATH_MAX + 1);
    const ssize_t n = ::readlink(at.c_str(), buf.data(), buf.size() - 1);
    if (n <= 0) return at;
    const std::string link(buf.data(), static_cast<size_t>(n));
    at = link[0] == '/' ? link : directory_of(at) + "/" + link;
  }
  throw Error(ErrorCode::kInvalidArgument, path + ": too many levels of symbolic links");
}

}  // namespace detail
}  // namespace colikv
