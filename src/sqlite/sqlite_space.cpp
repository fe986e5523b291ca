// How a SQLite store gives space back (see sqlite_space.h).
#include "sqlite/sqlite_space.h"

#include <SQLiteCpp/Exception.h>
#include <sqlite3.h>

#include <algorithm>

#include "colikv/error.h"
#include "sqlite/sqlite_checkpointer.h"
#include "sqlite/sqlite_connection.h"
#include "sqlite/sqlite_util.h"

namespace colikv {
namespace detail {

namespace {

// A statement of its own (the cache's SQLiteCpp statements do not hand their
// values on as they are): rows are copied value for value, types and all.
class RawStatement {
 public:
  RawStatement(sqlite3* db, const std::string& sql) : db_(db) {
    const int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &q_, nullptr);
    if (rc != SQLITE_OK) throw SQLite::Exception(db, rc);
  }
  ~RawStatement() { sqlite3_finalize(q_); }
  RawStatement(const RawStatement&) = delete;
  RawStatement& operator=(const RawStatement&) = delete;
  sqlite3_stmt* get() const { return q_; }
  // True for a row, false when done.
  bool step() {
    const int rc = sqlite3_step(q_);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) throw SQLite::Exception(db_, rc);
    return rc == SQLITE_ROW;
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* q_ = nullptr;
};

// Binds every column of q's current row to ins, in order (values are copied).
void bind_row(const RawStatement& q, const RawStatement& ins) {
  for (int i = 0; i < sqlite3_column_count(q.get()); ++i)
    sqlite3_bind_value(ins.get(), i + 1, sqlite3_column_value(q.get(), i));
}

}  // namespace

void evict_chunk_payload(SQLite::Database& db, StatementCache& statements, int64_t chunk_id) {
  sqlite3* h = db.getHandle();
  // Every column of both rows but the payload. chunk_meta's row goes with the
  // chunk's (ON DELETE CASCADE) and comes back with payload_bytes 0.
  static const char* const kChunkColumns =
      "chunk_id, model_id, hash, first_pos, n_tokens, tokens, precision, compression, raw_size, checksum";
  RawStatement chunk(h, std::string("SELECT ") + kChunkColumns + " FROM chunks WHERE chunk_id = ?");
  RawStatement meta(h, "SELECT * FROM chunk_meta WHERE chunk_id = ?");
  sqlite3_bind_int64(chunk.get(), 1, chunk_id);
  sqlite3_bind_int64(meta.get(), 1, chunk_id);
  if (!chunk.step()) return;  // gone: nothing to evict
  const bool has_meta = meta.step();
  RawStatement put_chunk(h, std::string("INSERT INTO chunks (") + kChunkColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  bind_row(chunk, put_chunk);
  std::string meta_insert = "INSERT INTO chunk_meta VALUES (";
  for (int i = 0; i < sqlite3_column_count(meta.get()); ++i) meta_insert += i ? ", ?" : "?";
  RawStatement put_meta(h, meta_insert + ")");
  if (has_meta) bind_row(meta, put_meta);
  sqlite3_reset(chunk.get());
  sqlite3_reset(meta.get());
  // The chunk lists still name the id: their foreign keys are checked at
  // commit, by which time it is back (deferral ends with the transaction).
  statements.use("PRAGMA defer_foreign_keys = ON")->exec();
  auto drop = statements.use("DELETE FROM chunks WHERE chunk_id = ?");
  drop->bind(1, chunk_id);
  drop->exec();
  put_chunk.step();
  if (has_meta) {
    put_meta.step();
    auto zero = statements.use("UPDATE chunk_meta SET payload_bytes = 0 WHERE chunk_id = ?");
    zero->bind(1, chunk_id);
    zero->exec();
  }
  statements.use("PRAGMA defer_foreign_keys = OFF")->exec();
}

namespace {

constexpr int64_t kIncremental = 2;  // PRAGMA auto_vacuum's INCREMENTAL

}  // namespace

void give_back_free_pages(SQLite::Database& db, int64_t step_bytes, const std::string& what,
                          const std::function<void(int64_t, int64_t)>& progress) {
  if (query_int(db, "PRAGMA auto_vacuum", what) != kIncremental) return;
  const int64_t page_size = query_int(db, "PRAGMA page_size", what);
  const int64_t step = std::clamp<int64_t>(step_bytes / page_size, 1, int64_t{1} << 30);
  const int64_t at_start = query_int(db, "PRAGMA freelist_count", what);
  for (int64_t left = at_start; left > 0;) {
    SqlTransaction txn(db, what);
    sqlite_context(what, [&] {
      // One result row per page given back: stepped to the end.
      SQLite::Statement q(db, "PRAGMA incremental_vacuum(" + std::to_string(step) + ")");
      while (q.executeStep()) {
      }
    });
    const int64_t now = query_int(db, "PRAGMA freelist_count", what);
    txn.commit();
    if (progress) progress((at_start - std::min(now, at_start)) * page_size, at_start * page_size);
    if (now >= left) return;  // nothing moved (cannot happen with SQLite's own pages): no endless loop
    left = now;
  }
}

Catalog::CompactOutcome compact_store(SQLite::Database& db, BusyWait& busy, int64_t step_bytes,
                                      const std::string& what, const std::function<void(int64_t, int64_t)>& progress) {
  Catalog::CompactOutcome out;
  const int64_t page_size = query_int(db, "PRAGMA page_size", what);
  out.reclaimable_bytes = query_int(db, "PRAGMA freelist_count", what) * page_size;
  if (query_int(db, "PRAGMA auto_vacuum", what) == kIncremental) {
    give_back_free_pages(db, step_bytes, what, progress);
  } else {
    const int64_t db_bytes = query_int(db, "PRAGMA page_count", what) * page_size;
    try {
      exec(db, "PRAGMA auto_vacuum = INCREMENTAL", what);
      exec(db, "VACUUM", what);
      // SQLite says nothing while it rewrites the file: done, at the end.
      if (progress) progress(db_bytes, db_bytes);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kDiskFull) throw;
      throw Error(ErrorCode::kDiskFull, std::string(e.what()) + "; this vacuum rewrites the whole store once (it " +
                                        "was made without incremental vacuum) and needs about " +
                                        std::to_string(2 * db_bytes) + " bytes free beside it (twice the " +
                                        std::to_string(db_bytes) + " of the database: the rewritten pages go to " +
                                        "the WAL and a temporary copy); later vacuums need one step at a time");
    }
  }
  const int rc = truncate_wal_without_waiting(db.getHandle(), busy);
  if (rc != SQLITE_OK && rc != SQLITE_BUSY)
    throw Error(error_code_for_sqlite(rc),
                what + ": copying the WAL back into the database: " + sqlite3_errstr(rc));
  if (rc == SQLITE_BUSY)
    out.held_back = "another connection holds a read transaction on an older snapshot (an open sqlite3 shell, a "
                    "long load or export) or is writing, so the WAL (" +
                    std::to_string(file_size_or_zero(db.getFilename() + "-wal")) +
                    " bytes) keeps the pages this vacuum moved and the database file is not cut; they are given "
                    "back by a later vacuum or checkpoint once it ends";
  return out;
}

}  // namespace detail
}  // namespace colikv
