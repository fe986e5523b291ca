#include "sqlite/sqlite_util.h"

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "core/store_limits.h"
#include "metrics/metrics.h"

namespace colikv {
namespace detail {

ErrorCode error_code_for_sqlite(int extended_code) {
  switch (extended_code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return ErrorCode::kBusy;
    case SQLITE_FULL: return ErrorCode::kDiskFull;
    case SQLITE_IOERR:
      if (extended_code == SQLITE_IOERR_NOMEM) return ErrorCode::kInternal;
      // Growing the -shm file fails for want of space: on a full disk even a
      // reader cannot open the store.
      if (extended_code == SQLITE_IOERR_SHMSIZE) return ErrorCode::kDiskFull;
      return ErrorCode::kIO;
    case SQLITE_READONLY: return ErrorCode::kReadOnly;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return ErrorCode::kCorrupt;
    case SQLITE_CANTOPEN: return ErrorCode::kIO;
    case SQLITE_PERM: return ErrorCode::kReadOnly;
    case SQLITE_AUTH: return ErrorCode::kReadOnly;  // a write refused in a read transaction (StatementCache)
    case SQLITE_TOOBIG: return ErrorCode::kInvalidArgument;
    case SQLITE_CONSTRAINT: return ErrorCode::kConflict;
    default: return ErrorCode::kInternal;
  }
}

BackendError sqlite_error(const SQLite::Exception& e) {
  int ext = e.getExtendedErrorCode();
  if (ext < 0) ext = e.getErrorCode();
  ErrorCode code = ext < 0 ? ErrorCode::kInternal : error_code_for_sqlite(ext);
  std::string msg = e.what();
  if (code == ErrorCode::kDiskFull)
    msg += " (the disk or the store's size limit is full; while the store's -wal file holds changes not yet "
           "copied into it, no write succeeds, not even a delete, until about that file's size is free)";
  if (code == ErrorCode::kBusy) msg += " (another connection held the lock past the busy timeout)";
  std::string stored_rows;
  if ((e.getErrorCode() & 0xff) == SQLITE_TOOBIG)
    stored_rows = "a stored value is larger than any colikv writes (" + std::to_string(kMaxStoredValueBytes) + " bytes)";
  // sum() of stored counts (stats): SQLite's one arithmetic error, for counts no colikv writes.
  if (e.getErrorCode() == SQLITE_ERROR && std::strcmp(e.what(), "integer overflow") == 0)
    stored_rows = "stored counts add up past 64 bits (counts no colikv writes)";
  return BackendError(code, msg, stored_rows);
}

void exec(SQLite::Database& db, const std::string& sql, const std::string& what) {
  sqlite_context(what, [&] { db.exec(sql); });
}

int64_t query_int(SQLite::Database& db, const std::string& sql, const std::string& what) {
  return sqlite_context(what, [&] {
    SQLite::Statement q(db, sql);
    if (!q.executeStep()) return int64_t{0};
    return q.getColumn(0).getInt64();
  });
}

namespace {

int retry_until_timeout(void* arg, int tries) {
  using Clock = std::chrono::steady_clock;
  BusyWait& wait = *static_cast<BusyWait*>(arg);
  if (wait.fail_at_once) return 0;
  const Clock::time_point now = Clock::now();
  // Counted as the connection's Store's (colikv/metrics.h): a lock wait.
  StoreCounters* counters = wait.counters;
  // SQLite calls this with tries == 0 when a statement first finds the lock taken.
  if (tries == 0) {
    wait.first_try = now;
    if (counters) StoreCounters::add(counters->busy_waits, 1);
  }
  if (now - wait.first_try >= std::chrono::milliseconds(wait.timeout_ms)) return 0;
  std::this_thread::sleep_for(std::chrono::microseconds(100));
  if (counters)
    StoreCounters::add(counters->lock_wait_ns, static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                                         Clock::now() - now)
                                                                         .count()));
  return 1;
}

}  // namespace

void wait_when_busy(sqlite3* db, BusyWait* wait) {
  if (!wait || wait->timeout_ms <= 0) {
    sqlite3_busy_timeout(db, 0);
    return;
  }
  sqlite3_busy_handler(db, &retry_until_timeout, wait);
}

SqlTransaction::SqlTransaction(SQLite::Database& db, const std::string& what, Kind kind, StatementCache* statements,
                               std::atomic<uint64_t>* write_rollbacks)
    : db_(db),
      statements_(statements),
      what_(what),
      nested_(sqlite3_get_autocommit(db.getHandle()) == 0),
      write_rollbacks_(kind == kWrite ? write_rollbacks : nullptr) {
  // A read snapshot refuses writes (kReadOnly), as a server's READ ONLY
  // transaction does, instead of taking the write lock in the middle of it
  // (catalog.h, "Transactions"): through the statement cache's guard when
  // there is one, which costs nothing, else PRAGMA query_only. Set before
  // BEGIN, so that no transaction is left open if it fails.
  query_only_ = !nested_ && kind == kRead;
  if (query_only_ && statements_) statements_->set_reading(true);
  // A read-only store's connection has it on already, and keeps it after.
  if (query_only_ && !statements_ && query_int(db_, "PRAGMA query_only", what_) != 0) query_only_ = false;
  if (query_only_ && !statements_) run("PRAGMA query_only=1");
  try {
    run(nested_ ? "SAVEPOINT colikv_nested" : kind == kWrite ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED");
  } catch (...) {
    end_query_only();
    throw;
  }
  open_ = true;
}

void SqlTransaction::end_query_only() noexcept {
  if (query_only_ && statements_) statements_->set_reading(false);
  if (query_only_ && !statements_) sqlite3_exec(db_.getHandle(), "PRAGMA query_only=0", nullptr, nullptr, nullptr);
  query_only_ = false;
}

void SqlTransaction::run(const char* sql) {
  if (!statements_) return exec(db_, sql, what_);
  sqlite_context(what_, [&] { statements_->use(sql)->exec(); });
}

SqlTransaction::~SqlTransaction() {
  if (!open_) return;
  if (write_rollbacks_) write_rollbacks_->fetch_add(1, std::memory_order_relaxed);
  if (nested_ || !statements_) {
    const char* undo = nested_ ? "ROLLBACK TO colikv_nested; RELEASE colikv_nested" : "ROLLBACK";
    sqlite3_exec(db_.getHandle(), undo, nullptr, nullptr, nullptr);
  } else {
    try {
      statements_->use("ROLLBACK")->exec();
    } catch (...) {
    }
  }
  end_query_only();
}

void SqlTransaction::commit() {
  run(nested_ ? "RELEASE colikv_nested" : "COMMIT");
  open_ = false;
  end_query_only();
}

std::string not_an_integer(const SQLite::Column& col, const char* column) {
  if (col.getType() == SQLITE_INTEGER) return std::string();
  static const char* const kTypeNames[] = {"", "an integer", "a real", "text", "a blob", "NULL"};
  const int type = col.getType();
  return std::string(column) + " holds " + (type >= 1 && type <= 5 ? kTypeNames[type] : "a value") +
         ", not an integer (a damaged or hostile store)";
}

ChunkHash blob_to_hash(const SQLite::Column& col) {
  ChunkHash h{};
  if (col.getBytes() == static_cast<int>(h.size())) std::memcpy(h.data(), col.getBlob(), h.size());
  return h;
}

std::optional<ChunkHash> digest_column(const SQLite::Column& col) {
  if (col.isNull()) return std::nullopt;
  return blob_to_hash(col);
}

}  // namespace detail
}  // namespace colikv
