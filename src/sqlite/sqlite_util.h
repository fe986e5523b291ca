// SQLite plumbing shared by the library: SQLite errors become colikv::Error,
// and a write-transaction guard that rolls back in its destructor.
#ifndef COLIKV_SRC_SQLITE_SQLITE_UTIL_H
#define COLIKV_SRC_SQLITE_SQLITE_UTIL_H

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>
#include <SQLiteCpp/Statement.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "catalog/backend_error.h"
#include "core/chunk_codec.h"
#include "colikv/error.h"
#include "metrics/metrics.h"
#include "sqlite/sqlite_statement_cache.h"

namespace colikv {
namespace detail {

// The colikv code for an SQLite (extended) result code.
ErrorCode error_code_for_sqlite(int extended_code);

// The BackendError (backend_error.h) for an SQLite exception: its code, and
// SQLite's message with a hint for a full disk or a lock held too long. Every
// method of SqliteCatalog and SqlitePrefixIndex throws this one instead of
// SQLiteCpp's exceptions, so that none crosses catalog.h. While stored rows
// are read, SQLITE_TOOBIG means a value over the connection's
// SQLITE_LIMIT_LENGTH, one no colikv writes, so the store is damaged or
// hostile (kCorrupt), not the caller's argument; so does an integer overflow
// of sum() over stored counts.
BackendError sqlite_error(const SQLite::Exception& e);

// Runs f(), throwing name(sqlite_error(e)) for an SQLite exception e: the
// one place SQLite's exceptions become colikv::Error. sqlite_context,
// sqlite_named and Query's calls (sqlite_query.h) all come here.
template <class F, class Name>
auto translate_sqlite(F&& f, Name&& name) -> decltype(f()) {
  try {
    return f();
  } catch (const SQLite::Exception& e) {
    throw name(sqlite_error(e));
  }
}

// Runs f(), turning SQLite's exceptions into colikv::Error prefixed by `what`
// (which names the store and the operation): for the backend's own steps
// that name their context.
template <class F>
auto sqlite_context(const std::string& what, F&& f) -> decltype(f()) {
  return translate_sqlite(f, [&](const BackendError& e) { return e.in_context(what, Reading::kAny); });
}

// Runs f(), turning SQLite's exceptions into a catalog's colikv::Error, named
// once by its ErrorContext (the store and the operation of the open
// transaction); reading kStoredRows for a call that reads stored rows.
template <class F>
auto sqlite_named(const ErrorContext& errors, F&& f, Reading reading = Reading::kAny) -> decltype(f()) {
  return translate_sqlite(f, [&](const BackendError& e) { return errors.name(e, reading); });
}

void exec(SQLite::Database& db, const std::string& sql, const std::string& what);
int64_t query_int(SQLite::Database& db, const std::string& sql, const std::string& what);

// Why an INTEGER column of a stored row, `column` naming it
// ("chunks.n_tokens"), is no value colikv wrote; empty when it is an integer.
// SQLite keeps text, reals and blobs its INTEGER affinity cannot convert, and
// CHECK (n > 0) holds for text: a hostile store's 'abc', 0.5 or x'3531' would
// otherwise be read as some other number (Query::stored_int: kCorrupt).
std::string not_an_integer(const SQLite::Column& col, const char* column);

// A 32-byte hash column (chunks.hash, chunk_meta.chain_hash); all zero when
// the stored value has another size, which no chain hash or key equals.
ChunkHash blob_to_hash(const SQLite::Column& col);
// chunk_meta.digest: none (NULL) for a chunk written before schema 5, whose
// chunks.hash is its chain hash.
std::optional<ChunkHash> digest_column(const SQLite::Column& col);

// A connection's waits for another connection's lock (wait_when_busy): how
// long one may last, the counters they are charged to (the Store's whose
// connection it is; null: none), and when the one under way began. One per
// connection, kept by its owner as long as the connection: the connection's
// own, not the thread's nor the call's, so that a wait is charged to the
// Store that waited whichever Store's call the thread is in.
struct BusyWait {
  int timeout_ms = 0;
  StoreCounters* counters = nullptr;
  std::chrono::steady_clock::time_point first_try;
  // While set, a statement that finds the database locked fails at once,
  // and no wait is counted (Catalog::Access::kWriteIfFree).
  bool fail_at_once = false;
};

// Sets db's busy handler: a statement that finds the database locked tries
// again every 100 microseconds until wait->timeout_ms have passed (null or
// 0: it fails at once with SQLITE_BUSY), counting its wait in
// wait->counters. SQLite's own sqlite3_busy_timeout sleeps up to
// 100 ms between tries, and a writer whose short transactions follow one
// another (an objects-first turn's chunks) takes the lock back each time in
// between: the waiting writer missed every opening and waited for the whole
// turn (docs/benchmarks.md, "Writers side by side on SQLite").
void wait_when_busy(sqlite3* db, BusyWait* wait);

// BEGIN IMMEDIATE (or DEFERRED for a read snapshot) ... COMMIT; rolls back in
// the destructor unless committed. Rollback errors are swallowed there: the
// original error is the one worth reporting. Opened while a transaction is
// open already, it is a savepoint inside it, so that calls that each take
// their own transaction compose into one (Store::write: truncate, append).
class SqlTransaction {
 public:
  enum Kind { kWrite, kRead };
  // With statements, BEGIN, COMMIT and the like are prepared once there
  // instead of on every transaction (a catalog's, which takes several per append).
  // With write_rollbacks, a write that ends without its commit counts there.
  SqlTransaction(SQLite::Database& db, const std::string& what, Kind kind = kWrite,
                 StatementCache* statements = nullptr, std::atomic<uint64_t>* write_rollbacks = nullptr);
  ~SqlTransaction();
  SqlTransaction(const SqlTransaction&) = delete;
  SqlTransaction& operator=(const SqlTransaction&) = delete;
  void commit();

 private:
  void run(const char* sql);
  void end_query_only() noexcept;
  SQLite::Database& db_;
  StatementCache* statements_;
  std::string what_;
  bool open_ = false;
  bool nested_ = false;  // a SAVEPOINT inside an open transaction
  bool query_only_ = false;  // an outermost read: writes refused until it ends
  std::atomic<uint64_t>* write_rollbacks_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_UTIL_H
