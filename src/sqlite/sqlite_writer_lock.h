// Whether the process of an objects-first writer (sqlite_held.cpp) still
// runs, as the kernel says: each writer holds an open-file-description lock
// (fcntl F_OFD_SETLK, a write lock) on the byte at its writer id in the file
// NAME-writers beside the store NAME, for as long as its Store is open. The
// kernel drops the lock when the last descriptor of that open file goes,
// when the process exits or is killed, in whatever pid namespace it runs and
// whatever /proc shows. Another process tests the byte (F_OFD_GETLK). Not
// installed. docs/design.md, "Objects first", says where this cannot tell
// (a network file system whose locks do not reach every host).
#ifndef COLIKV_SRC_SQLITE_SQLITE_WRITER_LOCK_H
#define COLIKV_SRC_SQLITE_SQLITE_WRITER_LOCK_H

#include <cstdint>
#include <string>

namespace colikv {
namespace detail {

// The lock file of the store file `store_path`.
std::string writer_lock_file(const std::string& store_path);

enum class WriterLiveness {
  kGone,     // nobody holds the writer's byte: its process no longer runs
  kRunning,  // a process holds it
  kUnknown,  // the file cannot be opened or the lock tested: taken as running
};

// Tests writer `writer_id`'s byte in the lock file of store_path (creating
// the file, with the store file's permission bits, when it is missing).
WriterLiveness writer_liveness(const std::string& store_path, int64_t writer_id);

// A writer's hold on its byte, kept until release() or destruction.
class WriterLock {
 public:
  WriterLock() = default;
  ~WriterLock() { release(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

  // Takes writer_id's byte in the lock file of store_path; false when it
  // cannot (the file cannot be opened for writing, the file system has no
  // such locks, or another open file holds the byte), holding nothing then.
  bool acquire(const std::string& store_path, int64_t writer_id);
  // Closes the file: the kernel drops the lock.
  void release() noexcept;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_WRITER_LOCK_H
