// Writers' liveness by open-file-description locks (sqlite_writer_lock.h).
#include "sqlite/sqlite_writer_lock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace colikv {
namespace detail {

namespace {

// Opens the lock file, creating it as SQLite creates the -wal and -shm
// files: with the store file's permission bits and, when run as root, its
// owner, so that every user who may write the store may lock in it too.
int open_lock_file(const std::string& store_path, int access) {
  const std::string file = writer_lock_file(store_path);
  int fd = ::open(file.c_str(), access | O_CLOEXEC | O_NOCTTY);
  if (fd >= 0 || errno != ENOENT) return fd;
  struct stat st;
  if (::stat(store_path.c_str(), &st) != 0) return -1;
  fd = ::open(file.c_str(), access | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, st.st_mode & 0777);
  if (fd < 0 && errno == EEXIST) return ::open(file.c_str(), access | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -1;
  // The umask may have taken bits the store has.
  ::fchmod(fd, st.st_mode & 0777);
  if (::geteuid() == 0) (void)::fchown(fd, st.st_uid, st.st_gid);
  return fd;
}

struct flock writer_byte(int64_t writer_id, short type) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = static_cast<off_t>(writer_id);
  l.l_len = 1;
  l.l_pid = 0;  // required by the F_OFD_ commands
  return l;
}

}  // namespace

std::string writer_lock_file(const std::string& store_path) { return store_path + "-writers"; }

WriterLiveness writer_liveness(const std::string& store_path, int64_t writer_id) {
  if (writer_id <= 0) return WriterLiveness::kUnknown;
  // Read access is enough to test a lock; a reader that may not write the
  // directory cannot create a missing file and cannot tell.
  int fd = open_lock_file(store_path, O_RDWR);
  if (fd < 0) fd = open_lock_file(store_path, O_RDONLY);
  if (fd < 0) return WriterLiveness::kUnknown;
  struct flock l = writer_byte(writer_id, F_WRLCK);
  const int rc = ::fcntl(fd, F_OFD_GETLK, &l);
  ::close(fd);  // an open file description of its own: no other lock is dropped
  if (rc != 0) return WriterLiveness::kUnknown;
  return l.l_type == F_UNLCK ? WriterLiveness::kGone : WriterLiveness::kRunning;
}

bool WriterLock::acquire(const std::string& store_path, int64_t writer_id) {
  release();
  if (writer_id <= 0) return false;
  const int fd = open_lock_file(store_path, O_RDWR);
  if (fd < 0) return false;
  struct flock l = writer_byte(writer_id, F_WRLCK);
  if (::fcntl(fd, F_OFD_SETLK, &l) != 0) {
    ::close(fd);
    return false;
  }
  fd_ = fd;
  return true;
}

void WriterLock::release() noexcept {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
}

}  // namespace detail
}  // namespace colikv
