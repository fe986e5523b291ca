// small (new conversations): the fixed cost of one small append, in an empty
// store and in one holding many conversations, against a .coli_kv file each
// and against SQLite alone writing the same rows.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <sqlite3.h>

#include "bench.h"
#include "bench_access.h"

namespace colikv_bench {

namespace {

// A plain SQLite connection of the benchmark's own (the prefill, the floor of
// a small append), opened as colikv opens a store (access::StoreConnection:
// the same pragmas, WAL size and busy handler); its statements are finalized
// on scope exit, before the connection closes.
class RawDb {
 public:
  RawDb(const std::string& path, const colikv::Options& options) : db_(path, options) {}
  ~RawDb() {
    for (sqlite3_stmt* q : statements_) sqlite3_finalize(q);
  }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  sqlite3* handle() const { return db_.handle(); }
  void exec(const std::string& sql) { check(sqlite3_exec(handle(), sql.c_str(), nullptr, nullptr, nullptr), sql.c_str()); }
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* q = nullptr;
    check(sqlite3_prepare_v2(handle(), sql, -1, &q, nullptr), sql);
    statements_.push_back(q);
    return q;
  }
  // Steps q once (a row or done) and resets it for the next bindings.
  void run(sqlite3_stmt* q) {
    check(sqlite3_step(q), sqlite3_sql(q));
    sqlite3_reset(q);
  }

 private:
  void check(int rc, const char* what) const {
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE)
      throw colikv::Error(colikv::ErrorCode::kIO, std::string("bench sqlite: ") + what + ": " + sqlite3_errmsg(handle()));
  }

  access::StoreConnection db_;
  std::vector<sqlite3_stmt*> statements_;
};

// A JSON array of n random token ids below vocab, as colikv stores a chunk's tokens.
std::string random_tokens_json(uint64_t& rng, int64_t n, int64_t vocab) {
  std::string tokens = "[";
  for (int64_t t = 0; t < n; ++t)
    tokens += (t ? "," : "") + std::to_string(splitmix(rng) % static_cast<uint64_t>(vocab));
  return tokens + "]";
}

// Fills the store at db with `stored` conversations of `len` tokens, "p0",
// "p1", ...: the first few through append(), the rest cloned from them in SQL
// with fresh chunk keys, chain hashes, digests and token ids (so every index
// an append writes holds `stored` distinct entries), 10,000 a transaction:
// 100,000 take seconds, not the minutes of as many appends.
void prefill_store(const std::string& db, const colikv::ModelSignature& m, int64_t stored, int64_t len) {
  const int64_t seeds = std::min<int64_t>(stored, 64);
  {
    Engine e(m, len);
    colikv::Store store(db, store_options(colikv::Synchronous::kNormal));
    for (int64_t i = 0; i < seeds; ++i) {
      e.compute(0, len, 90000 + static_cast<uint64_t>(i), Kind::kFull);
      store.append("p" + std::to_string(i), m, e.tokens.data(), len, e.source());
    }
  }
  if (stored <= seeds) return;
  RawDb raw(db, store_options(colikv::Synchronous::kNormal));
  struct Link {
    int64_t conv, seq, chunk, n_tokens;
  };
  std::vector<Link> links;  // the seeds' chunks, in order
  {
    sqlite3_stmt* q = raw.prepare(
        "SELECT cc.conversation_id, cc.seq, cc.chunk_id, ch.n_tokens FROM conversation_chunks cc "
        "JOIN chunks ch USING (chunk_id) ORDER BY cc.conversation_id, cc.seq");
    while (sqlite3_step(q) == SQLITE_ROW)
      links.push_back({sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1), sqlite3_column_int64(q, 2),
                       sqlite3_column_int64(q, 3)});
  }
  std::vector<int64_t> seed_convs;
  for (const Link& l : links)
    if (seed_convs.empty() || seed_convs.back() != l.conv) seed_convs.push_back(l.conv);
  sqlite3_stmt* clone_conv = raw.prepare(
      "INSERT INTO conversations (name, model_id, token_count, precision, title, metadata, generation, created_ms, "
      "updated_ms, last_used_ms, tenant_id) SELECT ?, model_id, token_count, precision, title, metadata, generation, "
      "created_ms, updated_ms, last_used_ms, tenant_id FROM conversations WHERE conversation_id = ?");
  sqlite3_stmt* clone_chunk = raw.prepare(
      "INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, precision, compression, raw_size, checksum, "
      "payload) SELECT model_id, randomblob(32), first_pos, n_tokens, ?, precision, compression, raw_size, checksum, "
      "payload FROM chunks WHERE chunk_id = ?");
  sqlite3_stmt* clone_meta = raw.prepare(
      "INSERT INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, chain_hash, digest) "
      "SELECT ?, model_id, precision, prev_hash, ?, payload_bytes, randomblob(32), randomblob(32) FROM chunk_meta "
      "WHERE chunk_id = ?");
  sqlite3_stmt* link = raw.prepare("INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) VALUES (?, ?, ?)");
  uint64_t rng = 77;
  for (int64_t i = seeds; i < stored; ++i) {
    if ((i - seeds) % 10000 == 0) raw.exec("BEGIN");
    const int64_t seed = seed_convs[static_cast<size_t>(i % static_cast<int64_t>(seed_convs.size()))];
    const std::string name = "p" + std::to_string(i);
    sqlite3_bind_text(clone_conv, 1, name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(clone_conv, 2, seed);
    raw.run(clone_conv);
    const int64_t conv = sqlite3_last_insert_rowid(raw.handle());
    for (const Link& l : links) {
      if (l.conv != seed) continue;
      const std::string tokens = random_tokens_json(rng, l.n_tokens, m.vocab);
      sqlite3_bind_text(clone_chunk, 1, tokens.c_str(), -1, SQLITE_STATIC);
      sqlite3_bind_int64(clone_chunk, 2, l.chunk);
      raw.run(clone_chunk);
      const int64_t chunk = sqlite3_last_insert_rowid(raw.handle());
      sqlite3_bind_int64(clone_meta, 1, chunk);
      sqlite3_bind_text(clone_meta, 2, tokens.c_str(), -1, SQLITE_STATIC);
      sqlite3_bind_int64(clone_meta, 3, l.chunk);
      raw.run(clone_meta);
      sqlite3_bind_int64(link, 1, conv);
      sqlite3_bind_int64(link, 2, l.seq);
      sqlite3_bind_int64(link, 3, chunk);
      raw.run(link);
    }
    if ((i - seeds) % 10000 == 9999 || i + 1 == stored) raw.exec("COMMIT");
  }
  raw.exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

// SQLite's own cost of the rows one new conversation of `len` tokens (one
// chunk) adds, without colikv's work (encoding, digests, the reads before the
// write): `count` times the four writing statements an append of it runs
// (the conversation with its count, its chunk with a payload of the size
// colikv just stored, chunk_meta, the link), prepared once, one transaction each, on
// the store colikv has just appended to, through a connection set up as
// colikv's (RawDb); SQLite checkpoints inline, at the WAL size where colikv's
// background checkpointer starts one. Returns each transaction's milliseconds.
std::vector<double> time_sqlite_rows(const std::string& db, colikv::Synchronous sync, int64_t count, int64_t len,
                                     int64_t vocab) {
  RawDb raw(db, store_options(sync));
  int64_t model_id = 0, raw_size = 0, payload_bytes = 0, tenant_id = 0;
  std::string compression, prev;
  {
    sqlite3_stmt* q = raw.prepare(
        "SELECT ch.model_id, ch.raw_size, ch.compression, length(ch.payload), m.prev_hash, c.tenant_id "
        "FROM conversation_chunks cc JOIN chunks ch USING (chunk_id) JOIN chunk_meta m USING (chunk_id) "
        "JOIN conversations c USING (conversation_id) ORDER BY cc.conversation_id DESC LIMIT 1");
    if (sqlite3_step(q) != SQLITE_ROW) throw colikv::Error(colikv::ErrorCode::kIO, "bench: no chunk to copy");
    model_id = sqlite3_column_int64(q, 0);
    raw_size = sqlite3_column_int64(q, 1);
    compression = reinterpret_cast<const char*>(sqlite3_column_text(q, 2));
    payload_bytes = sqlite3_column_int64(q, 3);
    prev.assign(static_cast<const char*>(sqlite3_column_blob(q, 4)), static_cast<size_t>(sqlite3_column_bytes(q, 4)));
    tenant_id = sqlite3_column_int64(q, 5);
    sqlite3_reset(q);  // no statement left open: it would hold a read snapshot through the timed writes
  }
  sqlite3_stmt* begin = raw.prepare("BEGIN IMMEDIATE");
  sqlite3_stmt* commit = raw.prepare("COMMIT");
  sqlite3_stmt* conv = raw.prepare(
      "INSERT INTO conversations (name, model_id, precision, created_ms, updated_ms, last_used_ms, title, metadata, "
      "tenant_id, token_count, generation) VALUES (?, ?, 'f32', ?, ?, ?, '', '{}', ?, ?, 1)");
  sqlite3_stmt* chunk = raw.prepare(
      "INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, precision, compression, raw_size, checksum, "
      "payload) VALUES (?, ?, 0, ?, ?, 'f32', ?, ?, ?, ?)");
  sqlite3_stmt* meta = raw.prepare(
      "INSERT OR REPLACE INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, "
      "chain_hash, digest) VALUES (?, ?, 'f32', ?, ?, ?, ?, ?)");
  sqlite3_stmt* link = raw.prepare("INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) VALUES (?, 0, ?)");
  uint64_t rng = 4242;
  auto random_bytes = [&](std::string& out, int64_t n) {
    out.resize(static_cast<size_t>(n));
    for (char& c : out) c = static_cast<char>(splitmix(rng));
  };
  std::string key, chain, digest, payload;
  std::vector<double> ms;
  for (int64_t i = 0; i < count; ++i) {
    const std::string name = "sqlite-rows-" + std::to_string(i), tokens = random_tokens_json(rng, len, vocab);
    random_bytes(key, 32);
    random_bytes(chain, 32);
    random_bytes(digest, 32);
    random_bytes(payload, payload_bytes);
    const auto t0 = Clock::now();
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    raw.run(begin);
    sqlite3_bind_text(conv, 1, name.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_int64(conv, 2, model_id);
    for (int k = 3; k <= 5; ++k) sqlite3_bind_int64(conv, k, now);
    sqlite3_bind_int64(conv, 6, tenant_id);
    sqlite3_bind_int64(conv, 7, len);
    raw.run(conv);
    const int64_t conversation_id = sqlite3_last_insert_rowid(raw.handle());
    sqlite3_bind_int64(chunk, 1, model_id);
    sqlite3_bind_blob(chunk, 2, key.data(), 32, SQLITE_STATIC);
    sqlite3_bind_int64(chunk, 3, len);
    sqlite3_bind_text(chunk, 4, tokens.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_text(chunk, 5, compression.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_int64(chunk, 6, raw_size);
    sqlite3_bind_int64(chunk, 7, static_cast<int64_t>(splitmix(rng) & 0xffffffffu));
    sqlite3_bind_blob(chunk, 8, payload.data(), static_cast<int>(payload.size()), SQLITE_STATIC);
    raw.run(chunk);
    const int64_t chunk_id = sqlite3_last_insert_rowid(raw.handle());
    sqlite3_bind_int64(meta, 1, chunk_id);
    sqlite3_bind_int64(meta, 2, model_id);
    sqlite3_bind_blob(meta, 3, prev.data(), static_cast<int>(prev.size()), SQLITE_STATIC);
    sqlite3_bind_text(meta, 4, tokens.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_int64(meta, 5, payload_bytes);
    sqlite3_bind_blob(meta, 6, chain.data(), 32, SQLITE_STATIC);
    sqlite3_bind_blob(meta, 7, digest.data(), 32, SQLITE_STATIC);
    raw.run(meta);
    sqlite3_bind_int64(link, 1, conversation_id);
    sqlite3_bind_int64(link, 2, chunk_id);
    raw.run(link);
    raw.run(commit);
    ms.push_back(since(t0) * 1e3);
  }
  return ms;
}

}  // namespace

// Many new conversations of `len` tokens each (a gateway filling a store):
// the fixed cost of one small append, in a store that holds `stored`
// conversations already (prefill_store). Baseline: one .coli_kv file each.
void bench_small_appends(const Config& cfg, const Shape& shape, colikv::Synchronous sync, int64_t count, int64_t len,
                         int64_t stored) {
  const colikv::ModelSignature& m = shape.m;
  const std::string db = cfg.dir + "/appends.db", dir = cfg.dir + "/appends";
  remove_store(db);
  ::mkdir(dir.c_str(), 0755);
  Engine e(m, len);
  std::vector<double> c, b;
  // Filled once a run (the first sync mode's), copied for the next.
  static double fill_s = 0;
  const std::string filled = cfg.dir + "/appends-" + std::to_string(stored) + ".db";
  if (stored > 0 && file_size(filled) == 0) {
    const auto t_fill = Clock::now();
    prefill_store(filled, m, stored, len);
    fill_s = since(t_fill);
  }
  if (stored > 0) std::filesystem::copy_file(filled, db, std::filesystem::copy_options::overwrite_existing);
  {
    colikv::Store store(db, store_options(sync));
    for (int64_t i = 0; i < count; ++i) {
      e.compute(0, len, 7000 + static_cast<uint64_t>(i), Kind::kFull);
      auto t0 = Clock::now();
      store.append("c" + std::to_string(i), m, e.tokens.data(), len, e.source());
      c.push_back(since(t0) * 1e3);
    }
  }
  const std::vector<double> rows = time_sqlite_rows(db, sync, count, len, m.vocab);
  for (int64_t i = 0; i < count; ++i) {
    e.compute(0, len, 7000 + static_cast<uint64_t>(i), Kind::kFull);
    auto t0 = Clock::now();
    Baseline f(dir + "/c" + std::to_string(i) + ".coli_kv", m, sync == colikv::Synchronous::kFull);
    f.append(e, len);
    b.push_back(since(t0) * 1e3);
  }
  for (int64_t i = 0; i < count; ++i) ::unlink((dir + "/c" + std::to_string(i) + ".coli_kv").c_str());
  ::rmdir(dir.c_str());
  remove_store(db);
  const bool normal = sync == colikv::Synchronous::kNormal;
  const double med = median(c);
  char fill[64] = "";
  if (stored > 0) std::snprintf(fill, sizeof fill, " (prefilled in %.0f s)", fill_s);
  const std::string metric =
      stored > 0 ? "new conversation append @" + std::to_string(stored / 1000) + "k" : "new conversation append";
  add({"small", shape.name, "full", "f32", sync_name(sync), metric, "ms", med, median(b), true,
       normal ? "<=0.3ms" : "", normal ? med <= 0.3 : -1,
       std::to_string(count) + " conversations of " + std::to_string(len) + " tokens, median" +
           (stored > 0 ? " after " + std::to_string(stored) + " stored" + fill : std::string())});
  add({"small", shape.name, "full", "f32", sync_name(sync), metric + " p95", "ms", pct(c, 0.95), pct(b, 0.95), true,
       "", -1, ""});
  add({"small", shape.name, "full", "f32", sync_name(sync), metric + " / SQLite's rows", "ms", med, median(rows), true,
       "", -1, "baseline: the same rows in plain SQLite, prepared, one transaction each, after colikv's on the store"});
}

}  // namespace colikv_bench
