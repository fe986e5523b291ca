// The background WAL checkpointer of a writable SQLite store.
#ifndef COLIKV_SRC_SQLITE_SQLITE_CHECKPOINTER_H
#define COLIKV_SRC_SQLITE_SQLITE_CHECKPOINTER_H

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace colikv {
namespace detail {

struct BusyWait;  // sqlite_util.h

// Copies the WAL back into the database file on its own thread and
// connection, so that a commit does not wait for that second write of every
// byte and its fsync, which took most of the SQL write speed (docs/benchmarks.md,
// "Figures moved out of code comments"). It replaces SQLite's
// auto-checkpoint (the WAL hook is ours): at soft_pages WAL pages after a
// commit the thread is woken for a PASSIVE checkpoint, which blocks neither
// readers nor the writer; at 4x soft_pages the committing thread waits for it
// and checkpoints inline, so the WAL stays bounded when writes outrun it.
//
// SQLite rewrites the WAL from its start only when a write transaction
// begins on a WAL whose every frame was copied back; an append that begins
// while the previous one's checkpoint runs makes the WAL grow instead, until
// the hard limit stalls a commit (every few large turns; docs/benchmarks.md).
// So a large write waits for a running checkpoint before it begins (its
// chunks keep encoding meanwhile): wait_before_write(). A small one waits
// a bounded time (SqliteCatalog::wait_before_write): a whole checkpoint of
// another writer's turn would hold it many times its own time.
// Copies the whole WAL back into the database file (cutting the file to the
// size its last commit left) and resets the WAL to zero bytes, without ever
// holding the write lock while it waits: each TRUNCATE attempt runs with no
// busy handler, so a reader on an older snapshot or a writer makes it give
// up at once, and it tries again a few times within busy.timeout_ms (at most
// a second), letting the lock go in between. Gives db back its busy handler,
// `busy`. Returns SQLITE_OK when every frame was copied back,
// SQLITE_BUSY when a reader's snapshot or a writer kept some in the WAL, else
// the error that stopped it (SQLITE_FULL: no room to copy them back). For
// vacuum; anything that must empty the WAL (rm's wiping of deleted rows) can
// call it.
int truncate_wal_without_waiting(sqlite3* db, BusyWait& busy);

// The WAL size to checkpoint at: `configured` (Options::wal_checkpoint_bytes),
// or less on a filesystem with little free space (free_bytes; < 0: unknown),
// so that the WAL, which may grow to 4x that before a commit waits for the
// checkpoint, takes at most a quarter of what was free. At least one 64 KiB.
int64_t wal_checkpoint_bytes_for(int64_t configured, int64_t free_bytes);

// Free bytes of the filesystem holding file (its directory's); -1 unknown.
int64_t free_bytes_beside(const std::string& file);

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
  // The same for a small write: at most `at_most`, and once for each
  // checkpoint; while the one it waited for still runs, it returns at once.
  // Each write waiting the bound while a long checkpoint runs would only add
  // it to each, without the WAL starting over any sooner.
  void wait_briefly_before_write(std::chrono::milliseconds at_most);

 private:
  static int on_commit(void* arg, sqlite3* h, const char* name, int pages);
  void run();
  // Under mu_: no checkpoint pending or running (or stopping).
  bool write_may_begin() const { return stop_ || (!pending_ && !busy_); }

  sqlite3* main_;
  std::string path_;
  const int soft_pages_, hard_pages_;
  sqlite3* db_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, pending_ = false, busy_ = false;
  uint64_t started_ = 0;             // checkpoints begun by run()
  uint64_t briefly_waited_for_ = 0;  // the last one a small write waited for (see above)
  std::atomic<bool> failed_{false};
  std::atomic<int> wal_pages_{0};
  std::thread thread_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_CHECKPOINTER_H
