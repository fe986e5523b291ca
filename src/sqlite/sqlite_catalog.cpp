// The Catalog over SQLite (see sqlite_catalog.h and migrations/*.sql).
#include "sqlite/sqlite_catalog.h"

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <cstring>

#include "sqlite/sqlite_erase.h"
#include "sqlite/sqlite_connection.h"
#include "sqlite/sqlite_space.h"
#include "sqlite/sqlite_prefix_index.h"
#include "sqlite/sqlite_util.h"
#include "catalog/location.h"

namespace colikv {
namespace detail {

namespace {

// An outermost one names the catalog's errors by its `what` until it ends
// (a nested one is part of the operation its outermost names).
class SqliteTransaction : public Catalog::Transaction {
 public:
  SqliteTransaction(SQLite::Database& db, StatementCache& statements, const std::string& what, Catalog::Access access,
                    std::atomic<uint64_t>& rollbacks, ErrorContext* outermost)
      : txn_(db, what, access == Catalog::Access::kWrite ? SqlTransaction::kWrite : SqlTransaction::kRead,
             &statements, &rollbacks),
        named_(outermost ? std::make_optional<ErrorContext::Scope>(
                               *outermost, what, access == Catalog::Access::kRead ? Reading::kStoredRows : Reading::kAny)
                         : std::nullopt) {}
  void commit() override { txn_.commit(); }

 private:
  SqlTransaction txn_;
  std::optional<ErrorContext::Scope> named_;
};

// What chunk_meta records of a chunk.
struct ChunkMeta {
  int64_t model_id = 0;
  std::string precision;
  int64_t index_first = 0;
  ChunkHash prev{};    // the chain hash at index_first (ignored when index_first == 0)
  ChunkHash chain{};   // its own chain hash
  ChunkHash digest{};  // its content digest (kNoValuesDigest for a token-only chunk)
  std::string tokens_json;
  int64_t payload_bytes = 0;  // 0: evicted
};

// Writes the chunk_meta row of a chunk just inserted (replacing any row of a
// reused chunk_id). Inside the write transaction that inserted the chunk.
// An INSERT that does nothing on the key's conflict, then an UPDATE only
// when a row was there: INSERT OR REPLACE takes a small append's row a good
// part longer to write even when it replaces nothing (docs/benchmarks.md,
// "Small turns: no INSERT OR REPLACE").
void record_chunk_meta(StatementCache& statements, const ErrorContext& errors, int64_t chunk_id, const ChunkMeta& meta,
                       const std::string& anchor) {
  const auto bind_row = [&](Query& q) {
    q.bind(1, chunk_id);
    q.bind(2, meta.model_id);
    q.bind(3, meta.precision);
    bind_prev(q, 4, meta.index_first == 0 ? nullptr : &meta.prev, anchor);
    q.bind(5, meta.tokens_json);
    q.bind(6, meta.payload_bytes);
    q.bind(7, meta.chain.data(), static_cast<int>(meta.chain.size()));
    q.bind(8, meta.digest.data(), static_cast<int>(meta.digest.size()));
  };
  {
    Query insert(statements,
        "INSERT INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, chain_hash, "
        "digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (chunk_id) DO NOTHING",
        errors);
    bind_row(insert);
    if (insert.exec() != 0) return;
  }
  Query replace(statements,
      "UPDATE chunk_meta SET model_id = ?2, precision = ?3, prev_hash = ?4, tokens = ?5, payload_bytes = ?6, "
      "chain_hash = ?7, digest = ?8 WHERE chunk_id = ?1",
      errors);
  bind_row(replace);
  replace.exec();
}

// The payload of an existing chunk was (re)written: updates its payload bytes
// (writing its whole chunk_meta row if it has none).
void record_chunk_payload(StatementCache& statements, const ErrorContext& errors, int64_t chunk_id,
                          const ChunkMeta& meta, const std::string& anchor) {
  int changed = 0;
  {
    Query u(statements, "UPDATE chunk_meta SET payload_bytes = ? WHERE chunk_id = ?", errors);
    u.bind(1, meta.payload_bytes);
    u.bind(2, chunk_id);
    changed = u.exec();
  }
  if (changed == 0) record_chunk_meta(statements, errors, chunk_id, meta, anchor);
}

void bind_hash(Query& q, int index, const ChunkHash& h) {
  q.bind(index, h.data(), static_cast<int>(h.size()));
}

ChunkMeta meta_of(const ChunkRecord& c) {
  ChunkMeta meta;
  meta.model_id = c.model_id;
  meta.precision = c.precision;
  meta.index_first = c.index_first;
  meta.prev = c.index_prev;
  meta.chain = c.chain;
  meta.digest = c.digest;
  meta.tokens_json = c.index_tokens_json;
  meta.payload_bytes = static_cast<int64_t>(c.encoded->payload.size());
  return meta;
}

// Payloads are read with incremental blob I/O (one copy, straight into the
// caller's buffer: selecting the column would assemble it in SQLite's own
// buffer first), through one blob handle moved from chunk to chunk.
class SqliteChunkCursor : public ChunkCursor {
 public:
  SqliteChunkCursor(SQLite::Database& db, const ErrorContext& errors, int64_t conversation_id, int64_t end_pos)
      : db_(db),
        q_(db,
           "SELECT cc.seq, ch.chunk_id, ch.first_pos, ch.n_tokens, ch.tokens, ch.compression, "
           "ch.raw_size, ch.checksum, length(ch.payload), ch.hash, ch.precision, k.digest "
           "FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
           "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id "
           "WHERE cc.conversation_id = ? AND ch.first_pos < ? ORDER BY cc.seq",
           errors, Reading::kStoredRows) {
    q_.bind(1, conversation_id);
    q_.bind(2, end_pos);
  }
  ~SqliteChunkCursor() override {
    if (blob_) sqlite3_blob_close(blob_);
  }

  bool next(ChunkListRow& r) override {
    if (!q_.executeStep()) return false;
    r.seq = q_.stored_int(0, "conversation_chunks.seq");
    r.chunk_id = q_.getColumn(1).getInt64();
    r.first_pos = q_.stored_int(2, "chunks.first_pos");
    r.n_tokens = q_.stored_int(3, "chunks.n_tokens");
    SQLite::Column tokens = q_.getColumn(4);
    const char* text = static_cast<const char*>(tokens.getBlob());
    r.tokens_json.assign(text ? text : "", static_cast<size_t>(tokens.getBytes()));
    r.compression = q_.getColumn(5).getString();
    r.raw_size = q_.stored_int(6, "chunks.raw_size");
    r.checksum = q_.stored_int(7, "chunks.checksum");
    SQLite::Column payload = q_.getColumn(8);
    r.payload_bytes = payload.isNull() ? std::nullopt : std::optional<int64_t>(payload.getInt64());
    r.key = blob_to_hash(q_.getColumn(9));
    r.precision = q_.getColumn(10).getString();
    r.digest = digest_column(q_.getColumn(11));
    return true;
  }

  void read_payload(int64_t chunk_id, int64_t bytes, std::vector<uint8_t>& out, const std::string& what) override {
    int rc = blob_ ? sqlite3_blob_reopen(blob_, chunk_id)
                   : sqlite3_blob_open(db_.getHandle(), "main", "chunks", "payload", chunk_id, 0, &blob_);
    if (rc == SQLITE_OK && sqlite3_blob_bytes(blob_) != bytes) rc = SQLITE_CORRUPT;
    out.resize(static_cast<size_t>(bytes));
    if (rc == SQLITE_OK && bytes > 0) rc = sqlite3_blob_read(blob_, out.data(), static_cast<int>(bytes), 0);
    if (rc != SQLITE_OK) throw Error(error_code_for_sqlite(rc), what + ": reading its payload: " + sqlite3_errstr(rc));
  }

 private:
  SQLite::Database& db_;
  Query q_;
  sqlite3_blob* blob_ = nullptr;
};

}  // namespace

std::unique_ptr<Catalog::Transaction> SqliteCatalog::begin(Access access, const std::string& what) {
  const bool outermost = sqlite3_get_autocommit(db_.getHandle()) != 0;
  // kWriteIfFree: its BEGIN IMMEDIATE fails at once where another writer
  // holds the lock (and begins nothing), instead of waiting.
  const bool if_free = access == Access::kWriteIfFree && outermost;
  if (access == Access::kWriteIfFree) access = Access::kWrite;
  std::unique_ptr<SqliteTransaction> txn;
  try {
    struct FailAtOnce {
      BusyWait& busy;
      ~FailAtOnce() { busy.fail_at_once = false; }
    } scope{busy_};
    busy_.fail_at_once = if_free;
    txn = std::make_unique<SqliteTransaction>(db_, statements_, what, access, write_rollbacks_,
                                              outermost ? &errors() : nullptr);
  } catch (const Error& e) {
    if (if_free && e.code() == ErrorCode::kBusy) return nullptr;
    throw;
  }
  // First of all in the transaction: a use a load could not record is
  // written before any retention or expiry of this catalog reads last_used_ms.
  if (access == Access::kWrite && outermost && !pending_uses_.empty()) record_pending_uses();
  return txn;
}

std::optional<ConversationRow> SqliteCatalog::find_conversation(const std::string& name) {
  auto q = cached(
      "SELECT conversation_id, model_id, token_count, generation, precision "
      "FROM conversations WHERE tenant_id = ? AND name = ?");
  q.bind(1, tenant_id_);
  q.bind(2, name);
  if (!q.executeStep()) return std::nullopt;
  ConversationRow r;
  r.id = q.getColumn(0).getInt64();
  r.name = name;
  r.model_id = q.stored_int(1, "conversations.model_id");
  r.count = q.stored_int(2, "conversations.token_count");
  r.generation = q.stored_int(3, "conversations.generation");
  r.precision = q.getColumn(4).getString();
  return r;
}

int64_t SqliteCatalog::insert_conversation(const NewConversation& c, std::optional<int64_t> count, int64_t now_ms,
                                           bool used) {
  auto ins = cached(
      "INSERT INTO conversations (name, model_id, precision, created_ms, updated_ms, "
      "last_used_ms, title, metadata, tenant_id, token_count, generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
      "ON CONFLICT (tenant_id, name) DO NOTHING");
  ins.bind(1, c.name);
  ins.bind(2, c.model_id);
  ins.bind(3, c.precision);
  ins.bind(4, c.now_ms);
  ins.bind(5, count ? now_ms : c.now_ms);
  ins.bind(6, count && used ? now_ms : c.now_ms);
  ins.bind(7, c.title);
  ins.bind(8, c.metadata);
  ins.bind(9, tenant_id_);
  ins.bind(10, count ? *count : int64_t{0});
  ins.bind(11, count ? int64_t{1} : int64_t{0});  // the count's write bumps the generation
  if (ins.exec() == 0) return 0;
  return db_.getLastInsertRowid();
}

int64_t SqliteCatalog::insert_fork(const NewFork& f) {
  auto ins = prepared("INSERT INTO conversations (name, model_id, token_count, precision, title, metadata, "
                      "parent_id, forked_at, created_ms, updated_ms, last_used_ms, tenant_id) "
                      "SELECT ?, model_id, ?, precision, title, metadata, conversation_id, ?, ?, ?, ?, tenant_id "
                      "FROM conversations WHERE conversation_id = ? AND tenant_id = ?");
  ins.bind(1, f.name);
  ins.bind(2, f.count);
  ins.bind(3, f.count);
  ins.bind(4, f.now_ms);
  ins.bind(5, f.now_ms);
  ins.bind(6, f.now_ms);
  ins.bind(7, f.parent_id);
  ins.bind(8, tenant_id_);
  if (ins.exec() == 0)
    throw Error(ErrorCode::kNotFound, "the conversation to fork is not this tenant's, or no longer exists");
  return db_.getLastInsertRowid();
}

void SqliteCatalog::remove_conversation(int64_t conversation_id) {
  auto del_links = prepared("DELETE FROM conversation_chunks WHERE conversation_id = ?");
  del_links.bind(1, conversation_id);
  del_links.exec();
  auto del = prepared("DELETE FROM conversations WHERE conversation_id = ?");
  del.bind(1, conversation_id);
  del.exec();
}

void SqliteCatalog::set_count(int64_t conversation_id, int64_t count, int64_t now_ms, bool used) {
  if (!used) {
    auto upd = cached(
        "UPDATE conversations SET token_count = ?, generation = generation + 1, updated_ms = ? "
        "WHERE conversation_id = ?");
    upd.bind(1, count);
    upd.bind(2, now_ms);
    upd.bind(3, conversation_id);
    upd.exec();
    return;
  }
  auto upd = cached(
      "UPDATE conversations SET token_count = ?, generation = generation + 1, updated_ms = ?, "
      "last_used_ms = ? WHERE conversation_id = ?");
  upd.bind(1, count);
  upd.bind(2, now_ms);
  upd.bind(3, now_ms);
  upd.bind(4, conversation_id);
  upd.exec();
}

void SqliteCatalog::touch_used(int64_t conversation_id, int64_t now_ms) {
  auto used = cached("UPDATE conversations SET last_used_ms = ? WHERE conversation_id = ?");
  used.bind(1, now_ms);
  used.bind(2, conversation_id);
  used.exec();
}

std::optional<int64_t> SqliteCatalog::find_model_id(const std::string& signature) {
  // Prepared once: match() asks it for every prompt.
  auto q = cached("SELECT model_id FROM models WHERE signature = ?");
  q.bind(1, signature);
  if (!q.executeStep()) return std::nullopt;
  return q.getColumn(0).getInt64();
}

namespace {

// A model dimension (an int): getInt() would keep the low 32 bits of a
// larger stored value, which the signature text could then match.
int stored_dimension(Query& q, int index, const char* column) {
  const int64_t v = q.stored_int(index, column);
  if (v < INT32_MIN || v > INT32_MAX)
    q.corrupt(std::string(column) + " holds " + std::to_string(v) + ", out of a dimension's range");
  return static_cast<int>(v);
}

}  // namespace

std::optional<StoredModel> SqliteCatalog::read_model(int64_t model_id) {
  auto q = prepared("SELECT n_layers, kv_lora, qk_rope, index_hd, n_indexed, vocab, weights_id, "
                    "chunk_tokens, signature FROM models WHERE model_id = ?");
  q.bind(1, model_id);
  if (!q.executeStep()) return std::nullopt;
  StoredModel m;
  m.sig.n_layers = stored_dimension(q, 0, "models.n_layers");
  m.sig.kv_lora = stored_dimension(q, 1, "models.kv_lora");
  m.sig.qk_rope = stored_dimension(q, 2, "models.qk_rope");
  m.sig.index_hd = stored_dimension(q, 3, "models.index_hd");
  m.sig.n_indexed = stored_dimension(q, 4, "models.n_indexed");
  m.sig.vocab = stored_dimension(q, 5, "models.vocab");
  m.sig.weights_id = q.getColumn(6).getString();
  m.chunk_tokens = q.stored_int(7, "models.chunk_tokens");
  m.signature = q.getColumn(8).getString();
  return m;
}

void SqliteCatalog::insert_model(const ModelSignature& sig, int64_t chunk_tokens, int64_t now_ms) {
  auto q = prepared("INSERT INTO models (signature, n_layers, kv_lora, qk_rope, index_hd, n_indexed, vocab, "
                    "weights_id, record_bytes, chunk_tokens, created_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
  q.bind(1, sig.to_string());
  q.bind(2, sig.n_layers);
  q.bind(3, sig.kv_lora);
  q.bind(4, sig.qk_rope);
  q.bind(5, sig.index_hd);
  q.bind(6, sig.n_indexed);
  q.bind(7, sig.vocab);
  q.bind(8, sig.weights_id);
  q.bind(9, static_cast<int64_t>(sig.record_bytes()));
  q.bind(10, chunk_tokens);
  q.bind(11, now_ms);
  q.exec();
}

std::vector<ChunkSummary> SqliteCatalog::chunk_list(int64_t conversation_id) {
  std::vector<ChunkSummary> out;
  // length(payload), not "payload IS NULL": as a result column the latter
  // makes SQLite 3.40 read the whole blob through its overflow pages (every
  // append paid for reading all that was committed before it, see
  // docs/benchmarks.md); length() reads only the header.
  auto q = cached(
      "SELECT ch.chunk_id, ch.hash, k.chain_hash, k.digest, ch.n_tokens, length(ch.payload) IS NULL, "
      "cc.seq, ch.first_pos FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
      "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id WHERE cc.conversation_id = ? ORDER BY cc.seq");
  q.bind(1, conversation_id);
  while (q.executeStep())
    out.push_back({q.getColumn(0).getInt64(), blob_to_hash(q.getColumn(1)), blob_to_hash(q.getColumn(2)),
                   digest_column(q.getColumn(3)), q.stored_int(4, "chunks.n_tokens"),
                   q.getColumn(5).getInt() != 0, q.stored_int(6, "conversation_chunks.seq"),
                   q.stored_int(7, "chunks.first_pos")});
  return out;
}

std::unique_ptr<ChunkCursor> SqliteCatalog::read_chunks(int64_t conversation_id, int64_t end_pos, int64_t) {
  // The payloads are read one at a time after their sizes are checked: no bound is needed here.
  return std::make_unique<SqliteChunkCursor>(db_, errors(), conversation_id, end_pos);
}

std::optional<ChunkContent> SqliteCatalog::read_chunk(int64_t chunk_id) {
  auto q = prepared("SELECT n_tokens, tokens, compression, raw_size, checksum, payload, precision FROM chunks "
                    "WHERE chunk_id = ?",
                    Reading::kStoredRows);
  q.bind(1, chunk_id);
  if (!q.executeStep()) return std::nullopt;
  ChunkContent c;
  c.n_tokens = q.stored_int(0, "chunks.n_tokens");
  SQLite::Column tokens = q.getColumn(1);
  const char* text = static_cast<const char*>(tokens.getBlob());
  c.tokens_json.assign(text ? text : "", static_cast<size_t>(tokens.getBytes()));
  c.compression = q.getColumn(2).getString();
  c.raw_size = q.stored_int(3, "chunks.raw_size");
  c.checksum = q.stored_int(4, "chunks.checksum");
  SQLite::Column payload = q.getColumn(5);
  if (!payload.isNull()) {
    const uint8_t* p = static_cast<const uint8_t*>(payload.getBlob());
    c.payload.emplace(p, p + payload.getBytes());
  }
  c.precision = q.getColumn(6).getString();
  return c;
}

std::vector<ChunkHash> SqliteCatalog::digests_at(int64_t model_id, const ChunkHash& chain) {
  auto q = cached(
      "SELECT digest FROM chunk_meta WHERE model_id = ? AND chain_hash = ? AND payload_bytes > 0 "
      "AND digest IS NOT NULL");
  q.bind(1, model_id);
  bind_hash(q, 2, chain);
  std::vector<ChunkHash> out;
  while (q.executeStep()) out.push_back(blob_to_hash(q.getColumn(0)));
  return out;
}

std::optional<KeyedChunk> SqliteCatalog::find_chunk(int64_t model_id, const ChunkHash& key) {
  auto q = cached("SELECT chunk_id, length(payload) IS NULL FROM chunks WHERE model_id = ? AND hash = ?");
  q.bind(1, model_id);
  bind_hash(q, 2, key);
  if (!q.executeStep()) return std::nullopt;
  return KeyedChunk{q.getColumn(0).getInt64(), q.getColumn(1).getInt() != 0};
}

int64_t SqliteCatalog::insert_chunk(const ChunkRecord& c) {
  const EncodedChunk& e = *c.encoded;
  // A key stored already is no error: the caller inserts before it looks up
  // a chunk it expects to be new, and finds the stored one on a 0.
  auto ins = cached(
      "INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, precision, compression, "
      "raw_size, checksum, payload) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT (model_id, hash) DO NOTHING");
  ins.bind(1, c.model_id);
  bind_hash(ins, 2, c.key);
  ins.bind(3, c.first_pos);
  ins.bind(4, c.n_tokens);
  ins.bind(5, c.tokens_json);
  ins.bind(6, c.precision);
  ins.bind(7, compression_name(e.compressed));
  ins.bind(8, static_cast<int64_t>(e.raw_size));
  ins.bind(9, static_cast<int64_t>(e.checksum));
  if (e.payload.empty())
    ins.bind(10);  // a token-only chunk (a truncate or fork inside an evicted chunk): evicted too
  else
    ins.bindNoCopy(10, e.payload.data(), static_cast<int>(e.payload.size()));
  if (ins.exec() == 0) return 0;
  const int64_t id = db_.getLastInsertRowid();
  if (!c.defer_index) record_chunk_meta(statements_, errors(), id, meta_of(c), anchor_);
  return id;
}

void SqliteCatalog::restore_payload(int64_t chunk_id, const ChunkRecord& c) {
  const EncodedChunk& e = *c.encoded;
  auto u = cached(
      "UPDATE chunks SET compression = ?, raw_size = ?, checksum = ?, payload = ? WHERE chunk_id = ?");
  u.bind(1, compression_name(e.compressed));
  u.bind(2, static_cast<int64_t>(e.raw_size));
  u.bind(3, static_cast<int64_t>(e.checksum));
  u.bindNoCopy(4, e.payload.data(), static_cast<int>(e.payload.size()));
  u.bind(5, chunk_id);
  u.exec();
  record_chunk_payload(statements_, errors(), chunk_id, meta_of(c), anchor_);
}

void SqliteCatalog::link_chunk(int64_t conversation_id, int64_t seq, int64_t chunk_id) {
  // An entry at seq is replaced (an evicted chunk re-saved as new content);
  // as record_chunk_meta, without INSERT OR REPLACE's cost when there is none.
  const auto bind_link = [&](Query& q) {
    q.bind(1, conversation_id);
    q.bind(2, seq);
    q.bind(3, chunk_id);
  };
  {
    auto link = cached(
        "INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) VALUES (?1, ?2, ?3) "
        "ON CONFLICT (conversation_id, seq) DO NOTHING");
    bind_link(link);
    if (link.exec() != 0) return;
  }
  auto relink = cached("UPDATE conversation_chunks SET chunk_id = ?3 WHERE conversation_id = ?1 AND seq = ?2");
  bind_link(relink);
  relink.exec();
}

void SqliteCatalog::unlink_from(int64_t conversation_id, int64_t first_seq) {
  auto del = cached("DELETE FROM conversation_chunks WHERE conversation_id = ? AND seq >= ?");
  del.bind(1, conversation_id);
  del.bind(2, first_seq);
  del.exec();
}

void SqliteCatalog::free_unused_chunks(const std::vector<int64_t>& chunk_ids) {
  if (chunk_ids.empty()) return;
  auto del = cached(
      "DELETE FROM chunks WHERE chunk_id = ?1 AND NOT EXISTS "
      "(SELECT 1 FROM conversation_chunks WHERE chunk_id = ?1) AND NOT EXISTS "
      "(SELECT 1 FROM held_chunks WHERE chunk_id = ?1)");
  for (int64_t id : chunk_ids) {
    del.bind(1, id);
    del.exec();
    del.reset();
  }
}

SqliteCatalog::SqliteCatalog(const std::string& path, const Options& options, StoreCounters* counters) try
    : path_(path),
      options_(options),
      busy_{options.busy_timeout_ms, counters, {}},
      db_(open_store(path, options, &busy_)),
      statements_(db_) {
  open_tenant();
  // Checkpoints run in the background; with a custom VFS (fault injection)
  // SQLite's inline auto-checkpoint stays, so its I/O sequence is the caller's.
  if (!options.read_only && options.vfs_name.empty())
    checkpointer_ = std::make_unique<Checkpointer>(db_.getHandle(), path, wal_checkpoint_pages(db_, options));
  // What writers that died between their chunks and their link left.
  // Best effort: an open does not fail for it (busy: the next open, gc or vacuum).
  if (!options.read_only) {
    try {
      reclaim_dead_writers("store " + shown_location(path_));
    } catch (const Error&) {
    }
  }
} catch (const SQLite::Exception& e) {
  throw detail::sqlite_error(e);  // unnamed: open_catalog names the store
}

void SqliteCatalog::open_tenant() {
  anchor_ = tenant_anchor(options_.tenant);
  const std::string what = "store " + shown_location(path_);
  auto find = [&]() -> std::optional<int64_t> {
    SQLite::Statement q(db_, "SELECT tenant_id FROM tenants WHERE name = ?");
    q.bind(1, options_.tenant);
    if (!q.executeStep()) return std::nullopt;
    return q.getColumn(0).getInt64();
  };
  std::optional<int64_t> id = sqlite_context(what, find);
  if (!id) {
    if (options_.read_only || !options_.create_tenant_if_missing)
      throw Error(ErrorCode::kNotFound, what + ": no such tenant '" + options_.tenant + "'");
    id = sqlite_context(what + ": creating tenant '" + options_.tenant + "'", [&] {
      SqlTransaction txn(db_, what, SqlTransaction::kWrite);
      std::optional<int64_t> made = find();  // another process may have made it meanwhile
      if (!made) {
        SQLite::Statement ins(db_, "INSERT INTO tenants (name, created_ms) VALUES (?, ?)");
        ins.bind(1, options_.tenant);
        ins.bind(2, static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count()));
        ins.exec();
        made = db_.getLastInsertRowid();
      }
      txn.commit();
      return made;
    });
  }
  tenant_id_ = *id;
}

SqliteCatalog::~SqliteCatalog() {
  record_pending_uses_at_close();
  close_writer();
  // An erase a reader held up is tried once more, without waiting, once the
  // background checkpointer (which would make it busy) has stopped.
  if (!erase_pending_) return;
  checkpointer_.reset();
  erase_freed_pages(db_.getHandle(), 0, busy_);
}

int64_t SqliteCatalog::stored_payload_bytes(Scope scope) {
  auto q = prepared(scope == Scope::kStore
                        ? "SELECT coalesce(sum(payload_bytes), 0) FROM chunk_meta"
                        : "SELECT coalesce(sum(k.payload_bytes), 0) FROM chunk_meta k WHERE k.chunk_id IN "
                          "(SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c "
                          "ON c.conversation_id = cc.conversation_id WHERE c.tenant_id = ?)");
  if (scope == Scope::kTenant) q.bind(1, tenant_id_);
  q.executeStep();
  return q.getColumn(0).getInt64();
}

void SqliteCatalog::visit_least_recent(Scope scope, const PrefixIndex::ConversationVisitor& f) {
  auto q = prepared(scope == Scope::kStore
                        ? "SELECT conversation_id, name FROM conversations ORDER BY last_used_ms ASC, conversation_id ASC"
                        : "SELECT conversation_id, name FROM conversations WHERE tenant_id = ? "
                          "ORDER BY last_used_ms ASC, conversation_id ASC");
  if (scope == Scope::kTenant) q.bind(1, tenant_id_);
  while (q.executeStep())
    if (f(q.getColumn(0).getInt64(), q.getColumn(1).getString())) return;
}

std::vector<PayloadChunk> SqliteCatalog::claim_chunks(int64_t conversation_id) {
  // Every chunk the list names, with a chunk_meta row or without
  // (catalog_maintenance.h). The write transaction holds every other
  // writer's links off; a chunk a writer holds (objects first,
  // sqlite_held.cpp) is about to be linked: an eviction keeps it.
  auto q = cached(
      "SELECT cc.chunk_id, coalesce(k.payload_bytes, 0), "
      " EXISTS (SELECT 1 FROM held_chunks h WHERE h.chunk_id = cc.chunk_id), "
      " (SELECT count(*) FROM conversation_chunks u WHERE u.chunk_id = cc.chunk_id), count(*) "
      "FROM conversation_chunks cc LEFT JOIN chunk_meta k ON k.chunk_id = cc.chunk_id WHERE cc.conversation_id = ? "
      "GROUP BY cc.chunk_id ORDER BY cc.chunk_id");
  q.bind(1, conversation_id);
  std::vector<PayloadChunk> out;
  while (q.executeStep()) {
    PayloadChunk c{q.getColumn(0).getInt64(), q.getColumn(1).getInt64(), std::nullopt, q.getColumn(4).getInt64()};
    if (q.getColumn(2).getInt() == 0) c.users = q.getColumn(3).getInt64();
    out.push_back(c);
  }
  return out;
}

void SqliteCatalog::evict_payload(int64_t chunk_id) {
  sqlite_named(errors(), [&] { evict_chunk_payload(db_, statements_, chunk_id); });
}

Catalog::CompactOutcome SqliteCatalog::compact(const std::string& what, int64_t step_bytes,
                                               const std::function<void(int64_t, int64_t)>& progress) {
  return compact_store(db_, busy_, step_bytes, what, progress);
}

void SqliteCatalog::release_free_pages(const std::string& what, int64_t step_bytes,
                                       const std::function<void(int64_t, int64_t)>& progress) {
  give_back_free_pages(db_, step_bytes, what, progress);
}

bool SqliteCatalog::erase_deleted(const std::string&) {
  erase_pending_ = !erase_freed_pages(db_.getHandle(), options_.busy_timeout_ms, busy_);
  return !erase_pending_;
}

int64_t SqliteCatalog::file_bytes() {
  return file_size_or_zero(path_) + file_size_or_zero(path_ + "-wal");
}

void SqliteCatalog::wait_before_write(int64_t raw_bytes) {
  // The wait lets the WAL start over from its beginning instead of growing
  // by a large write. A small one grows it by a few pages, and a whole
  // checkpoint (another writer's large turn, copied back) would hold it
  // many times its own time; but running beside the checkpoint slows it
  // too, so it waits for a short one, once a checkpoint.
  constexpr int64_t kLargeWriteBytes = int64_t{1} << 20;
  constexpr std::chrono::milliseconds kSmallWriteWait{10};
  if (!checkpointer_) return;
  if (raw_bytes >= kLargeWriteBytes)
    checkpointer_->wait_before_write();
  else
    checkpointer_->wait_briefly_before_write(kSmallWriteWait);
}

PrefixIndex& SqliteCatalog::prefix_index() {
  if (!prefix_index_) prefix_index_ = std::make_unique<SqlitePrefixIndex>(*this, statements_, tenant_id_, anchor_);
  return *prefix_index_;
}

}  // namespace detail
}  // namespace colikv
