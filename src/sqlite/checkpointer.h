// The background WAL checkpointer of a writable SQLite store.
#ifndef COLIKV_SRC_SQLITE_CHECKPOINTER_H
#define COLIKV_SRC_SQLITE_CHECKPOINTER_H

#include <sqlite3.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace colikv {
namespace detail {

// Copies the WAL back into the database file on its own thread and
// connection, so that a commit does not wait for that second write of every
// byte and its fsync (measured on 2.5 MB blobs: 353 MB/s of SQL writes with
// SQLite's inline auto-checkpoint, 944 MB/s without it). It replaces SQLite's
// auto-checkpoint (the WAL hook is ours): at soft_pages WAL pages after a
// commit the thread is woken for a PASSIVE checkpoint, which blocks neither
// readers nor the writer; at 4x soft_pages the committing thread waits for it
// and checkpoints inline, so the WAL stays bounded when writes outrun it.
//
// SQLite rewrites the WAL from its start only when a write transaction
// begins on a WAL whose every frame was copied back; an append that begins
// while the previous one's checkpoint runs makes the WAL grow instead, until
// the hard limit stalls a commit (measured: every 4th 92 MB turn took +280 ms).
// So an append waits for a running checkpoint before it begins (its chunks
// keep encoding meanwhile): wait_before_write().
class Checkpointer {
 public:
  // Installs itself as main's WAL hook; `path` is main's file, which it opens
  // a connection of its own to. soft_pages: see above (at least 1).
  Checkpointer(sqlite3* main, std::string path, int soft_pages);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Waits until no checkpoint is pending or running, if the last commit left
  // at least soft_pages in the WAL.
  void wait_before_write();

 private:
  static int on_commit(void* arg, sqlite3* h, const char* name, int pages);
  void run();

  sqlite3* main_;
  std::string path_;
  const int soft_pages_, hard_pages_;
  sqlite3* db_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, pending_ = false, busy_ = false;
  std::atomic<bool> failed_{false};
  std::atomic<int> wal_pages_{0};
  std::thread thread_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_CHECKPOINTER_H
