// Schema migrations: a store made by the FIRST schema (migrations/0001_initial.sql,
// executed by hand from the source tree, rows inserted with plain SQL) opens
// with the current library, is migrated to the latest version, and keeps its
// data. Keep this test as schemas grow: it builds the store from the 0001 text
// only, so every later migration runs over real version-1 data.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "core/chunk_codec.h"
#include "colikv/error.h"
#include "colikv/model.h"
#include "colikv/store.h"
#include "sqlite/sqlite_migrations.h"
#include "test_support.h"

using colikv_test::loads_as;

#ifndef COLIKV_SOURCE_DIR
#error "COLIKV_SOURCE_DIR must name the source tree (tests/CMakeLists.txt)"
#endif

using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

const std::string kMigrationsDir = std::string(COLIKV_SOURCE_DIR) + "/migrations";

class RawDb {
 public:
  explicit RawDb(const std::string& path, int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) {
    int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) FAIL("cannot open " << path << ": " << sqlite3_errstr(rc));
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    std::string msg = err ? err : "";
    sqlite3_free(err);
    if (rc != SQLITE_OK) FAIL("SQL failed: " << msg << "\n" << sql.substr(0, 300));
  }
  int64_t last_id() { return sqlite3_last_insert_rowid(db_); }
  sqlite3* get() { return db_; }

  int64_t integer(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    int64_t v = -1;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    std::string v = "<no row>";
    if (sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_type(st, 0) == SQLITE_NULL ? "<null>" : reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
  }

 private:
  sqlite3* db_ = nullptr;
};

// A prepared INSERT with positional binds.
class Insert {
 public:
  Insert(RawDb& db, const std::string& sql) : db_(db) {
    int rc = sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &st_, nullptr);
    if (rc != SQLITE_OK) FAIL("prepare failed: " << sqlite3_errmsg(db.get()) << "\n" << sql);
  }
  ~Insert() { sqlite3_finalize(st_); }
  Insert(const Insert&) = delete;
  Insert& operator=(const Insert&) = delete;
  Insert& i(int64_t v) { sqlite3_bind_int64(st_, ++n_, v); return *this; }
  Insert& t(const std::string& v) { sqlite3_bind_text(st_, ++n_, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT); return *this; }
  Insert& null() { sqlite3_bind_null(st_, ++n_); return *this; }
  Insert& b(const void* p, size_t size) {
    sqlite3_bind_blob(st_, ++n_, p, static_cast<int>(size), SQLITE_TRANSIENT);
    return *this;
  }
  int64_t run() {
    int rc = sqlite3_step(st_);
    if (rc != SQLITE_DONE) FAIL("insert failed: " << sqlite3_errmsg(db_.get()));
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
    n_ = 0;
    return db_.last_id();
  }

 private:
  RawDb& db_;
  sqlite3_stmt* st_ = nullptr;
  int n_ = 0;
};

// The planes of positions [first, first + n) of b, in payload order.
colikv::detail::PlaneList planes_of(EngineBuffers& b, int64_t first) {
  const auto& m = b.model;
  colikv::detail::PlaneList planes;
  for (int l = 0; l < m.n_layers; ++l) {
    planes.push_back({b.lc[l].data() + first * m.kv_lora, m.kv_lora, m.kv_lora});
    planes.push_back({b.rc[l].data() + first * m.qk_rope, m.qk_rope, m.qk_rope});
  }
  for (int l = 0; l < m.n_layers; ++l)
    if (b.indexed(l)) planes.push_back({b.ic[l].data() + first * m.index_hd, m.index_hd, m.index_hd});
  return planes;
}

constexpr int64_t kChunkTokens = 4;
constexpr int64_t kNow = 1700000000000;  // a fixed time, in Unix milliseconds

// Inserts the chunks of positions [first_seq * 4, n) of b and links them as
// conversation conv's seq first_seq.., chaining the hash from the start.
void insert_chunks(RawDb& db, int64_t model_id, const ModelSignature& m, int64_t conv, EngineBuffers& b, int64_t n,
                   int64_t first_seq, std::vector<int64_t>* ids_out) {
  Insert chunk(db,
               "INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, precision, compression, raw_size, "
               "checksum, payload) VALUES (?, ?, ?, ?, ?, 'f32', ?, ?, ?, ?)");
  Insert link(db, "INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) VALUES (?, ?, ?)");
  colikv::detail::ChunkHash h = colikv::detail::chain_seed(m.to_string(), "f32");
  for (int64_t seq = 0; seq * kChunkTokens < n; ++seq) {
    const int64_t first = seq * kChunkTokens;
    const int64_t count = std::min(kChunkTokens, n - first);
    const int32_t* toks = b.tokens.data() + first;
    h = colikv::detail::chain_next(h, toks, count);
    if (seq < first_seq) continue;  // shared with another conversation, already stored
    auto enc = colikv::detail::encode_chunk(count, toks, planes_of(b, first), 1);
    REQUIRE(enc.raw_size == 4 * count * m.floats_per_token());
    // Payloads as libraries of schemas 1-3 wrote them: one zstd frame for
    // the whole shuffled chunk (ZSTD_compress at level 1), when smaller.
    if (enc.compressed) {
      std::vector<uint8_t> raw(static_cast<size_t>(enc.raw_size));
      REQUIRE(ZSTD_decompress(raw.data(), raw.size(), enc.payload.data(), enc.payload.size()) == raw.size());
      std::vector<uint8_t> one(ZSTD_compressBound(raw.size()));
      const size_t size = ZSTD_compress(one.data(), one.size(), raw.data(), raw.size(), 1);
      REQUIRE_FALSE(ZSTD_isError(size));
      one.resize(size);
      enc.compressed = size < raw.size();
      enc.payload = enc.compressed ? one : raw;
    }
    int64_t id = chunk.i(model_id)
                     .b(h.data(), h.size())
                     .i(first)
                     .i(count)
                     .t(colikv::detail::tokens_to_json(toks, count))
                     .t(enc.compressed ? "zstd" : "none")
                     .i(enc.raw_size)
                     .i(static_cast<int64_t>(enc.checksum))
                     .b(enc.payload.data(), enc.payload.size())
                     .run();
    link.i(conv).i(seq).i(id).run();
    if (ids_out) ids_out->push_back(id);
  }
}

struct V1Store {
  ModelSignature model;
  EngineBuffers old_conv;   // "old": 10 tokens
  EngineBuffers fork_conv;  // "old-fork": the first 8 tokens of "old", then 3 of its own
};

// Builds a version-1 store at path by the 0001 schema text and plain SQL.
V1Store make_v1_store(const std::string& path) {
  ModelSignature m = colikv_test::tiny_indexed_model();
  m.weights_id = "v1-weights";
  V1Store v{m, colikv_test::history(m, 10, 31), colikv_test::history(m, 11, 31)};
  // The fork's own continuation from position 8.
  {
    EngineBuffers other = colikv_test::history(m, 11, 32);
    v.fork_conv.fill(8, 11, 32);
    for (int64_t p = 8; p < 11; ++p) v.fork_conv.tokens[static_cast<size_t>(p)] = other.tokens[static_cast<size_t>(p)];
    if (v.fork_conv.tokens[8] == v.old_conv.tokens[8]) v.fork_conv.tokens[8] = (v.fork_conv.tokens[8] + 1) % m.vocab;
  }

  const std::string schema1 = colikv_test::read_file(kMigrationsDir + "/0001_initial.sql");
  REQUIRE(schema1.find("CREATE TABLE chunks") != std::string::npos);
  RawDb db(path);
  db.exec("PRAGMA page_size=65536");
  db.exec("PRAGMA journal_mode=WAL");
  db.exec("BEGIN");
  db.exec(schema1);
  db.exec("PRAGMA user_version=1");
  int64_t model_id =
      Insert(db,
             "INSERT INTO models (signature, n_layers, kv_lora, qk_rope, index_hd, n_indexed, vocab, weights_id, "
             "record_bytes, chunk_tokens, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
          .t(m.to_string()).i(m.n_layers).i(m.kv_lora).i(m.qk_rope).i(m.index_hd).i(m.n_indexed).i(m.vocab)
          .t(m.weights_id).i(m.record_bytes()).i(kChunkTokens).i(kNow)
          .run();
  Insert conv(db,
              "INSERT INTO conversations (name, model_id, token_count, precision, title, metadata, parent_id, "
              "forked_at, generation, created_ms, updated_ms, last_used_ms) VALUES (?, ?, ?, 'f32', ?, ?, ?, ?, ?, ?, ?, ?)");
  int64_t old_id = conv.t("old").i(model_id).i(10).t("From schema 1").t(R"({"v":1})").null().i(0).i(3)
                       .i(kNow).i(kNow + 10).i(kNow + 20).run();
  std::vector<int64_t> old_chunks;
  insert_chunks(db, model_id, m, old_id, v.old_conv, 10, 0, &old_chunks);
  REQUIRE(old_chunks.size() == 3);
  int64_t fork_id = conv.t("old-fork").i(model_id).i(11).t("").t("{}").i(old_id).i(8).i(1)
                        .i(kNow + 30).i(kNow + 30).i(kNow + 40).run();
  Insert link(db, "INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) VALUES (?, ?, ?)");
  link.i(fork_id).i(0).i(old_chunks[0]).run();
  link.i(fork_id).i(1).i(old_chunks[1]).run();
  insert_chunks(db, model_id, m, fork_id, v.fork_conv, 11, 2, nullptr);
  db.exec("COMMIT");
  REQUIRE(db.integer("PRAGMA user_version") == 1);
  REQUIRE(db.integer("SELECT count(*) FROM chunks") == 4);
  INFO("single-frame zstd chunks: " << db.integer("SELECT count(*) FROM chunks WHERE compression = 'zstd'"));
  CHECK(db.integer("SELECT count(*) FROM chunks WHERE compression = 'zstd'") > 0);
  return v;
}


// The highest NNNN of migrations/NNNN_name.sql in the source tree.
int newest_migration_file() {
  int newest = 0;
  const std::regex name_re("^([0-9]{4})_[A-Za-z0-9_]+\\.sql$");
  for (const auto& e : std::filesystem::directory_iterator(kMigrationsDir)) {
    std::smatch mt;
    std::string fname = e.path().filename().string();
    if (std::regex_match(fname, mt, name_re)) newest = std::max(newest, std::stoi(mt[1].str()));
  }
  return newest;
}

}  // namespace

TEST_CASE("migrations: the library knows every migration of the source tree", "[migrations]") {
  CHECK(Store::library_schema_version() == newest_migration_file());
  CHECK(Store::library_schema_version() >= 2);
  TempDir dir;
  const std::string path = dir.file("new.colikv");
  {
    Store s(path);
    CHECK(s.schema_version() == Store::library_schema_version());
  }
  RawDb db(path, SQLITE_OPEN_READONLY);
  CHECK(db.integer("PRAGMA user_version") == Store::library_schema_version());
  for (const char* table : {"models", "conversations", "chunks", "conversation_chunks"}) {
    INFO(table);
    CHECK(db.integer(std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '") + table + "'") == 1);
  }
  for (const char* view : {"conversation_summary", "conversation_tokens", "model_summary"}) {
    INFO(view);
    CHECK(db.integer(std::string("SELECT count(*) FROM sqlite_master WHERE type = 'view' AND name = '") + view + "'") == 1);
  }
}

TEST_CASE("migrations: a store made by the first schema migrates with its data intact", "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("v1.colikv");
  V1Store v = make_v1_store(path);
  const ModelSignature& m = v.model;

  if (Store::library_schema_version() > 1) {
    // A read-only open applies no migration: it refuses, naming both versions.
    colikv::Options ro;
    ro.read_only = true;
    try {
      Store s(path, ro);
      FAIL("a read-only open of a version-1 store succeeded");
    } catch (const colikv::Error& e) {
      CHECK(e.code() == ErrorCode::kVersion);
      INFO(e.what());
      CHECK(std::string(e.what()).find(std::to_string(Store::library_schema_version())) != std::string::npos);
    }
    RawDb db(path, SQLITE_OPEN_READONLY);
    CHECK(db.integer("PRAGMA user_version") == 1);
  }

  {
    Store s(path);
    CHECK(s.schema_version() == Store::library_schema_version());
    CHECK(s.conversation_count() == 2);
    CHECK(s.count("old") == 10);
    CHECK(s.count("old-fork") == 11);
    CHECK(loads_as(s, "old", v.old_conv, 10) == "");
    CHECK(loads_as(s, "old-fork", v.fork_conv, 11) == "");
    CHECK(s.tokens("old") == std::vector<int32_t>(v.old_conv.tokens.begin(), v.old_conv.tokens.begin() + 10));

    auto info = s.info("old");
    CHECK(info.model == m);
    CHECK(info.title == "From schema 1");
    CHECK(info.metadata == R"({"v":1})");
    CHECK(info.created_ms == kNow);
    CHECK(info.updated_ms == kNow + 10);
    CHECK(info.raw_bytes == 10 * m.record_bytes());
    auto finfo = s.info("old-fork");
    CHECK(finfo.parent == "old");
    CHECK(finfo.forked_at == 8);

    auto report = s.verify();
    INFO((report.problems.empty() ? std::string() : report.problems[0].what));
    CHECK(report.ok());
    CHECK(report.conversations == 2);
    CHECK(report.chunks == 4);

    auto st = s.stats();
    REQUIRE(st.models.size() == 1);
    CHECK(st.models[0].model == m);
    CHECK(st.models[0].chunk_tokens == kChunkTokens);
    CHECK(st.models[0].chunks == 4);
    CHECK(st.total.tokens == 21);
    CHECK(st.total.saved_by_sharing() == 8 * m.record_bytes());

    // The migrated conversations keep working: grow, fork, truncate, delete.
    EngineBuffers longer = colikv_test::history(m, 17, 31);
    s.append("old", m, longer.tokens.data(), 17, longer.source());
    CHECK(loads_as(s, "old", longer, 17) == "");
    CHECK(loads_as(s, "old-fork", v.fork_conv, 11) == "");  // its shared chunks are untouched
    s.fork("old", "new-fork", 13);
    CHECK(loads_as(s, "new-fork", longer, 13) == "");
    s.truncate("old-fork", 9);
    CHECK(loads_as(s, "old-fork", v.fork_conv, 9) == "");
    s.remove("old");
    CHECK(loads_as(s, "new-fork", longer, 13) == "");
    CHECK(loads_as(s, "old-fork", v.fork_conv, 9) == "");
    CHECK(s.verify().ok());
  }

  // The views of later migrations exist and read the migrated rows.
  RawDb db(path, SQLITE_OPEN_READONLY);
  CHECK(db.integer("PRAGMA user_version") == Store::library_schema_version());
  CHECK(db.integer("SELECT tokens FROM conversation_summary WHERE conversation = 'old-fork'") == 9);
  CHECK(db.integer("SELECT raw_bytes FROM conversation_summary WHERE conversation = 'old-fork'") ==
        9 * m.record_bytes());
  CHECK(db.text("SELECT model FROM conversation_summary WHERE conversation = 'old-fork'") == m.to_string());
  CHECK(db.integer("SELECT count(*) FROM conversation_summary") == 2);
  CHECK(db.integer("SELECT count(*) FROM conversation_tokens WHERE conversation = 'new-fork'") == 13);
  CHECK(db.integer("SELECT token FROM conversation_tokens WHERE conversation = 'new-fork' AND position = 12") ==
        colikv_test::make_tokens(17, m.vocab, 31)[12]);
  CHECK(db.integer("SELECT tokens FROM model_summary") == 22);
  CHECK(db.integer("SELECT count(*) FROM chunks WHERE chunk_id NOT IN (SELECT chunk_id FROM conversation_chunks)") == 0);
}

TEST_CASE("migrations: a schema-4 store keeps its data, and chunks it shared by token ids alone are listed", "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("v4.colikv");
  V1Store v = make_v1_store(path);
  const ModelSignature& m = v.model;
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    colikv::detail::apply_migrations(db, "v4 store", 4);
    REQUIRE(db.execAndGet("PRAGMA user_version").getInt() == 4);
    // What a library of schema 4 did for "stranger", a conversation with
    // old's first 8 token ids but other values: it linked old's chunks.
    const int64_t old_id = db.execAndGet("SELECT conversation_id FROM conversations WHERE name = 'old'").getInt64();
    db.exec("INSERT INTO conversations (name, model_id, token_count, created_ms, updated_ms, last_used_ms) "
            "SELECT 'stranger', model_id, 8, 1, 1, 1 FROM conversations WHERE name = 'old'");
    db.exec("INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) SELECT "
            "(SELECT conversation_id FROM conversations WHERE name = 'stranger'), seq, chunk_id "
            "FROM conversation_chunks WHERE conversation_id = " + std::to_string(old_id) + " AND seq < 2");
  }
  Store s(path);
  CHECK(s.schema_version() == Store::library_schema_version());
  CHECK(loads_as(s, "old", v.old_conv, 10) == "");
  CHECK(loads_as(s, "old-fork", v.fork_conv, 11) == "");
  CHECK(loads_as(s, "stranger", v.old_conv, 8) == "");  // old's values: the damage cannot be undone

  colikv::VerifyReport report = s.verify();
  CHECK(report.ok());
  REQUIRE(report.uncompared_shares.size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    const colikv::UncomparedShare& u = report.uncompared_shares[k];
    CHECK(u.first_pos == static_cast<int64_t>(k) * kChunkTokens);
    CHECK(u.end_pos == u.first_pos + kChunkTokens);
    CHECK(u.conversations == std::vector<std::string>{"old", "old-fork", "stranger"});
  }
  CHECK(s.verify("old-fork").uncompared_shares.size() == 2);

  // Legacy chunks are never reused for new content, equal or not.
  const int64_t chunks_before = s.stats().total.chunks;
  s.append("same", m, v.old_conv.tokens.data(), 8, v.old_conv.source());
  CHECK(s.stats().total.chunks == chunks_before + 2);
  EngineBuffers other = colikv_test::history(m, 10, 31);
  other.fill(0, 10, 77);
  s.append("other", m, other.tokens.data(), 8, other.source());
  CHECK(loads_as(s, "other", other, 8) == "");
  CHECK(loads_as(s, "same", v.old_conv, 8) == "");
  // Legacy chunks stay usable: prefix lookup, fork, truncate.
  colikv::PrefixMatch r = s.match(m, v.old_conv.tokens.data(), 10);
  CHECK(r.id == "old");
  CHECK(r.tokens == 10);
  s.fork("old", "old-2", 9);
  CHECK(loads_as(s, "old-2", v.old_conv, 9) == "");
  s.truncate("old", 6);
  CHECK(loads_as(s, "old", v.old_conv, 6) == "");
  report = s.verify();
  CHECK(report.ok());
  CHECK(report.uncompared_shares.size() == 2);
  CHECK(s.verify("same").uncompared_shares.empty());
  // Re-saving the stranger from its engine makes its chunks its own.
  s.truncate("stranger", 0);
  s.append("stranger", m, other.tokens.data(), 8, other.source());
  CHECK(loads_as(s, "stranger", other, 8) == "");
  CHECK(s.verify("stranger").uncompared_shares.empty());
}

TEST_CASE("migrations: a schema-5 store opens, upgrades, loads and grows its tail in pieces", "[migrations][tail]") {
  TempDir dir;
  const std::string path = dir.file("v5.colikv");
  V1Store v = make_v1_store(path);  // "old": chunks [0, 4), [4, 8) and the partial [8, 10)
  const ModelSignature& m = v.model;
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    colikv::detail::apply_migrations(db, "v5 store", 5);
    REQUIRE(db.execAndGet("PRAGMA user_version").getInt() == 5);
  }
  auto chunk_list = [&](const std::string& id) {
    RawDb db(path, SQLITE_OPEN_READONLY);
    return db.text("SELECT group_concat(cc.chunk_id || '@' || ch.first_pos || '+' || ch.n_tokens, ' ') FROM "
                   "(SELECT * FROM conversation_chunks ORDER BY seq) cc JOIN chunks ch USING (chunk_id) "
                   "JOIN conversations c USING (conversation_id) WHERE c.name = '" + id + "'");
  };
  const std::string v5_list = chunk_list("old");
  Store s(path);
  CHECK(s.schema_version() == Store::library_schema_version());
  CHECK(loads_as(s, "old", v.old_conv, 10) == "");
  CHECK(loads_as(s, "old-fork", v.fork_conv, 11) == "");
  // The engine's next turn: one piece after schema 5's partial chunk, which stays as it is.
  EngineBuffers grown = colikv_test::history(m, 12, 31);
  for (int64_t p = 0; p < 10; ++p) grown.tokens[static_cast<size_t>(p)] = v.old_conv.tokens[static_cast<size_t>(p)];
  grown.fill(0, 10, 31);
  REQUIRE(grown.compare(v.old_conv, 10) == "");
  s.write("old", m, grown.tokens.data(), 10, 11, grown.source());
  const std::string now = chunk_list("old");
  CHECK(now.substr(0, v5_list.size()) == v5_list);
  CHECK(now.find("@10+1") != std::string::npos);
  CHECK(loads_as(s, "old", grown, 11) == "");
  s.write("old", m, grown.tokens.data(), 11, 12, grown.source());  // reaches the chunk boundary: re-packed
  CHECK(chunk_list("old").find("@8+4") != std::string::npos);
  CHECK(loads_as(s, "old", grown, 12) == "");
  CHECK(s.verify().ok());
}

namespace {

// A table as a migration must leave it byte for byte: its name, the columns
// the older schema has (comma-separated), and the order of its rows.
struct TableSpec {
  std::string name, columns, order;
};

// Every row of each table as SQL literals (blobs in hex), in its order, by
// its columns: one text per table.
std::vector<std::string> table_rows(const std::string& path, const std::vector<TableSpec>& tables) {
  RawDb db(path, SQLITE_OPEN_READONLY);
  std::vector<std::string> out;
  for (const TableSpec& t : tables) {
    std::string row;
    size_t start = 0;
    for (size_t i = 0; i <= t.columns.size(); ++i) {
      if (i < t.columns.size() && t.columns[i] != ',') continue;
      row += std::string(row.empty() ? "" : " || ',' || ") + "quote(" + t.columns.substr(start, i - start) + ")";
      start = i + 1;
    }
    out.push_back(db.text("SELECT group_concat(r, ';') FROM (SELECT " + row + " AS r FROM " + t.name + " ORDER BY " +
                          t.order + ")"));
  }
  return out;
}
}  // namespace

TEST_CASE("migrations: a schema-6 store moves into the default tenant byte for byte", "[migrations][tenants]") {
  TempDir dir;
  const std::string path = dir.file("v6.colikv");
  V1Store v = make_v1_store(path);
  const ModelSignature& m = v.model;
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    colikv::detail::apply_migrations(db, "v6 store", 6);
    REQUIRE(db.execAndGet("PRAGMA user_version").getInt() == 6);
  }
  // Conversations by the columns schema 6 has.
  const std::string conv_cols =
      "conversation_id,name,model_id,token_count,precision,title,metadata,parent_id,forked_at,generation,"
      "created_ms,updated_ms,last_used_ms";
  const std::vector<TableSpec> tables = {
      {"conversations", conv_cols, "conversation_id"},
      {"models", "model_id,signature,n_layers,kv_lora,qk_rope,index_hd,n_indexed,vocab,weights_id,record_bytes,"
                 "chunk_tokens,created_ms", "model_id"},
      {"chunks", "chunk_id,model_id,hash,first_pos,n_tokens,tokens,precision,compression,raw_size,checksum,payload",
       "chunk_id"},
      {"conversation_chunks", "conversation_id,seq,chunk_id", "conversation_id, seq"},
      {"chunk_meta", "chunk_id,model_id,precision,prev_hash,tokens,payload_bytes,chain_hash,digest", "chunk_id"},
  };
  const std::vector<std::string> before = table_rows(path, tables);
  REQUIRE(before[0].find("'old-fork'") != std::string::npos);

  {
    Store s(path);  // migrates
    CHECK(s.schema_version() == Store::library_schema_version());
  }
  const std::vector<std::string> after = table_rows(path, tables);
  for (size_t i = 0; i < tables.size(); ++i) {
    INFO(tables[i].name);
    CHECK(after[i] == before[i]);
  }
  {
    Store s(path);
    CHECK(loads_as(s, "old", v.old_conv, 10) == "");
    CHECK(loads_as(s, "old-fork", v.fork_conv, 11) == "");
    CHECK(s.info("old-fork").parent == "old");
    CHECK(s.verify().ok());
    const std::vector<colikv::TenantInfo> t = s.tenants();
    REQUIRE(t.size() == 1);
    CHECK(t[0].name == "");
    CHECK(t[0].conversations == 2);
  }
  {
    RawDb db(path, SQLITE_OPEN_READONLY);
    CHECK(db.integer("SELECT count(*) FROM conversations WHERE tenant_id <> 0") == 0);
    CHECK(db.integer("SELECT count(*) FROM pragma_foreign_key_check") == 0);
  }
  // Another tenant sees none of it, and matches none of it.
  colikv::Options o;
  o.tenant = "other";
  Store other(path, o);
  CHECK(other.conversation_count() == 0);
  CHECK(other.match(m, v.old_conv.tokens.data(), 10).tokens == 0);
  Store deflt(path);
  CHECK(deflt.match(m, v.old_conv.tokens.data(), 10).tokens == 10);
}

TEST_CASE("migrations: a schema-7 store gains tenant limits, none set, every row byte for byte", "[migrations][quotas]") {
  TempDir dir;
  const std::string path = dir.file("v7.colikv");
  V1Store v = make_v1_store(path);
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    colikv::detail::apply_migrations(db, "v7 store", 7);
    REQUIRE(db.execAndGet("PRAGMA user_version").getInt() == 7);
    db.exec("INSERT INTO tenants (name, created_ms) VALUES ('alice', 1234)");  // a tenant with no conversation yet
  }
  const std::vector<TableSpec> tables = {
      {"tenants", "tenant_id,name,created_ms", "tenant_id"},
      {"conversations", "conversation_id,name,model_id,token_count,precision,title,metadata,parent_id,forked_at,"
                        "generation,created_ms,updated_ms,last_used_ms,tenant_id", "conversation_id"},
      {"models", "model_id,signature,n_layers,kv_lora,qk_rope,index_hd,n_indexed,vocab,weights_id,record_bytes,"
                 "chunk_tokens,created_ms", "model_id"},
      {"chunks", "chunk_id,model_id,hash,first_pos,n_tokens,tokens,precision,compression,raw_size,checksum,payload",
       "chunk_id"},
      {"conversation_chunks", "conversation_id,seq,chunk_id", "conversation_id, seq"},
      {"chunk_meta", "chunk_id,model_id,precision,prev_hash,tokens,payload_bytes,chain_hash,digest", "chunk_id"},
  };
  const std::vector<std::string> before = table_rows(path, tables);
  REQUIRE(before[0].find("'alice'") != std::string::npos);
  {
    Store s(path);  // migrates
    CHECK(s.schema_version() == Store::library_schema_version());
    CHECK(s.tenant_limits() == colikv::TenantLimits{});
    for (const colikv::TenantInfo& t : s.tenants()) CHECK(t.limits == colikv::TenantLimits{});
  }
  const std::vector<std::string> after = table_rows(path, tables);
  for (size_t i = 0; i < tables.size(); ++i) {
    INFO(tables[i].name);
    CHECK(after[i] == before[i]);
  }
  {
    Store s(path);  // loads set last-used times: after the comparison
    CHECK(loads_as(s, "old", v.old_conv, 10) == "");
    CHECK(loads_as(s, "old-fork", v.fork_conv, 11) == "");
    CHECK(s.verify().ok());
  }
  RawDb db(path, SQLITE_OPEN_READONLY);
  CHECK(db.integer("SELECT count(*) FROM tenants WHERE max_bytes IS NOT NULL OR max_idle_ms IS NOT NULL") == 0);
  CHECK(db.integer("SELECT count(*) FROM tenants") == 2);
}

TEST_CASE("migrations: a schema-8 store gains the tables of held chunks, empty, every row byte for byte",
          "[migrations][objects]") {
  TempDir dir;
  const std::string path = dir.file("v8.colikv");
  V1Store v = make_v1_store(path);
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    colikv::detail::apply_migrations(db, "v8 store", 8);
    REQUIRE(db.execAndGet("PRAGMA user_version").getInt() == 8);
    db.exec("UPDATE tenants SET max_bytes = 123456789 WHERE name = ''");
  }
  const std::vector<TableSpec> tables = {
      {"tenants", "tenant_id,name,created_ms,max_bytes,max_idle_ms", "tenant_id"},
      {"conversations", "conversation_id,name,model_id,token_count,precision,title,metadata,parent_id,forked_at,"
                        "generation,created_ms,updated_ms,last_used_ms,tenant_id", "conversation_id"},
      {"models", "model_id,signature,n_layers,kv_lora,qk_rope,index_hd,n_indexed,vocab,weights_id,record_bytes,"
                 "chunk_tokens,created_ms", "model_id"},
      {"chunks", "chunk_id,model_id,hash,first_pos,n_tokens,tokens,precision,compression,raw_size,checksum,payload",
       "chunk_id"},
      {"conversation_chunks", "conversation_id,seq,chunk_id", "conversation_id, seq"},
      {"chunk_meta", "chunk_id,model_id,precision,prev_hash,tokens,payload_bytes,chain_hash,digest", "chunk_id"},
  };
  const std::vector<std::string> before = table_rows(path, tables);
  REQUIRE(before[0].find("123456789") != std::string::npos);
  {
    Store s(path);  // migrates
    CHECK(s.schema_version() == Store::library_schema_version());
  }
  const std::vector<std::string> after = table_rows(path, tables);
  for (size_t i = 0; i < tables.size(); ++i) {
    INFO(tables[i].name);
    CHECK(after[i] == before[i]);
  }
  {
    RawDb db(path, SQLITE_OPEN_READONLY);
    CHECK(db.integer("SELECT count(*) FROM writers") == 0);
    CHECK(db.integer("SELECT count(*) FROM held_chunks") == 0);
  }
  Store s(path);
  CHECK(loads_as(s, "old", v.old_conv, 10) == "");
  CHECK(loads_as(s, "old-fork", v.fork_conv, 11) == "");
  CHECK(s.verify().ok());
}
