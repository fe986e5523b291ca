// The Catalog over PostgreSQL (see pg_catalog.h and migrations/postgres/).
#include "postgres/pg_catalog.h"

#include <algorithm>
#include <chrono>

#include "postgres/pg_migrations.h"

namespace colikv {
namespace detail {

namespace {

PgConnection::Settings settings_of(const Options& o) {
  PgConnection::Settings s;
  s.lock_timeout_ms = o.busy_timeout_ms;
  s.synchronous_commit = o.synchronous == Synchronous::kFull;
  s.read_only = o.read_only;
  return s;
}

// BEGIN (a snapshot, or a write transaction) ... COMMIT, rolled back when
// destroyed uncommitted; inside an open transaction, a savepoint. An
// outermost one names the catalog's errors by its `what` until it ends, its
// own statements' among them (a nested one is part of the operation its
// outermost names). The
// catalog hears when an outermost write transaction ends (write_ended): it
// keeps the flag its locking reads follow, and frees what the transaction
// queued once it has committed.
class PgTransaction : public Catalog::Transaction {
 public:
  PgTransaction(PgCatalog& catalog, PgConnection& conn, Catalog::Access access, const std::string& what)
      : catalog_(catalog), conn_(conn), nested_(conn.in_transaction()) {
    if (!nested_)
      named_.emplace(catalog.errors(), what, access == Catalog::Access::kRead ? Reading::kStoredRows : Reading::kAny);
    start(access);
  }
  ~PgTransaction() override {
    if (!done_) rollback();
  }

  void commit() override {
    done_ = true;
    try {
      conn_.exec(nested_ ? "RELEASE SAVEPOINT colikv_nested" : "COMMIT", "");
    } catch (...) {
      end_write(false);  // a failed COMMIT has rolled back too
      throw;
    }
    end_write(true);
  }

 private:
  void start(Catalog::Access access) {
    if (nested_) {
      conn_.exec("SAVEPOINT colikv_nested", "");
      return;
    }
    conn_.ensure_connected("");
    if (access == Catalog::Access::kRead) {
      conn_.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "");
      return;
    }
    writing_ = true;
    catalog_.write_began();
    try {
      // Shared: writers exclude only a migration (pg_migrations.cpp), which
      // takes it exclusively; among themselves, row locks (pg_catalog.h).
      // Sent with the BEGIN, one round trip for both; the key is a number
      // of the connection's own, quoted so that its minimum parses too.
      conn_.exec("BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock_shared('" +
                     std::to_string(conn_.store_lock_key()) + "'::bigint)",
                 "");
    } catch (...) {
      // A BEGIN that lost the connection began nothing to roll back: the
      // next call reconnects.
      if (conn_.in_transaction()) {
        rollback();
      } else {
        done_ = true;
        end_write(false);
      }
      throw;
    }
  }

  void end_write(bool committed) noexcept {
    if (nested_ || !writing_) return;
    writing_ = false;
    catalog_.write_ended(committed);
  }

  // Errors here are swallowed: the one that made the caller give up is the
  // one worth reporting (and a lost connection has rolled back already).
  void rollback() noexcept {
    done_ = true;
    try {
      conn_.exec(nested_ ? "ROLLBACK TO SAVEPOINT colikv_nested; RELEASE SAVEPOINT colikv_nested" : "ROLLBACK", "");
    } catch (const Error&) {
    }
    end_write(false);
  }

  PgCatalog& catalog_;
  PgConnection& conn_;
  bool nested_;
  std::optional<ErrorContext::Scope> named_;  // an outermost one's
  bool writing_ = false;  // an outermost write transaction
  bool done_ = false;
};


// A conversation's chunk list with its chunks' fields and payloads, in one
// statement whose rows arrive one at a time (PgRowStream): the scan checks and
// decodes a chunk while the server sends the next, and memory stays about one
// chunk in flight whatever the conversation's size. A payload larger than any
// chunk of the model can take is not sent (its size is, which the scan rejects).
class PgChunkCursor : public ChunkCursor {
 public:
  PgChunkCursor(PgConnection& conn, const std::string& sql, const PgParams& params)
      : stream_(conn, sql, params, "reading a chunk list") {}

  bool next(ChunkListRow& r) override {
    row_ = stream_.next();
    if (!row_) return false;
    const PgRows& rows = *row_;
    r.seq = rows.int64(0, 0);
    r.chunk_id = rows.int64(0, 1);
    r.first_pos = rows.int64(0, 2);
    r.n_tokens = rows.int64(0, 3);
    r.tokens_json = rows.text(0, 4);
    r.compression = rows.text(0, 5);
    r.raw_size = rows.int64(0, 6);
    r.checksum = rows.int64(0, 7);
    r.payload_bytes = rows.is_null(0, 8) ? std::nullopt : std::optional<int64_t>(rows.int64(0, 8));
    r.key = rows.hash(0, 9);
    r.precision = rows.text(0, 10);
    r.digest = rows.optional_hash(0, 11);
    return true;
  }

  // The payload of the row next() returned last; `bytes` is its size in that row.
  void read_payload(int64_t chunk_id, int64_t bytes, std::vector<uint8_t>& out, const std::string& what) override {
    if (!row_ || row_->int64(0, 1) != chunk_id || row_->is_null(0, 12) || row_->length(0, 12) != bytes)
      throw Error(ErrorCode::kCorrupt, what + ": reading its payload: the payload is missing or not the size recorded");
    out.assign(row_->bytes(0, 12), row_->bytes(0, 12) + bytes);
  }

 private:
  PgRowStream stream_;
  std::optional<PgRows> row_;  // the row next() returned last
};

}  // namespace

PgCatalog::PgCatalog(const std::string& uri, const Options& options) : conn_(uri, settings_of(options)) {
  open_postgres_schema(conn_, options.create_if_missing, options.read_only, conn_.server());
  open_tenant(options);
  // What a writer that died after its commit left queued (schema 6).
  if (!options.read_only) free_queued_chunks(/*wait=*/false);
  // Last: errors thrown while opening are named by the opener (open_catalog).
  conn_.set_errors(&errors());
}

void PgCatalog::write_began() { writing_ = true; }

void PgCatalog::write_ended(bool committed) noexcept {
  writing_ = false;
  const bool queued = queued_;
  queued_ = false;
  if (committed && queued) free_queued_chunks(/*wait=*/false);
}

void PgCatalog::open_tenant(const Options& options) {
  anchor_ = tenant_anchor(options.tenant);
  PgParams p;
  p.add(options.tenant);
  PgRows r = run("SELECT tenant_id FROM tenants WHERE name = $1", p, "reading the tenant");
  if (r.size() == 0) {
    const std::string note = tenant_refusal_note();
    if (options.read_only || !options.create_tenant_if_missing || !note.empty())
      throw PgError(ErrorCode::kNotFound, conn_.server() + ": no such tenant '" + options.tenant + "'" + note);
    const int64_t now = static_cast<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    PgParams q;
    q.add(options.tenant).add(now);
    // Another host may create it at the same time: either insert wins.
    run("INSERT INTO tenants (name, created_ms) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", q,
        "creating the tenant");
    r = run("SELECT tenant_id FROM tenants WHERE name = $1", p, "reading the tenant");
    if (r.size() == 0)
      throw PgError(ErrorCode::kNotFound, conn_.server() + ": no such tenant '" + options.tenant + "'");
  }
  tenant_id_ = r.int64(0, 0);
}

PgRows PgCatalog::run(const char* sql, const PgParams& params, const char* what) {
  return conn_.query(sql, params, what);
}

std::unique_ptr<Catalog::Transaction> PgCatalog::begin(Access access, const std::string& what) {
  if (access == Access::kWriteIfFree) {
    if (!conn_.in_transaction()) return nullptr;  // a row lock may be waited for only once it is taken
    access = Access::kWrite;
  }
  return std::make_unique<PgTransaction>(*this, conn_, access, what);
}

std::optional<ConversationRow> PgCatalog::find_conversation(const std::string& name) {
  PgParams p;
  p.add(name).add(tenant_id_);
  // A writer locks the row it decides on: a second writer of the
  // conversation waits here for the first to end, then reads its generation.
  const std::string sql = std::string("SELECT conversation_id, model_id, token_count, generation, precision "
                                      "FROM conversations WHERE name = $1 AND tenant_id = $2") +
                          (writing_ ? " FOR NO KEY UPDATE" : "");
  PgRows r = run(sql.c_str(), p, "reading a conversation");
  if (r.size() == 0) return std::nullopt;
  ConversationRow c;
  c.id = r.int64(0, 0);
  c.name = name;
  c.model_id = r.int64(0, 1);
  c.count = r.int64(0, 2);
  c.generation = r.int64(0, 3);
  c.precision = r.text(0, 4);
  return c;
}

int64_t PgCatalog::insert_conversation(const NewConversation& c) {
  PgParams p;
  p.add(c.name).add(c.model_id).add(c.precision).add(c.now_ms).add(c.title).add(c.metadata).add(tenant_id_);
  // ON CONFLICT waits for a racing creator of the name and, once it has
  // committed, inserts nothing: the loser's error says why.
  PgRows r = run("INSERT INTO conversations (name, model_id, precision, created_ms, updated_ms, last_used_ms, title, "
                 "metadata, tenant_id) VALUES ($1, $2, $3, $4, $4, " COLIKV_PG_SERVER_MS ", $5, $6, $7) "
                 "ON CONFLICT (tenant_id, name) DO NOTHING RETURNING conversation_id",
                 p, "creating a conversation");
  if (r.size() == 0) throw_name_taken();
  return r.int64(0, 0);
}

void PgCatalog::throw_name_taken() {
  conn_.raise(PgError(ErrorCode::kConflict, "another writer created a conversation with this id meanwhile"));
}

int64_t PgCatalog::insert_fork(const NewFork& f) {
  PgParams p;
  p.add(f.name).add(f.count).add(f.now_ms).add(f.parent_id).add(tenant_id_);
  PgRows r = run("INSERT INTO conversations (name, model_id, token_count, precision, title, metadata, parent_id, "
                 "forked_at, created_ms, updated_ms, last_used_ms, tenant_id) "
                 "SELECT $1::text, model_id, $2::bigint, precision, title, metadata, conversation_id, $2::bigint, "
                 "$3::bigint, $3::bigint, " COLIKV_PG_SERVER_MS ", tenant_id FROM conversations WHERE conversation_id = $4 "
                 "AND tenant_id = $5 ON CONFLICT (tenant_id, name) DO NOTHING RETURNING conversation_id",
                 p, "creating a fork");
  if (r.size() == 0) {
    PgParams q;
    q.add(f.parent_id).add(tenant_id_);
    if (run("SELECT 1 FROM conversations WHERE conversation_id = $1 AND tenant_id = $2", q, "creating a fork").size() == 0)
      conn_.raise(PgError(ErrorCode::kNotFound, "the conversation to fork is not this tenant's, or no longer exists"));
    throw_name_taken();
  }
  return r.int64(0, 0);
}

void PgCatalog::remove_conversation(int64_t conversation_id) {
  PgParams p;
  p.add(conversation_id);
  // One round trip for both.
  run("WITH links AS (DELETE FROM conversation_chunks WHERE conversation_id = $1) "
      "DELETE FROM conversations WHERE conversation_id = $1",
      p, "deleting a conversation");
}

void PgCatalog::touch_used(int64_t conversation_id, int64_t) {
  PgParams p;
  p.add(conversation_id);
  run("UPDATE conversations SET last_used_ms = " COLIKV_PG_SERVER_MS " WHERE conversation_id = $1", p,
      "updating a conversation");
}

std::optional<int64_t> PgCatalog::find_model_id(const std::string& signature) {
  PgParams p;
  p.add(signature).add(tenant_id_);
  // A tenant's model rows are its own (0007_tenant_writes.sql).
  PgRows r = run("SELECT model_id FROM models WHERE signature = $1 AND tenant_id = $2", p, "reading a model");
  if (r.size() == 0) return std::nullopt;
  return r.int64(0, 0);
}

std::optional<StoredModel> PgCatalog::read_model(int64_t model_id) {
  PgParams p;
  p.add(model_id);
  PgRows r = run("SELECT n_layers, kv_lora, qk_rope, index_hd, n_indexed, vocab, weights_id, chunk_tokens, signature "
                 "FROM models WHERE model_id = $1",
                 p, "reading a model");
  if (r.size() == 0) return std::nullopt;
  StoredModel m;
  m.sig.n_layers = static_cast<int>(r.int64(0, 0));
  m.sig.kv_lora = static_cast<int>(r.int64(0, 1));
  m.sig.qk_rope = static_cast<int>(r.int64(0, 2));
  m.sig.index_hd = static_cast<int>(r.int64(0, 3));
  m.sig.n_indexed = static_cast<int>(r.int64(0, 4));
  m.sig.vocab = static_cast<int>(r.int64(0, 5));
  m.sig.weights_id = r.text(0, 6);
  m.chunk_tokens = r.int64(0, 7);
  m.signature = r.text(0, 8);
  return m;
}

void PgCatalog::insert_model(const ModelSignature& sig, int64_t chunk_tokens, int64_t now_ms) {
  PgParams p;
  p.add(sig.to_string()).add(sig.n_layers).add(sig.kv_lora).add(sig.qk_rope).add(sig.index_hd).add(sig.n_indexed);
  p.add(sig.vocab).add(sig.weights_id).add(static_cast<int64_t>(sig.record_bytes())).add(chunk_tokens).add(now_ms);
  p.add(tenant_id_);
  // Another writer of the tenant may record the same model at the same
  // time: either's row serves (the core compares its chunk size).
  run("INSERT INTO models (signature, n_layers, kv_lora, qk_rope, index_hd, n_indexed, vocab, weights_id, "
      "record_bytes, chunk_tokens, created_ms, tenant_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) "
      "ON CONFLICT (tenant_id, signature) DO NOTHING",
      p, "recording a model");
}

std::vector<ChunkSummary> PgCatalog::chunk_list(int64_t conversation_id) {
  PgParams p;
  p.add(conversation_id);
  PgRows r = run("SELECT ch.chunk_id, ch.hash, k.chain_hash, k.digest, ch.n_tokens, ch.payload IS NULL, cc.seq, "
                 "ch.first_pos FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                 "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id WHERE cc.conversation_id = $1 ORDER BY cc.seq",
                 p, "reading a chunk list");
  std::vector<ChunkSummary> out;
  out.reserve(static_cast<size_t>(r.size()));
  for (int i = 0; i < r.size(); ++i)
    out.push_back({r.int64(i, 0), r.hash(i, 1), r.hash(i, 2), r.optional_hash(i, 3), r.int64(i, 4), r.int64(i, 5) != 0,
                   r.int64(i, 6), r.int64(i, 7)});
  return out;
}

std::unique_ptr<ChunkCursor> PgCatalog::read_chunks(int64_t conversation_id, int64_t end_pos, int64_t max_payload_bytes) {
  PgParams p;
  p.add(conversation_id).add(end_pos).add(max_payload_bytes);
  return std::make_unique<PgChunkCursor>(
      conn_,
      "SELECT cc.seq, ch.chunk_id, ch.first_pos, ch.n_tokens, ch.tokens, ch.compression, ch.raw_size, "
      "ch.checksum, octet_length(ch.payload)::bigint, ch.hash, ch.precision, k.digest, "
      "CASE WHEN octet_length(ch.payload) <= $3::bigint THEN ch.payload END "
      "FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
      "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id "
      "WHERE cc.conversation_id = $1 AND ch.first_pos < $2 ORDER BY cc.seq",
      p);
}

std::optional<ChunkContent> PgCatalog::read_chunk(int64_t chunk_id) {
  PgParams p;
  p.add(chunk_id);
  PgRows r = run("SELECT n_tokens, tokens, compression, raw_size, checksum, payload, precision FROM chunks "
                 "WHERE chunk_id = $1",
                 p, "reading a chunk");
  if (r.size() == 0) return std::nullopt;
  ChunkContent c;
  c.n_tokens = r.int64(0, 0);
  c.tokens_json = r.text(0, 1);
  c.compression = r.text(0, 2);
  c.raw_size = r.int64(0, 3);
  c.checksum = r.int64(0, 4);
  if (!r.is_null(0, 5)) c.payload.emplace(r.bytes(0, 5), r.bytes(0, 5) + r.length(0, 5));
  c.precision = r.text(0, 6);
  return c;
}

std::vector<ChunkHash> PgCatalog::digests_at(int64_t model_id, const ChunkHash& chain) {
  PgParams p;
  p.add(model_id).add_hash(chain);
  PgRows r = run("SELECT digest FROM chunk_meta WHERE model_id = $1 AND chain_hash = $2 AND payload_bytes > 0 "
                 "AND digest IS NOT NULL",
                 p, "reading chunk digests");
  std::vector<ChunkHash> out;
  for (int i = 0; i < r.size(); ++i) out.push_back(r.hash(i, 0));
  return out;
}

std::optional<KeyedChunk> PgCatalog::find_chunk(int64_t model_id, const ChunkHash& key) {
  PgParams p;
  p.add(model_id).add_hash(key).add(tenant_id_);
  const std::string sql = "SELECT chunk_id, payload IS NULL FROM chunks WHERE model_id = $1 AND hash = $2 AND tenant_id = $3";
  if (!writing_) {
    PgRows r = run(sql.c_str(), p, "finding a chunk");
    if (r.size() == 0) return std::nullopt;
    return KeyedChunk{r.int64(0, 0), r.int64(0, 1) != 0};
  }
  // The writer about to link it holds it FOR SHARE until its commit: a freer
  // or an evicter locks FOR UPDATE first and, finding it held, skips it (an
  // evicter keeps it; a freer queues it). Shared, so that writers linking
  // the same chunk (a common prefix) do not wait for each other. After a
  // wait, the row read is the one the other writer left: deleted or evicted
  // (none locked; the caller's insert then finds the evicted one).
  //
  // An evicted chunk is not locked shared: its finder restores its values,
  // which needs the row to itself, and two writers restoring it at once would
  // both hold it shared and deadlock upgrading. The first statement only
  // says it is there; the second locks it FOR NO KEY UPDATE, so that the
  // second restorer waits for the first and then links the restored chunk.
  PgRows r = run("WITH held AS (SELECT chunk_id FROM chunks WHERE model_id = $1 AND hash = $2 AND tenant_id = $3 "
                 "AND payload IS NOT NULL FOR SHARE) "
                 "SELECT (SELECT chunk_id FROM held), EXISTS (SELECT 1 FROM chunks WHERE model_id = $1 AND hash = $2 "
                 "AND tenant_id = $3 AND payload IS NULL)::int",
                 p, "finding a chunk");
  if (!r.is_null(0, 0)) return KeyedChunk{r.int64(0, 0), false};
  if (r.int64(0, 1) == 0) return std::nullopt;
  r = run((sql + " FOR NO KEY UPDATE").c_str(), p, "finding a chunk");
  if (r.size() == 0) return std::nullopt;
  return KeyedChunk{r.int64(0, 0), r.int64(0, 1) != 0};
}

void PgCatalog::record_chunk_meta(int64_t chunk_id, const ChunkRecord& c, int64_t payload_bytes) {
  PgParams p;
  p.add(chunk_id).add(c.model_id).add(c.precision);
  if (c.index_first == 0)
    p.add_bytes(anchor_.data(), anchor_.size());  // a region at position 0 follows the tenant's anchor (X'' for "")
  else
    p.add_hash(c.index_prev);
  p.add(c.index_tokens_json).add(payload_bytes).add_hash(c.chain).add_hash(c.digest).add(tenant_id_);
  run("INSERT INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, chain_hash, digest, "
      "tenant_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (chunk_id) DO UPDATE SET "
      "model_id = excluded.model_id, "
      "precision = excluded.precision, prev_hash = excluded.prev_hash, tokens = excluded.tokens, "
      "payload_bytes = excluded.payload_bytes, chain_hash = excluded.chain_hash, digest = excluded.digest",
      p, "recording a chunk");
}

int64_t PgCatalog::insert_chunk(const ChunkRecord& c) {
  const EncodedChunk& e = *c.encoded;
  PgParams p;
  p.add(c.model_id).add_hash(c.key).add(c.first_pos).add(c.n_tokens).add(c.tokens_json).add(c.precision);
  p.add(compression_name(e.compressed)).add(static_cast<int64_t>(e.raw_size)).add(static_cast<int64_t>(e.checksum));
  if (e.payload.empty())
    p.add_null();  // a token-only chunk (a truncate or fork inside an evicted chunk): evicted too
  else
    p.add_bytes(e.payload.data(), e.payload.size());
  p.add(tenant_id_);  // the row-level security of a tenant's role reads it (0004_tenant_roles.sql)
  // The content key is unique (0004_tenant_roles.sql; tenant_id is never NULL
  // in a row colikv writes, so the key always conflicts): a writer storing
  // the same content at the same time waits here for the first and, once it
  // has committed, stores nothing and links the first one's chunk.
  PgRows r = run("INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, precision, compression, "
                 "raw_size, checksum, payload, tenant_id) "
                 "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
                 "ON CONFLICT (model_id, hash, tenant_id) DO NOTHING RETURNING chunk_id",
                 p, "storing a chunk");
  if (r.size() == 0) return 0;
  const int64_t id = r.int64(0, 0);
  record_chunk_meta(id, c, static_cast<int64_t>(e.payload.size()));
  return id;
}

void PgCatalog::restore_payload(int64_t chunk_id, const ChunkRecord& c) {
  const EncodedChunk& e = *c.encoded;
  PgParams p;
  p.add(compression_name(e.compressed)).add(static_cast<int64_t>(e.raw_size)).add(static_cast<int64_t>(e.checksum));
  p.add_bytes(e.payload.data(), e.payload.size()).add(chunk_id);
  run("UPDATE chunks SET compression = $1, raw_size = $2, checksum = $3, payload = $4 WHERE chunk_id = $5", p,
      "restoring a chunk's payload");
  PgParams m;
  m.add(static_cast<int64_t>(e.payload.size())).add(chunk_id);
  if (run("UPDATE chunk_meta SET payload_bytes = $1 WHERE chunk_id = $2", m, "recording a chunk").affected() == 0)
    record_chunk_meta(chunk_id, c, static_cast<int64_t>(e.payload.size()));
}

std::string PgCatalog::id_array(const std::vector<int64_t>& ids) {
  std::string a = "{";
  for (size_t i = 0; i < ids.size(); ++i) a += (i ? "," : "") + std::to_string(ids[i]);
  return a + "}";
}

void PgCatalog::free_unused_chunks(const std::vector<int64_t>& chunk_ids) {
  if (chunk_ids.empty()) return;
  PgParams p;
  p.add(id_array(chunk_ids));
  // Never waits (schema 6, 0006_chunks_to_free.sql): a chunk another writer
  // holds is skipped and queued instead. Waiting here, with this
  // transaction's own locks held (a new chunk another writer stores too, a
  // chunk locked before), could close a cycle with that writer.
  PgRows locked = run("SELECT chunk_id FROM chunks WHERE chunk_id = ANY($1::bigint[]) FOR UPDATE SKIP LOCKED", p,
                      "freeing chunks");
  std::vector<int64_t> ids;
  for (int i = 0; i < locked.size(); ++i) ids.push_back(locked.int64(i, 0));
  delete_unlinked(ids);
  std::sort(ids.begin(), ids.end());
  std::vector<int64_t> skipped;
  for (const int64_t id : chunk_ids)
    if (!std::binary_search(ids.begin(), ids.end(), id)) skipped.push_back(id);  // held, or gone already
  if (skipped.empty()) return;
  PgParams q;
  q.add(id_array(skipped)).add(tenant_id_);
  run("INSERT INTO chunks_to_free (chunk_id, tenant_id) SELECT unnest($1::bigint[]), $2 ON CONFLICT DO NOTHING", q,
      "queueing chunks to free");
  queued_ = true;
}

// A statement of its own after the row locks: a new READ COMMITTED snapshot
// sees every link committed by a writer that held one of them before. One
// DELETE ... NOT EXISTS would not: after a wait for a row lock it re-checks
// the row, but its subquery still reads the snapshot from before the wait.
void PgCatalog::delete_unlinked(const std::vector<int64_t>& locked_ids) {
  if (locked_ids.empty()) return;
  PgParams p;
  p.add(id_array(locked_ids));
  run("DELETE FROM chunks ch WHERE ch.chunk_id = ANY($1::bigint[]) AND NOT EXISTS "
      "(SELECT 1 FROM conversation_chunks cc WHERE cc.chunk_id = ch.chunk_id)",
      p, "freeing chunks");
}

void PgCatalog::free_queued_chunks() { free_queued_chunks(/*wait=*/true); }

// Outside any transaction; each transaction below holds at most the locks
// it takes without waiting, or one chunk's lock it waited for with nothing
// else held, so that it is never part of a cycle of waits. Best effort: what
// it cannot free stays queued for the next writer, gc or open.
void PgCatalog::free_queued_chunks(bool wait) noexcept {
  if (freeing_queue_ || conn_.in_transaction()) return;
  freeing_queue_ = true;
  try {
    const char* what = "freeing queued chunks";
    // Without waiting, only whether there is anything (every writable open
    // asks); waiting, the ids, each freed on its own.
    PgRows queue = run(wait ? "SELECT chunk_id FROM chunks_to_free ORDER BY chunk_id LIMIT 10000"
                            : "SELECT chunk_id FROM chunks_to_free LIMIT 1",
                       PgParams(), what);
    if (queue.size() > 0 && !wait) {
      const auto txn = begin(Access::kWrite, what);
      PgRows locked = run("SELECT ch.chunk_id FROM chunks_to_free f JOIN chunks ch ON ch.chunk_id = f.chunk_id "
                          "FOR UPDATE OF ch SKIP LOCKED",
                          PgParams(), what);
      std::vector<int64_t> ids;
      for (int i = 0; i < locked.size(); ++i) ids.push_back(locked.int64(i, 0));
      delete_unlinked(ids);
      PgParams p;
      p.add(id_array(ids));
      run("DELETE FROM chunks_to_free f WHERE f.chunk_id = ANY($1::bigint[]) "
          "OR NOT EXISTS (SELECT 1 FROM chunks ch WHERE ch.chunk_id = f.chunk_id)",
          p, what);
      txn->commit();
    }
    for (int i = 0; wait && i < queue.size(); ++i) {
      try {
        const auto txn = begin(Access::kWrite, what);
        PgParams p;
        p.add(queue.int64(i, 0));
        if (run("SELECT chunk_id FROM chunks WHERE chunk_id = $1 FOR UPDATE", p, what).size() > 0)
          delete_unlinked({queue.int64(i, 0)});
        run("DELETE FROM chunks_to_free WHERE chunk_id = $1", p, what);
        txn->commit();
      } catch (const Error& e) {  // PgError too
        if (e.code() != ErrorCode::kBusy) throw;  // a lock held past the timeout: the next one
      }
    }
  } catch (...) {  // a lost connection: the next call reports it
  }
  freeing_queue_ = false;
}

}  // namespace detail
}  // namespace colikv
