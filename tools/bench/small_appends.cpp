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
// write): the four rows an append of it writes (the conversation with its
// count, its chunk with a payload of the size colikv stored, chunk_meta, the
// link), each by a plain INSERT (none of the conflict clauses colikv needs
// for a name taken or a row there already), prepared once, one transaction
// each, through a connection set up as colikv's (RawDb); SQLite checkpoints
// inline, at the WAL size where colikv's background checkpointer starts one.
// Its store is a copy of colikv's taken before the timed appends, so that
// both sides write into equal files and grow equal WALs.
class SqliteRowsFloor {
 public:
  SqliteRowsFloor(const std::string& db, colikv::Synchronous sync, int64_t len, int64_t vocab)
      : raw_(db, store_options(sync)), len_(len), vocab_(vocab) {
    sqlite3_stmt* q = raw_.prepare(
        "SELECT ch.model_id, ch.raw_size, ch.compression, length(ch.payload), m.prev_hash, c.tenant_id "
        "FROM conversation_chunks cc JOIN chunks ch USING (chunk_id) JOIN chunk_meta m USING (chunk_id) "
        "JOIN conversations c USING (conversation_id) ORDER BY cc.conversation_id DESC LIMIT 1");
    if (sqlite3_step(q) != SQLITE_ROW) throw colikv::Error(colikv::ErrorCode::kIO, "bench: no chunk to copy");
    model_id_ = sqlite3_column_int64(q, 0);
    raw_size_ = sqlite3_column_int64(q, 1);
    compression_ = reinterpret_cast<const char*>(sqlite3_column_text(q, 2));
    payload_bytes_ = sqlite3_column_int64(q, 3);
    prev_.assign(static_cast<const char*>(sqlite3_column_blob(q, 4)), static_cast<size_t>(sqlite3_column_bytes(q, 4)));
    tenant_id_ = sqlite3_column_int64(q, 5);
    sqlite3_reset(q);  // no statement left open: it would hold a read snapshot through the timed writes
    begin_ = raw_.prepare("BEGIN IMMEDIATE");
    commit_ = raw_.prepare("COMMIT");
    conv_ = raw_.prepare(
        "INSERT INTO conversations (name, model_id, precision, created_ms, updated_ms, last_used_ms, title, metadata, "
        "tenant_id, token_count, generation) VALUES (?, ?, 'f32', ?, ?, ?, '', '{}', ?, ?, 1)");
    chunk_ = raw_.prepare(
        "INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, precision, compression, raw_size, checksum, "
        "payload) VALUES (?, ?, 0, ?, ?, 'f32', ?, ?, ?, ?)");
    meta_ = raw_.prepare(
        "INSERT INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, "
        "chain_hash, digest) VALUES (?, ?, 'f32', ?, ?, ?, ?, ?)");
    link_ = raw_.prepare("INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) VALUES (?, 0, ?)");
  }

  // Writes conversation i's rows in one transaction; returns its milliseconds.
  double write(int64_t i) {
    const std::string name = "sqlite-rows-" + std::to_string(i), tokens = random_tokens_json(rng_, len_, vocab_);
    random_bytes(key_, 32);
    random_bytes(chain_, 32);
    random_bytes(digest_, 32);
    random_bytes(payload_, payload_bytes_);
    const auto t0 = Clock::now();
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    raw_.run(begin_);
    sqlite3_bind_text(conv_, 1, name.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_int64(conv_, 2, model_id_);
    for (int k = 3; k <= 5; ++k) sqlite3_bind_int64(conv_, k, now);
    sqlite3_bind_int64(conv_, 6, tenant_id_);
    sqlite3_bind_int64(conv_, 7, len_);
    raw_.run(conv_);
    const int64_t conversation_id = sqlite3_last_insert_rowid(raw_.handle());
    sqlite3_bind_int64(chunk_, 1, model_id_);
    sqlite3_bind_blob(chunk_, 2, key_.data(), 32, SQLITE_STATIC);
    sqlite3_bind_int64(chunk_, 3, len_);
    sqlite3_bind_text(chunk_, 4, tokens.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_text(chunk_, 5, compression_.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_int64(chunk_, 6, raw_size_);
    sqlite3_bind_int64(chunk_, 7, static_cast<int64_t>(splitmix(rng_) & 0xffffffffu));
    sqlite3_bind_blob(chunk_, 8, payload_.data(), static_cast<int>(payload_.size()), SQLITE_STATIC);
    raw_.run(chunk_);
    const int64_t chunk_id = sqlite3_last_insert_rowid(raw_.handle());
    sqlite3_bind_int64(meta_, 1, chunk_id);
    sqlite3_bind_int64(meta_, 2, model_id_);
    sqlite3_bind_blob(meta_, 3, prev_.data(), static_cast<int>(prev_.size()), SQLITE_STATIC);
    sqlite3_bind_text(meta_, 4, tokens.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_int64(meta_, 5, payload_bytes_);
    sqlite3_bind_blob(meta_, 6, chain_.data(), 32, SQLITE_STATIC);
    sqlite3_bind_blob(meta_, 7, digest_.data(), 32, SQLITE_STATIC);
    raw_.run(meta_);
    sqlite3_bind_int64(link_, 1, conversation_id);
    sqlite3_bind_int64(link_, 2, chunk_id);
    raw_.run(link_);
    raw_.run(commit_);
    return since(t0) * 1e3;
  }

 private:
  void random_bytes(std::string& out, int64_t n) {
    out.resize(static_cast<size_t>(n));
    for (char& c : out) c = static_cast<char>(splitmix(rng_));
  }

  RawDb raw_;
  int64_t len_, vocab_;
  int64_t model_id_ = 0, raw_size_ = 0, payload_bytes_ = 0, tenant_id_ = 0;
  std::string compression_, prev_;
  sqlite3_stmt *begin_ = nullptr, *commit_ = nullptr, *conv_ = nullptr, *chunk_ = nullptr, *meta_ = nullptr,
               *link_ = nullptr;
  uint64_t rng_ = 4242;
  std::string key_, chain_, digest_, payload_;
};

// Copies the closed store at from (and its WAL, if one is left) to to.
void copy_store(const std::string& from, const std::string& to) {
  remove_store(to);
  std::filesystem::copy_file(from, to);
  if (file_size(from + "-wal") > 0) std::filesystem::copy_file(from + "-wal", to + "-wal");
}

// Each append's milliseconds, colikv's and the floor's.
struct SideTimes {
  std::vector<double> colikv, floor;
};

// Appends `count` new conversations of len tokens to a copy of the closed
// store at start, and writes the same rows in plain SQLite (SqliteRowsFloor)
// into another copy of it, so that both sides write into equal files and
// grow their WALs from equal starts. block < count: the sides take turns,
// `block` appends at a time, the first side changing every block, so that the
// machine's noise falls on both (and colikv's background checkpointer gets
// the floor's turns to work in). block >= count: colikv's appends back to
// back, its store closed, then the floor's: its checkpointer gets no time
// the appends do not leave it.
SideTimes time_sides(const Config& cfg, const std::string& start, const colikv::ModelSignature& m,
                     colikv::Synchronous sync, Engine& e, int64_t count, int64_t len, int64_t block) {
  const std::string db = cfg.dir + "/appends-colikv.db", floor_db = cfg.dir + "/appends-floor.db";
  copy_store(start, db);
  copy_store(start, floor_db);
  SideTimes t;
  {
    auto store = std::make_unique<colikv::Store>(db, store_options(sync));
    SqliteRowsFloor floor(floor_db, sync, len, m.vocab);
    for (int64_t first = 0; first < count; first += block) {
      const int64_t end = std::min(count, first + block);
      auto colikv_turn = [&] {
        for (int64_t i = first; i < end; ++i) {
          e.compute(0, len, 7000 + static_cast<uint64_t>(i), Kind::kFull);
          auto t0 = Clock::now();
          store->append("c" + std::to_string(i), m, e.tokens.data(), len, e.source());
          t.colikv.push_back(since(t0) * 1e3);
        }
        if (block >= count) store.reset();
      };
      auto floor_turn = [&] {
        for (int64_t i = first; i < end; ++i) t.floor.push_back(floor.write(i));
      };
      if ((first / block) % 2 == 0) {
        colikv_turn();
        floor_turn();
      } else {
        floor_turn();
        colikv_turn();
      }
    }
  }
  remove_store(db);
  remove_store(floor_db);
  return t;
}

}  // namespace

// Many new conversations of `len` tokens each (a gateway filling a store):
// the fixed cost of one small append, in a store that holds `stored`
// conversations already (prefill_store). Baseline: one .coli_kv file each.
void bench_small_appends(const Config& cfg, const Shape& shape, colikv::Synchronous sync, int64_t count, int64_t len,
                         int64_t stored) {
  const colikv::ModelSignature& m = shape.m;
  const std::string start = cfg.dir + "/appends.db", dir = cfg.dir + "/appends";
  remove_store(start);
  ::mkdir(dir.c_str(), 0755);
  Engine e(m, len);
  std::vector<double> b;
  // Filled once a run (the first sync mode's), copied for the next.
  static double fill_s = 0;
  const std::string filled = cfg.dir + "/appends-" + std::to_string(stored) + ".db";
  if (stored > 0 && file_size(filled) == 0) {
    const auto t_fill = Clock::now();
    prefill_store(filled, m, stored, len);
    fill_s = since(t_fill);
  }
  if (stored > 0) std::filesystem::copy_file(filled, start, std::filesystem::copy_options::overwrite_existing);
  // The store the timed appends start from: one untimed append stores the
  // model's row (which the floor's rows name) and a chunk whose size they
  // copy; closed, as a gateway's store is opened again at its start.
  {
    colikv::Store store(start, store_options(sync));
    e.compute(0, len, 6999, Kind::kFull);
    store.append("warm-up", m, e.tokens.data(), len, e.source());
  }
  const SideTimes taking_turns = time_sides(cfg, start, m, sync, e, count, len, 25);
  const SideTimes back_to_back = time_sides(cfg, start, m, sync, e, count, len, count);
  const std::vector<double>& c = taking_turns.colikv;
  for (int64_t i = 0; i < count; ++i) {
    e.compute(0, len, 7000 + static_cast<uint64_t>(i), Kind::kFull);
    auto t0 = Clock::now();
    Baseline f(dir + "/c" + std::to_string(i) + ".coli_kv", m, sync == colikv::Synchronous::kFull);
    f.append(e, len);
    b.push_back(since(t0) * 1e3);
  }
  for (int64_t i = 0; i < count; ++i) ::unlink((dir + "/c" + std::to_string(i) + ".coli_kv").c_str());
  ::rmdir(dir.c_str());
  remove_store(start);
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
  add({"small", shape.name, "full", "f32", sync_name(sync), metric + " / SQLite's rows", "ms", med,
       median(taking_turns.floor), true, "", -1,
       "baseline: the same rows in plain SQLite, prepared, one transaction each, on an equal copy of the store, "
       "the sides taking turns 25 appends at a time"});
  add({"small", shape.name, "full", "f32", sync_name(sync), metric + " / SQLite's rows, back to back", "ms",
       median(back_to_back.colikv), median(back_to_back.floor), true, "", -1,
       "the same, each side's appends back to back on its own copy, colikv's first"});
  // Medians leave out the floor's inline checkpoints (a few appends of
  // many); colikv's run on another thread, and what they cost its appends is
  // spread over many. The means count both.
  add({"small", shape.name, "full", "f32", sync_name(sync), metric + " / SQLite's rows, means", "ms",
       mean(taking_turns.colikv), mean(taking_turns.floor), true, "", -1,
       "the first of these rows by each side's mean: its total time over its appends, checkpoints included"});
  add({"small", shape.name, "full", "f32", sync_name(sync), metric + " / SQLite's rows, back to back, means", "ms",
       mean(back_to_back.colikv), mean(back_to_back.floor), true, "", -1, "the same, back to back"});
}

}  // namespace colikv_bench
