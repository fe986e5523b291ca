// Erasing deleted rows from a SQLite store's files (see sqlite_erase.h).
#include "sqlite/sqlite_erase.h"

#include <chrono>
#include <thread>

#include "sqlite/sqlite_util.h"

namespace colikv {
namespace detail {

namespace {

// Runs f with the connection's busy handler off, then gives it back the
// timeout it had.
template <class F>
int without_busy_wait(sqlite3* db, BusyWait& restore, F f) {
  wait_when_busy(db, nullptr);
  const int rc = f();
  wait_when_busy(db, &restore);
  return rc;
}

}  // namespace

bool erase_freed_pages(sqlite3* db, int wait_ms, BusyWait& busy) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    const int rc = without_busy_wait(db, busy, [&] {
      return sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
    });
    if (rc == SQLITE_OK) return true;
    if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) return false;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace detail
}  // namespace colikv
