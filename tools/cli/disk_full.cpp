#include "disk_full.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstdint>
#include <exception>

#include "cli_output.h"
#include "colikv/store.h"

namespace colikv_cli {

namespace {

// The tool links only the public library, which does not export its path
// helpers (src/core/path.h): this is the tool's one split of a path.
std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

int64_t free_bytes_beside(const std::string& path) {
  struct statvfs vfs;
  if (::statvfs(directory_of(path).c_str(), &vfs) != 0) return -1;
  return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
}

int64_t size_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

}  // namespace

std::string disk_full_advice(const std::string& store_path) {
  if (colikv::is_postgres_location(store_path)) return "";  // the server's disk: its operator's to free
  std::string file;
  try {
    file = colikv::store_file_of(store_path);
  } catch (const std::exception&) {
    return "";
  }
  const int64_t free_bytes = free_bytes_beside(file);
  const int64_t wal_bytes = size_of(file + "-wal");
  std::string advice = free_bytes < 0 ? "" : "; the filesystem holding it has " + bytes_both(free_bytes) + " free";
  if (wal_bytes > 0)
    return advice + "; its WAL " + file + "-wal is " + human_bytes(wal_bytes) + ": free about " +
           human_bytes(wal_bytes) + " there and retry";
  return advice + ": free space there and retry";
}

std::string file_disk_full_advice(const std::string& file, int64_t file_bytes) {
  const int64_t free_bytes = free_bytes_beside(file);
  const std::string parent = directory_of(file);
  const std::string dir = file.find('/') == std::string::npos ? "." : parent == "/" ? parent : parent + "/";
  return "; the file takes " + bytes_both(file_bytes) +
         (free_bytes < 0 ? "" : " and the filesystem holding " + dir + " has " + bytes_both(free_bytes) + " free") +
         ": free space there and retry" + file_size_limit_note();
}

std::string file_size_limit_note() {
  struct rlimit lim;
  if (::getrlimit(RLIMIT_FSIZE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return "";
  return "; this process may write files of at most " + bytes_both(static_cast<int64_t>(lim.rlim_cur)) +
         " (ulimit -f), and a write past that fails whatever the disk holds: raise the limit if that is what was "
         "reached";
}

}  // namespace colikv_cli
