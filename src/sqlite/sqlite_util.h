// SQLite plumbing shared by the library: SQLite errors become colikv::Error,
// and a write-transaction guard that rolls back in its destructor.
#ifndef COLIKV_SRC_SQLITE_SQLITE_UTIL_H
#define COLIKV_SRC_SQLITE_SQLITE_UTIL_H

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>
#include <SQLiteCpp/Statement.h>
#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "catalog/backend_error.h"
#include "core/chunk_codec.h"
#include "colikv/error.h"
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

// Throws sqlite_error(e) prefixed by `what` (which names the store and the
// operation): for the backend's own steps that name their context.
[[noreturn]] void rethrow_sqlite(const SQLite::Exception& e, const std::string& what, Reading reading = Reading::kAny);

// Runs f(), turning SQLite's exceptions into colikv::Error prefixed by `what`.
template <class F>
auto sqlite_context(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const SQLite::Exception& e) {
    rethrow_sqlite(e, what);
  }
}

void exec(SQLite::Database& db, const std::string& sql, const std::string& what);
int64_t query_int(SQLite::Database& db, const std::string& sql, const std::string& what);

// An INTEGER column of a stored row, `column` naming it ("chunks.n_tokens").
// SQLite keeps text, reals and blobs its INTEGER affinity cannot convert, and
// CHECK (n > 0) holds for text: a hostile store's 'abc', 0.5 or x'3531' would
// otherwise be read as some other number. Anything but an integer is an
// SQLITE_CORRUPT exception, which the caller's context names kCorrupt.
int64_t stored_int(const SQLite::Column& col, const char* column);

// A 32-byte hash column (chunks.hash, chunk_meta.chain_hash); all zero when
// the stored value has another size, which no chain hash or key equals.
ChunkHash blob_to_hash(const SQLite::Column& col);
// chunk_meta.digest: none (NULL) for a chunk written before schema 5, whose
// chunks.hash is its chain hash.
std::optional<ChunkHash> digest_column(const SQLite::Column& col);

// Sets db's busy handler: a statement that finds the database locked tries
// again every 100 microseconds until timeout_ms have passed (0: it fails at
// once with SQLITE_BUSY). SQLite's own sqlite3_busy_timeout sleeps up to
// 100 ms between tries, and a writer whose short transactions follow one
// another (an objects-first turn's chunks) takes the lock back each time in
// between: the waiting writer missed every opening and waited for the whole
// turn (docs/benchmarks.md, "Writers side by side on SQLite").
void wait_when_busy(sqlite3* db, int timeout_ms);

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
