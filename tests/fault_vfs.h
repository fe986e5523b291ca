// A test-only SQLite VFS shim over the default (unix) VFS, registered under
// FaultVfs::kName, on the pattern of SQLite's crash-test VFS (src/test6.c) and
// leveldb's fault-injection env:
//
//  * it counts every read, write, sync and truncate of every file opened
//    through it, and can fail the Nth one (once, or from then on) with any
//    SQLite result code: SQLITE_IOERR_* for an I/O error, SQLITE_FULL for
//    ENOSPC (the unix VFS maps ENOSPC to SQLITE_FULL the same way);
//  * it can cap the size of every file, failing writes past it with
//    SQLITE_FULL (a small disk);
//  * it simulates a power loss: it remembers, per file, every write and
//    truncate since that file's last successful xSync (a pre-image undo log);
//    at the chosen moment it puts every file back to its last synced state
//    (optionally keeping a random subset of the unsynced writes, like a disk
//    that wrote some sectors of its cache) and fails every later operation,
//    as a dead machine would, until reset().
//
// Not modelled: directory entries (a file created or deleted is assumed to
// stay so), and the -shm file, which SQLite rebuilds from the WAL after a
// crash anyway. Memory-mapped reads are refused so every read goes through
// xRead. One process-wide instance; calls are thread-safe.
#ifndef COLIKV_TESTS_FAULT_VFS_H
#define COLIKV_TESTS_FAULT_VFS_H

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace colikv_test {

class FaultVfs {
 public:
  static constexpr const char* kName = "colikv_fault";
  enum Op { kRead = 0, kWrite = 1, kSync = 2, kTruncate = 3, kOpCount = 4 };

  // Registers the shim (once, not as the default VFS) and returns it.
  static FaultVfs& get();

  // Clears counters, armed faults, the size cap, the crashed state and the
  // undo logs (files are left as they are now, taken as synced).
  void reset();

  // Operations of a kind seen since the last reset().
  int64_t count(Op op) const;
  // Writes + syncs + truncates since the last reset().
  int64_t mutating_count() const;
  // Faults returned since the last reset() (I/O errors, full-disk errors,
  // power losses).
  int64_t faults_injected() const;

  // Fails the nth (1-based, counted from this call) operation of kind op with
  // the SQLite result `code`; when persistent, every later one of that kind too.
  void fail_nth(Op op, int64_t nth, int code, bool persistent = false);
  // Cancels fail_nth and the size cap (counters and crash state stay).
  void clear_faults();
  // Writes that would make a file larger than bytes fail with SQLITE_FULL;
  // < 0 removes the cap.
  void set_size_cap(int64_t bytes);

  // Power loss just before the nth (1-based, counted from this call)
  // mutating operation (write, sync or truncate): see power_loss_now().
  void power_loss_at(int64_t nth);
  // Puts every file written through the shim back to its state at its last
  // successful sync. With keep_seed != 0 each unsynced write or truncate
  // survives with probability 1/2 (a torn cache flush), chosen from the seed.
  // Every later operation through the shim fails with SQLITE_IOERR until reset().
  void power_loss_now();
  void set_torn_seed(uint32_t keep_seed);
  bool crashed() const;
  // Unsynced writes and truncates dropped by power losses since reset().
  int64_t dropped_writes() const;

 private:
  FaultVfs() = default;
};

// While alive, TempDir creates its directories on /dev/shm when it exists:
// the shim models durability itself, and real fsyncs there cost nothing, so
// sweeps of thousands of faults stay fast.
class RamTmpdir {
 public:
  RamTmpdir() {
    const char* old = std::getenv("TMPDIR");
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (::access("/dev/shm", W_OK) == 0) ::setenv("TMPDIR", "/dev/shm", 1);
  }
  ~RamTmpdir() {
    if (had_)
      ::setenv("TMPDIR", old_.c_str(), 1);
    else
      ::unsetenv("TMPDIR");
  }
  RamTmpdir(const RamTmpdir&) = delete;
  RamTmpdir& operator=(const RamTmpdir&) = delete;

 private:
  bool had_ = false;
  std::string old_;
};

}  // namespace colikv_test

#endif  // COLIKV_TESTS_FAULT_VFS_H
