// The Store: conversations on a real SQLite file in a temporary directory.
// Round trips are compared bit for bit; the file itself is inspected with
// plain SQL (the schema is public: migrations/*.sql).
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "colikv/error.h"
#include "colikv/model.h"
#include "colikv/options.h"
#include "colikv/store.h"
#include "backend.h"
#include "test_support.h"

using colikv_test::loads_as;

using colikv::Error;
using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv::Options;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::make_tokens;
using colikv_test::TempDir;
using colikv_test::history;

using colikv_test::bits_of;
using colikv_test::from_bits;

namespace {

constexpr int64_t kChunk = 4;  // tokens per chunk in most tests

// Options whose chunks hold kChunk tokens of model m (chunk_tokens is the
// largest power of two whose raw chunk fits chunk_target_bytes).
Options small_chunks(const ModelSignature& m) { return colikv_test::chunked_options(m, kChunk); }

// The store s.colikv of the tiny model in kChunk-token chunks, on either backend.
struct SmallStore : colikv_test::StoreFixture {
  SmallStore() : StoreFixture(colikv_test::tiny_model(), kChunk, "s.colikv") {}
};

// Positions [from, to) of b become those of the history of `seed`, and the
// token at `from` is made to differ from what it was: b diverges at `from`.
void diverge(EngineBuffers& b, int64_t from, int64_t to, uint32_t seed) {
  int32_t old = b.tokens[static_cast<size_t>(from)];
  b.fill(from, to, seed);
  auto t = make_tokens(to, b.model.vocab, seed);
  for (int64_t p = from; p < to; ++p) b.tokens[static_cast<size_t>(p)] = t[static_cast<size_t>(p)];
  if (b.tokens[static_cast<size_t>(from)] == old) b.tokens[static_cast<size_t>(from)] = (old + 1) % b.model.vocab;
}



std::vector<int32_t> prefix(const EngineBuffers& b, int64_t n) {
  return std::vector<int32_t>(b.tokens.begin(), b.tokens.begin() + n);
}

struct Caught {
  bool thrown = false;
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  int64_t position = -1;
  std::string name() const { return thrown ? colikv::error_code_name(code) : "no error"; }
};

// Runs f and reports the colikv::Error it threw (any other exception fails the test).
template <class F>
Caught caught(F&& f) {
  Caught c;
  try {
    f();
  } catch (const Error& e) {
    c.thrown = true;
    c.code = e.code();
    c.message = e.what();
    c.position = e.position();
  }
  return c;
}

std::string name(ErrorCode code) { return colikv::error_code_name(code); }

// Plain SQL on the store, through a separate read-only connection.
int64_t sql_int(const std::string& path, const std::string& sql) { return colikv_test::store_int(path, sql); }
std::string sql_text(const std::string& path, const std::string& sql) {
  const colikv_test::SqlRows rows = colikv_test::store_query(path, sql);
  return rows.empty() ? "" : rows[0][0];
}
int64_t chunk_rows(const std::string& path) { return sql_int(path, "SELECT count(*) FROM chunks"); }
int64_t payload_bytes(const std::string& path) {
  return sql_int(path, "SELECT coalesce(sum(length(payload)), 0) FROM chunks");
}
int64_t orphan_chunks(const std::string& path) {
  return sql_int(path, "SELECT count(*) FROM chunks WHERE chunk_id NOT IN (SELECT chunk_id FROM conversation_chunks)");
}
// chunk_id of each chunk of a conversation, in seq order.
std::vector<int64_t> chunk_ids(const std::string& path, const std::string& id) {
  std::vector<int64_t> ids;
  for (const auto& row : colikv_test::store_query(path,
                                                  "SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c "
                                                  "USING (conversation_id) WHERE c.name = ? ORDER BY cc.seq",
                                                  {id}))
    ids.push_back(std::stoll(row[0]));
  return ids;
}
// The token ids of a conversation as the sqlite3 shell (or psql) sees them.
std::vector<int32_t> shell_tokens(const std::string& path, const std::string& id) {
  std::vector<int32_t> t;
  for (const auto& row : colikv_test::store_query(
           path, "SELECT position, token FROM conversation_tokens WHERE conversation = ? ORDER BY position", {id})) {
    if (std::stoll(row[0]) != static_cast<int64_t>(t.size())) return {-1};  // a gap or a repeat
    t.push_back(static_cast<int32_t>(std::stol(row[1])));
  }
  return t;
}
// The chunk list of a conversation is well formed: full chunks at multiples
// of chunk_tokens, then at most 32 tail pieces, each starting where the one
// before ends, together covering [0, count).
std::string chunk_layout(const std::string& path, const std::string& id, int64_t chunk_tokens) {
  const colikv_test::SqlRows rows = colikv_test::store_query(
      path,
      "SELECT cc.seq, ch.first_pos, ch.n_tokens, c.token_count FROM conversation_chunks cc "
      "JOIN conversations c USING (conversation_id) JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
      "WHERE c.name = ? ORDER BY cc.seq",
      {id});
  int64_t expect_seq = 0, covered = 0, count = -1, pieces = 0;
  for (const auto& row : rows) {
    int64_t seq = std::stoll(row[0]), first = std::stoll(row[1]), n = std::stoll(row[2]);
    count = std::stoll(row[3]);
    const int64_t tail = count / chunk_tokens * chunk_tokens;
    if (seq != expect_seq) return "seq " + std::to_string(seq) + " where " + std::to_string(expect_seq) + " expected";
    if (first != covered) return "chunk " + std::to_string(seq) + " starts at " + std::to_string(first);
    if (n < 1) return "chunk " + std::to_string(seq) + " is empty";
    if (first < tail && n != chunk_tokens) return "chunk " + std::to_string(seq) + " is a partial chunk before the tail";
    if (first >= tail && ++pieces > 32) return "more than 32 tail pieces";
    covered += n;
    ++expect_seq;
  }
  if (count >= 0 && covered != count)
    return "chunks cover " + std::to_string(covered) + " positions of " + std::to_string(count);
  return "";
}

void sql_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
  REQUIRE(rc == SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char* err = nullptr;
  rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  INFO(sql << ": " << msg);
  REQUIRE(rc == SQLITE_OK);
}

// Writes some special IEEE-754 values into every plane: NaNs with distinct
// payloads (quiet and signalling, both signs), -0.0, denormals, infinities.
void inject_specials(EngineBuffers& b) {
  static const uint32_t special[] = {
      0x7fc00000u, 0x7fc00001u, 0xffc12345u, 0x7f800001u, 0x7fbfffffu, 0xff800001u, 0xffffffffu, 0x7fd5a5a5u,
      0x80000000u, 0x00000000u, 0x00000001u, 0x807fffffu, 0x00400000u, 0x80000001u, 0x7f800000u, 0xff800000u,
      0x7f7fffffu, 0xff7fffffu, 0x00800000u, 0x3f800000u};
  const size_t n = sizeof special / sizeof special[0];
  size_t k = 0;
  auto put = [&](std::vector<float>& v) {
    for (size_t i = k % 3; i < v.size(); i += 3) {
      std::memcpy(&v[i], &special[k % n], 4);
      ++k;
    }
  };
  for (int l = 0; l < b.model.n_layers; ++l) {
    put(b.lc[l]);
    put(b.rc[l]);
    if (b.indexed(l)) put(b.ic[l]);
  }
  if (b.capacity > 2) {
    b.tokens[0] = 0;
    b.tokens[1] = b.model.vocab - 1;
  }
}

void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

TEST_CASE("store: open creates a store that reopens with its data", "[store]") {
  TempDir dir;
  const std::string path = dir.file("s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers h = history(m, 10, 1);
  {
    Store s(path, small_chunks(m));
    CHECK(std::filesystem::exists(path));
    CHECK(s.path() == path);
    CHECK(Store::library_schema_version() >= 2);
    CHECK(s.schema_version() == Store::library_schema_version());
    CHECK(s.conversation_count() == 0);
    CHECK(s.list().empty());
    CHECK(s.count("nope") == 0);
    CHECK_FALSE(s.exists("nope"));
    s.append("a", m, h.tokens.data(), 10, h.source());
    CHECK(s.count("a") == 10);
    CHECK(s.exists("a"));
  }
  CHECK(sql_int(path, "PRAGMA user_version") == Store::library_schema_version());
  CHECK(sql_text(path, "PRAGMA journal_mode") == "wal");
  CHECK(sql_int(path, "PRAGMA page_size") == Options().page_size);
  {
    Options ro;
    ro.create_if_missing = false;
    Store s(path, ro);
    CHECK(s.count("a") == 10);
    CHECK(loads_as(s, "a", h, 10) == "");
    // A Store can be moved.
    Store moved(std::move(s));
    CHECK(moved.path() == path);
    CHECK(loads_as(moved, "a", h, 10) == "");
  }
}

// The library's schema version is its backend's: a PostgreSQL store is
// numbered apart from a SQLite file, so SQLite's latest is not its version.
TEST_CASE("store: library_schema_version is the store's backend's", "[backends][store]") {
  TempDir dir;
  const std::string location = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers h = history(m, 4, 1);
  {
    Store s(location, small_chunks(m));
    s.append("a", m, h.tokens.data(), 4, h.source());
    CHECK(Store::library_schema_version(location) >= 1);
    CHECK(s.schema_version() == Store::library_schema_version(location));
    CHECK(s.schema_version() == Store::library_schema_version(s.path()));
  }
  Options ro;
  ro.read_only = true;
  ro.create_if_missing = false;
  Store s(location, ro);
  CHECK(s.schema_version() == Store::library_schema_version(location));
  if (!colikv_test::testing_postgres()) CHECK(Store::library_schema_version(location) == Store::library_schema_version());
}

TEST_CASE("store: page_size option applies to a new store", "[store]") {
  TempDir dir;
  Options o;
  o.page_size = 4096;
  { Store s(dir.file("p.colikv"), o); }
  CHECK(sql_int(dir.file("p.colikv"), "PRAGMA page_size") == 4096);
}

TEST_CASE("store: a new store has 16 KiB pages", "[store][pages]") {
  TempDir dir;
  CHECK(Options().page_size == 16384);
  { Store s(dir.file("p.colikv")); }
  CHECK(sql_int(dir.file("p.colikv"), "PRAGMA page_size") == 16384);
}

// Every B-tree of the schema costs at least one page, so the page size sets
// the floor of a small store (the engine's tiny model: 644-byte records).
TEST_CASE("store: a store holding one 64 KB conversation stays small after close", "[store][pages]") {
  TempDir dir;
  const std::string path = dir.file("tiny.colikv");
  ModelSignature m = colikv_test::tiny_model();
  m.n_layers = 4;
  m.kv_lora = 32;
  m.qk_rope = 8;
  EngineBuffers h = history(m, 100, 4);
  {
    Store s(path);
    s.append("conv", m, h.tokens.data(), 100, h.source());
  }
  CHECK(colikv_test::file_size(path) < 400 * 1024);  // 24 pages of 16 KiB (schema 9's two tables among them)
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));
  CHECK_FALSE(std::filesystem::exists(path + "-shm"));
}

// A page size is fixed when a WAL store is created: a store made with the
// old 64 KiB default keeps it and works as before.
TEST_CASE("store: a store created with 64 KiB pages keeps them and works", "[store][pages]") {
  TempDir dir;
  const std::string path = dir.file("old.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers h = history(m, 40, 5);
  Options old_default;
  old_default.page_size = 65536;
  {
    Store s(path, old_default);
    s.append("a", m, h.tokens.data(), 20, h.source());
  }
  Store s(path);
  s.append("a", m, h.tokens.data(), 40, h.source());
  CHECK(loads_as(s, "a", h, 40) == "");
  CHECK(sql_int(path, "PRAGMA page_size") == 65536);
}

TEST_CASE("store: a missing file with create_if_missing=false is kNotFound", "[store]") {
  TempDir dir;
  const std::string path = dir.file("missing.colikv");
  Options o;
  o.create_if_missing = false;
  Caught e = caught([&] { Store s(path, o); });
  CHECK(e.name() == name(ErrorCode::kNotFound));
  CHECK(e.message.find("missing.colikv") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(path));
  Caught e2 = caught([&] { Store s(dir.file("no/such/dir.colikv"), o); });
  CHECK(e2.thrown);
}

TEST_CASE("store: bit-exact round trip of special float values", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  auto run = [&](const ModelSignature& m) {
    EngineBuffers h = history(m, 11, 5);
    inject_specials(h);
    Store s(path, small_chunks(m));
    s.append("specials", m, h.tokens.data(), 11, h.source());
    CHECK(loads_as(s, "specials", h, 11) == "");
    CHECK(s.tokens("specials") == prefix(h, 11));
    CHECK(s.verify().ok());
  };
  SECTION("without indexer") { run(colikv_test::tiny_model()); }
  SECTION("with indexer") { run(colikv_test::tiny_indexed_model()); }
  SECTION("one token per chunk, one layer") {
    ModelSignature m;
    m.n_layers = 1; m.kv_lora = 3; m.qk_rope = 1; m.index_hd = 2; m.n_indexed = 1; m.vocab = 7;
    EngineBuffers h = history(m, 5, 9);
    inject_specials(h);
    Options o;
    o.chunk_target_bytes = 1;  // at least one token per chunk
    Store s(path, o);
    s.append("one", m, h.tokens.data(), 5, h.source());
    CHECK(loads_as(s, "one", h, 5) == "");
    CHECK(chunk_rows(path) == 5);
  }
}

TEST_CASE("store: data that compresses well round-trips too", "[backends][store]") {
  // bf16-like values (low mantissa bits zero) and constant planes take the zstd path.
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_indexed_model();
  EngineBuffers h = history(m, 13, 3);
  for (int l = 0; l < m.n_layers; ++l) {
    for (auto& v : h.lc[l]) {
      uint32_t u = bits_of(v) & 0xffff0000u;
      std::memcpy(&v, &u, 4);
    }
    std::fill(h.rc[l].begin(), h.rc[l].end(), 0.5f);
  }
  Store s(path, small_chunks(m));
  s.append("c", m, h.tokens.data(), 13, h.source());
  CHECK(loads_as(s, "c", h, 13) == "");
  CHECK(sql_int(path, "SELECT count(*) FROM chunks WHERE compression = 'zstd'") > 0);
  CHECK(sql_int(path, "SELECT count(*) FROM chunks WHERE length(payload) > raw_size") == 0);
}

TEST_CASE("store: turn-by-turn growth across chunk boundaries", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  auto run = [&](const ModelSignature& m) {
    const int64_t n = 23;
    EngineBuffers h = history(m, n, 42);
    Store s(path, small_chunks(m));
    const int64_t chunk_tokens = kChunk;
    int64_t first_chunk = -1;
    for (int64_t len : {1, 2, 3, 4, 5, 8, 9, 12, 13, 16, 17, 23}) {
      INFO("len " << len);
      s.append("grow", m, h.tokens.data(), len, h.source());
      CHECK(s.count("grow") == len);
      CHECK(loads_as(s, "grow", h, len) == "");
      CHECK(s.tokens("grow") == prefix(h, len));
      CHECK(shell_tokens(path, "grow") == prefix(h, len));
      CHECK(chunk_layout(path, "grow", chunk_tokens) == "");
      // Exactly the chunks the conversation uses: re-packed tail pieces are freed.
      CHECK(chunk_rows(path) == static_cast<int64_t>(chunk_ids(path, "grow").size()));
      CHECK(orphan_chunks(path) == 0);
      // A full chunk is immutable: the first one is never rewritten once full.
      auto ids = chunk_ids(path, "grow");
      REQUIRE(!ids.empty());
      if (len >= kChunk) {
        if (first_chunk < 0) first_chunk = ids[0];
        CHECK(ids[0] == first_chunk);
      }
    }
    CHECK(sql_int(path, "SELECT chunk_tokens FROM models") == kChunk);
    CHECK(s.verify().ok());
  };
  SECTION("without indexer") { run(colikv_test::tiny_model()); }
  SECTION("with indexer") { run(colikv_test::tiny_indexed_model()); }
}

TEST_CASE("store: a whole conversation in one append loads bit-exact", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const int64_t n = 50;
  EngineBuffers h = history(m, n, 8);
  Options o = small_chunks(m);
  o.threads = 3;
  Store s(path, o);
  s.append("big", m, h.tokens.data(), n, h.source());
  CHECK(loads_as(s, "big", h, n) == "");
  CHECK(chunk_layout(path, "big", kChunk) == "");
  CHECK(chunk_rows(path) == (n + kChunk - 1) / kChunk);
}

TEST_CASE("store: load limit, max_tokens and tokens()", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const int64_t n = 23;
  EngineBuffers h = history(m, n, 17);
  Store s(path, small_chunks(m));
  s.append("chat-17", m, h.tokens.data(), n, h.source());

  for (int64_t k : {0, 1, 3, 4, 5, 8, 22}) {
    INFO("limit " << k);
    CHECK(loads_as(s, "chat-17", h, k, k) == "");
  }
  CHECK(loads_as(s, "chat-17", h, n, n) == "");
  CHECK(loads_as(s, "chat-17", h, n, 1000) == "");
  CHECK(loads_as(s, "chat-17", h, n, -1) == "");

  // max_tokens bounds what is delivered, not the conversation.
  {
    EngineBuffers out(m, 5);
    out.poison();
    CHECK(s.load("chat-17", m, out.tokens.data(), 5, out.target(), 5) == 5);
    CHECK(h.compare(out, 5) == "");
  }
  {
    EngineBuffers out(m, n);
    out.poison();
    Caught e = caught([&] { s.load("chat-17", m, out.tokens.data(), n - 1, out.target()); });
    CHECK(e.name() == name(ErrorCode::kTooLarge));
    CHECK(e.message.find("chat-17") != std::string::npos);
    Caught e2 = caught([&] { s.load("chat-17", m, out.tokens.data(), 5, out.target(), 6); });
    CHECK(e2.name() == name(ErrorCode::kTooLarge));
  }
  CHECK(s.tokens("chat-17") == prefix(h, n));

  // Absent conversations.
  EngineBuffers out(m, 4);
  CHECK(caught([&] { s.load("absent", m, out.tokens.data(), 4, out.target()); }).name() == name(ErrorCode::kNotFound));
  CHECK(caught([&] { s.tokens("absent"); }).name() == name(ErrorCode::kNotFound));
}

TEST_CASE("store: model mismatch on load and on append names both signatures", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  ModelSignature m = colikv_test::tiny_model();
  m.weights_id = "glm-a";
  EngineBuffers h = history(m, 10, 2);
  Store s(path, small_chunks(m));
  s.append("c", m, h.tokens.data(), 6, h.source());

  ModelSignature other_weights = m;
  other_weights.weights_id = "glm-b";
  ModelSignature no_weights = m;
  no_weights.weights_id = "";
  ModelSignature other_shape = colikv_test::tiny_model();
  other_shape.vocab = 1001;
  other_shape.weights_id = "glm-a";

  for (const ModelSignature& other : {other_weights, no_weights, other_shape}) {
    INFO("other model: " << other.to_string());
    EngineBuffers out(other, 16);
    out.poison();
    Caught e = caught([&] { s.load("c", other, out.tokens.data(), 16, out.target()); });
    CHECK(e.name() == name(ErrorCode::kModelMismatch));
    CHECK(e.message.find(m.to_string()) != std::string::npos);
    CHECK(e.message.find(other.to_string()) != std::string::npos);

    EngineBuffers g = history(other, 10, 2);
    g.tokens = h.tokens;  // the same tokens: only the model differs
    Caught a = caught([&] { s.append("c", other, g.tokens.data(), 10, g.source()); });
    CHECK(a.name() == name(ErrorCode::kModelMismatch));
    CHECK(a.message.find(m.to_string()) != std::string::npos);
    CHECK(a.message.find(other.to_string()) != std::string::npos);
    CHECK(s.count("c") == 6);
  }
  CHECK(loads_as(s, "c", h, 6) == "");
  CHECK(s.info("c").model == m);
  // The other signature is an independent model: its own conversation is fine.
  EngineBuffers g = history(other_weights, 5, 2);
  s.append("d", other_weights, g.tokens.data(), 5, g.source());
  CHECK(loads_as(s, "d", g, 5) == "");
  CHECK(s.info("d").model == other_weights);
}

TEST_CASE("store: diverged append reports the first differing position and changes nothing", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  const int64_t committed = 10;
  EngineBuffers h = history(m, committed, 3);
  Store s(path, small_chunks(m));
  s.append("c", m, h.tokens.data(), committed, h.source());
  const auto ids_before = chunk_ids(path, "c");
  const int64_t payload_before = payload_bytes(path);

  for (int64_t p : {0, 3, 6, 9}) {
    INFO("diverging at " << p);
    EngineBuffers g = history(m, 14, 3);
    diverge(g, p, 14, 99);
    Caught e = caught([&] { s.append("c", m, g.tokens.data(), 14, g.source()); });
    CHECK(e.name() == name(ErrorCode::kDiverged));
    CHECK(e.position == p);
    CHECK(!e.message.empty());
    CHECK(s.count("c") == committed);
    CHECK(loads_as(s, "c", h, committed) == "");
    CHECK(chunk_ids(path, "c") == ids_before);
    CHECK(payload_bytes(path) == payload_before);
    // Same length as committed with different tokens is not a silent success either.
    Caught same_len = caught([&] { s.append("c", m, g.tokens.data(), committed, g.source()); });
    CHECK(same_len.name() == name(ErrorCode::kDiverged));
    CHECK(same_len.position == p);
  }
  // A divergence only past the committed tokens is simply new data.
  EngineBuffers g = history(m, 14, 3);
  diverge(g, committed, 14, 99);
  s.append("c", m, g.tokens.data(), 14, g.source());
  CHECK(loads_as(s, "c", g, 14) == "");
  CHECK(s.verify().ok());
}

TEST_CASE_METHOD(SmallStore, "store: invalid appends are rejected and change nothing", "[backends][store]") {
  const ModelSignature& m = model;
  EngineBuffers h = history(16, 4);
  Store& s = store();
  write("c", h, 10);

  SECTION("token out of [0, vocab)") {
    for (int32_t bad : {m.vocab, m.vocab + 5, -1, INT32_MIN}) {
      INFO("token " << bad);
      EngineBuffers g = colikv_test::history(m, 16, 4);
      g.tokens[12] = bad;
      CHECK(caught([&] { write("c", g, 14); }).name() ==
            name(ErrorCode::kInvalidArgument));
      CHECK(s.count("c") == 10);
      // A new conversation is not created by a failing append.
      CHECK(caught([&] { write("new", g, 14); }).name() ==
            name(ErrorCode::kInvalidArgument));
      CHECK_FALSE(s.exists("new"));
    }
    CHECK(read("c", h, 10) == "");
  }
  SECTION("len below the committed count") {
    CHECK(caught([&] { write("c", h, 9); }).name() ==
          name(ErrorCode::kInvalidArgument));
    CHECK(caught([&] { s.append("c", m, h.tokens.data(), -1, h.source()); }).name() ==
          name(ErrorCode::kInvalidArgument));
    CHECK(s.count("c") == 10);
  }
  SECTION("an invalid model") {
    ModelSignature bad = m;
    bad.n_layers = 0;
    Caught e = caught([&] { s.append("x", bad, h.tokens.data(), 4, h.source()); });
    CHECK(e.name() == name(ErrorCode::kInvalidArgument));
    CHECK(e.message.find("n_layers") != std::string::npos);
    CHECK_FALSE(s.exists("x"));
    CHECK(sql_int(path, "SELECT count(*) FROM models") == 1);
  }
  SECTION("missing buffers") {
    colikv::KvSource none;
    CHECK(caught([&] { s.append("c", m, h.tokens.data(), 12, none); }).name() == name(ErrorCode::kInvalidArgument));
    CHECK(caught([&] { s.append("c", m, nullptr, 12, h.source()); }).name() == name(ErrorCode::kInvalidArgument));
    CHECK(s.count("c") == 10);
  }
  CHECK(s.verify().ok());
  CHECK(orphan_chunks(path) == 0);
}

TEST_CASE_METHOD(SmallStore, "store: an append of nothing new is a no-op", "[backends][store]") {
  EngineBuffers h = history(10, 6);
  Store& s = store();
  write("c", h, 10);
  const auto before = s.info("c");
  const auto ids = chunk_ids(path, "c");
  pause_ms(3);
  write("c", h, 10);
  CHECK(s.count("c") == 10);
  CHECK(chunk_ids(path, "c") == ids);
  CHECK(s.info("c").updated_ms == before.updated_ms);
  CHECK(read("c", h, 10) == "");
}

TEST_CASE_METHOD(SmallStore, "store: create() makes an empty conversation", "[backends][store]") {
  const ModelSignature& m = model;
  Store& s = store();
  s.create("e", m, "a title", R"({"k":1})");
  CHECK(s.exists("e"));
  CHECK(s.count("e") == 0);
  CHECK(s.conversation_count() == 1);
  auto info = s.info("e");
  CHECK(info.title == "a title");
  CHECK(info.metadata == R"({"k":1})");
  CHECK(info.tokens == 0);
  CHECK(info.model == m);
  EngineBuffers out(m, 4);
  CHECK(s.load("e", m, out.tokens.data(), 4, out.target()) == 0);
  CHECK(s.tokens("e").empty());
  CHECK(caught([&] { s.create("e", m); }).name() == name(ErrorCode::kConflict));
  ModelSignature bad = m;
  bad.vocab = 0;
  CHECK(caught([&] { s.create("f", bad); }).name() == name(ErrorCode::kInvalidArgument));
  CHECK(caught([&] { s.create("g", m, "", "{not json"); }).name() == name(ErrorCode::kInvalidArgument));
  CHECK_FALSE(s.exists("f"));
  CHECK_FALSE(s.exists("g"));
  // The model of an empty conversation is fixed.
  CHECK(caught([&] { s.load("e", colikv_test::tiny_indexed_model(), out.tokens.data(), 4, out.target()); }).name() ==
        name(ErrorCode::kModelMismatch));
  EngineBuffers h = colikv_test::history(m, 6, 1);
  write("e", h, 6);
  CHECK(read("e", h, 6) == "");
  CHECK(s.info("e").title == "a title");
}

TEST_CASE("store: truncate then re-append different tokens", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_indexed_model();
  EngineBuffers h = history(m, 20, 7);
  Store s(path, small_chunks(m));
  s.append("c", m, h.tokens.data(), 20, h.source());
  REQUIRE(chunk_rows(path) == 5);

  s.truncate("c", 10);  // mid-chunk
  CHECK(s.count("c") == 10);
  CHECK(loads_as(s, "c", h, 10) == "");
  CHECK(s.tokens("c") == prefix(h, 10));
  CHECK(shell_tokens(path, "c") == prefix(h, 10));
  CHECK(chunk_layout(path, "c", kChunk) == "");
  CHECK(chunk_rows(path) == 3);  // the chunks past position 10 are freed
  CHECK(orphan_chunks(path) == 0);

  EngineBuffers g = history(m, 20, 7);
  diverge(g, 10, 18, 70);
  s.append("c", m, g.tokens.data(), 18, g.source());
  CHECK(s.count("c") == 18);
  CHECK(loads_as(s, "c", g, 18) == "");
  CHECK(chunk_layout(path, "c", kChunk) == "");

  s.truncate("c", 18);  // to the count: nothing changes
  CHECK(loads_as(s, "c", g, 18) == "");
  s.truncate("c", 8);  // chunk boundary
  CHECK(loads_as(s, "c", g, 8) == "");
  CHECK(chunk_rows(path) == 2);
  s.truncate("c", 0);
  CHECK(s.count("c") == 0);
  CHECK(s.exists("c"));
  CHECK(chunk_rows(path) == 0);
  s.append("c", m, h.tokens.data(), 5, h.source());
  CHECK(loads_as(s, "c", h, 5) == "");

  CHECK(caught([&] { s.truncate("c", 6); }).name() == name(ErrorCode::kInvalidArgument));
  CHECK(caught([&] { s.truncate("c", -1); }).name() == name(ErrorCode::kInvalidArgument));
  CHECK(caught([&] { s.truncate("absent", 0); }).name() == name(ErrorCode::kNotFound));
  CHECK(s.count("c") == 5);
  CHECK(s.verify().ok());
}

TEST_CASE("store: remove frees the chunks no other conversation uses", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers a = history(m, 14, 1);
  EngineBuffers b = history(m, 9, 2);
  Store s(path, small_chunks(m));
  s.append("a", m, a.tokens.data(), 14, a.source());
  s.append("b", m, b.tokens.data(), 9, b.source());
  CHECK(chunk_rows(path) == 4 + 3);

  s.remove("a");
  CHECK_FALSE(s.exists("a"));
  CHECK(s.count("a") == 0);
  EngineBuffers out(m, 20);
  CHECK(caught([&] { s.load("a", m, out.tokens.data(), 20, out.target()); }).name() == name(ErrorCode::kNotFound));
  CHECK(chunk_rows(path) == 3);
  CHECK(orphan_chunks(path) == 0);
  CHECK(loads_as(s, "b", b, 9) == "");
  CHECK(caught([&] { s.remove("a"); }).name() == name(ErrorCode::kNotFound));

  s.remove("b");
  CHECK(chunk_rows(path) == 0);
  CHECK(s.conversation_count() == 0);
  CHECK(sql_int(path, "SELECT count(*) FROM conversation_chunks") == 0);

  // The id can be used again, even with another model.
  const ModelSignature mi = colikv_test::tiny_indexed_model();
  EngineBuffers c = history(mi, 3, 3);
  s.append("a", mi, c.tokens.data(), 3, c.source());
  CHECK(loads_as(s, "a", c, 3) == "");
}

TEST_CASE("store: a fork shares the chunks of its source", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  const int64_t n = 64;
  EngineBuffers h = history(m, n, 11);
  Store s(path, small_chunks(m));
  s.append("long", m, h.tokens.data(), n, h.source());
  const int64_t rows0 = chunk_rows(path);
  const int64_t bytes0 = payload_bytes(path);
  const int64_t max_chunk = sql_int(path, "SELECT max(length(payload)) FROM chunks");
  REQUIRE(rows0 == n / kChunk);

  SECTION("whole conversation: no chunk is added") {
    s.fork("long", "copy");
    CHECK(s.count("copy") == n);
    CHECK(loads_as(s, "copy", h, n) == "");
    CHECK(chunk_rows(path) == rows0);
    CHECK(payload_bytes(path) == bytes0);
    CHECK(chunk_ids(path, "copy") == chunk_ids(path, "long"));
    auto info = s.info("copy");
    CHECK(info.parent == "long");
    CHECK(info.forked_at == n);
  }
  SECTION("at a chunk boundary: no chunk is added") {
    s.fork("long", "copy", 32);
    CHECK(loads_as(s, "copy", h, 32) == "");
    CHECK(chunk_rows(path) == rows0);
    CHECK(payload_bytes(path) == bytes0);
    auto src = chunk_ids(path, "long");
    CHECK(chunk_ids(path, "copy") == std::vector<int64_t>(src.begin(), src.begin() + 8));
    CHECK(s.info("copy").forked_at == 32);
  }
  SECTION("mid-chunk: at most the one partial chunk is re-encoded") {
    s.fork("long", "copy", 30);
    CHECK(s.count("copy") == 30);
    CHECK(loads_as(s, "copy", h, 30) == "");
    CHECK(chunk_rows(path) <= rows0 + 1);
    CHECK(payload_bytes(path) - bytes0 <= max_chunk);
    auto src = chunk_ids(path, "long");
    auto dst = chunk_ids(path, "copy");
    REQUIRE(dst.size() == 8);
    CHECK(std::vector<int64_t>(dst.begin(), dst.begin() + 7) == std::vector<int64_t>(src.begin(), src.begin() + 7));
    CHECK(chunk_layout(path, "copy", kChunk) == "");
  }
  SECTION("empty fork") {
    s.fork("long", "empty", 0);
    CHECK(s.exists("empty"));
    CHECK(s.count("empty") == 0);
    CHECK(chunk_rows(path) == rows0);
  }
  SECTION("the stats see the sharing") {
    s.fork("long", "copy");
    auto st = s.stats();
    CHECK(st.total.saved_by_sharing() == n * m.record_bytes());
  }
  CHECK(loads_as(s, "long", h, n) == "");
  CHECK(s.verify().ok());
  CHECK(orphan_chunks(path) == 0);
}

TEST_CASE("store: fork mid-chunk, grow both independently, delete the source", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_indexed_model();
  EngineBuffers src = history(m, 40, 21);
  Store s(path, small_chunks(m));
  s.append("src", m, src.tokens.data(), 30, src.source());

  s.fork("src", "fork", 14);
  CHECK(loads_as(s, "fork", src, 14) == "");
  EngineBuffers f = history(m, 40, 21);
  diverge(f, 14, 40, 22);  // the fork's own continuation
  s.append("fork", m, f.tokens.data(), 19, f.source());
  s.append("fork", m, f.tokens.data(), 26, f.source());
  s.append("src", m, src.tokens.data(), 40, src.source());
  CHECK(loads_as(s, "fork", f, 26) == "");
  CHECK(loads_as(s, "src", src, 40) == "");
  // The fork holds its own tokens; the source cannot be extended with them.
  Caught e = caught([&] { s.append("src", m, f.tokens.data(), 40, f.source()); });
  CHECK(e.name() == name(ErrorCode::kDiverged));
  CHECK(e.position == 14);

  // A fork of the fork.
  s.fork("fork", "grandchild", 20);
  CHECK(loads_as(s, "grandchild", f, 20) == "");
  CHECK(s.info("grandchild").parent == "fork");

  // Truncating the source does not touch what the fork shares.
  s.truncate("src", 2);
  CHECK(loads_as(s, "fork", f, 26) == "");
  CHECK(loads_as(s, "src", src, 2) == "");

  s.remove("src");
  CHECK(loads_as(s, "fork", f, 26) == "");
  CHECK(loads_as(s, "grandchild", f, 20) == "");
  CHECK(s.info("fork").parent == "");
  CHECK(s.info("fork").forked_at == 14);
  CHECK(orphan_chunks(path) == 0);
  CHECK(s.verify().ok());

  s.remove("fork");
  CHECK(loads_as(s, "grandchild", f, 20) == "");
  s.remove("grandchild");
  CHECK(chunk_rows(path) == 0);
}

TEST_CASE_METHOD(SmallStore, "store: fork errors", "[backends][store]") {
  EngineBuffers h = history(10, 1);
  Store& s = store();
  write("a", h, 10);
  write("b", h, 3);
  CHECK(caught([&] { s.fork("absent", "x"); }).name() == name(ErrorCode::kNotFound));
  CHECK(caught([&] { s.fork("a", "b"); }).name() == name(ErrorCode::kConflict));
  CHECK(caught([&] { s.fork("a", "x", 11); }).name() == name(ErrorCode::kInvalidArgument));
  CHECK_FALSE(s.exists("x"));
  CHECK(s.count("b") == 3);
  CHECK(s.conversation_count() == 2);
}

TEST_CASE_METHOD(SmallStore, "store: rename, title, metadata and info", "[backends][store]") {
  const ModelSignature& m = model;
  EngineBuffers h = history(10, 1);
  Store& s = store();
  write("a", h, 10);

  auto info = s.info("a");
  CHECK(info.id == "a");
  CHECK(info.model == m);
  CHECK(info.tokens == 10);
  CHECK(info.title == "");
  CHECK(info.metadata == "{}");
  CHECK(info.parent == "");
  CHECK(info.forked_at == 0);
  CHECK(info.created_ms > 1577836800000);  // a Unix time in milliseconds (after 2020)
  CHECK(info.updated_ms >= info.created_ms);
  CHECK(info.last_used_ms >= info.created_ms);
  CHECK(info.raw_bytes == 10 * m.record_bytes());
  CHECK(info.stored_bytes > 0);
  CHECK(info.stored_bytes == payload_bytes(path));

  s.set_title("a", "Über title — with ünïcode");
  CHECK(s.info("a").title == "Über title — with ünïcode");
  s.set_metadata("a", R"({"lang":"de","turns":[1,2,3]})");
  CHECK(s.info("a").metadata == R"({"lang":"de","turns":[1,2,3]})");
  for (const char* bad : {"{", "not json", "{\"a\":}", ""}) {
    INFO("metadata '" << bad << "'");
    CHECK(caught([&] { s.set_metadata("a", bad); }).name() == name(ErrorCode::kInvalidArgument));
  }
  CHECK(s.info("a").metadata == R"({"lang":"de","turns":[1,2,3]})");
  CHECK(caught([&] { s.set_title("absent", "t"); }).name() == name(ErrorCode::kNotFound));
  CHECK(caught([&] { s.set_metadata("absent", "{}"); }).name() == name(ErrorCode::kNotFound));
  CHECK(caught([&] { s.info("absent"); }).name() == name(ErrorCode::kNotFound));

  s.fork("a", "child", 6);
  s.rename("a", "renamed");
  CHECK_FALSE(s.exists("a"));
  CHECK(s.exists("renamed"));
  CHECK(s.count("renamed") == 10);
  CHECK(read("renamed", h, 10) == "");
  CHECK(s.info("renamed").title == "Über title — with ünïcode");
  CHECK(s.info("child").parent == "renamed");
  CHECK(caught([&] { s.rename("absent", "z"); }).name() == name(ErrorCode::kNotFound));
  CHECK(caught([&] { s.rename("renamed", "child"); }).name() == name(ErrorCode::kConflict));
  CHECK(s.count("child") == 6);
  CHECK(s.count("renamed") == 10);
  // Ids are opaque text.
  s.rename("renamed", "id with 'quotes', \"double\", ; -- and ünïcode");
  CHECK(read("id with 'quotes', \"double\", ; -- and ünïcode", h, 10) == "");
}

TEST_CASE_METHOD(SmallStore, "store: list is most recently used first, with pagination", "[backends][store]") {
  const ModelSignature& m = model;
  EngineBuffers h = history(8, 1);
  Store& s = store();
  auto ids = [&](const colikv::ListOptions& o) {
    std::vector<std::string> v;
    for (const auto& c : s.list(o)) v.push_back(c.id);
    return v;
  };
  using V = std::vector<std::string>;
  // Pauses keep the millisecond timestamps distinct.
  write("a", h, 4);
  pause_ms(5);
  write("b", h, 5);
  pause_ms(5);
  s.create("c", m);
  pause_ms(5);
  CHECK(ids({}) == V{"c", "b", "a"});

  const auto a_before = s.info("a");
  EngineBuffers out(m, 8);
  s.load("a", m, out.tokens.data(), 8, out.target());  // a load is a use
  CHECK(ids({}) == V{"a", "c", "b"});
  CHECK(s.info("a").updated_ms == a_before.updated_ms);  // but not an update
  CHECK(s.info("a").last_used_ms > a_before.last_used_ms);
  pause_ms(5);
  write("b", h, 8);  // so is an append
  CHECK(ids({}) == V{"b", "a", "c"});
  pause_ms(5);
  s.info("c");
  s.count("c");
  CHECK(ids({}) == V{"b", "a", "c"});  // reading the row is not a use

  CHECK(ids({2, 0}) == V{"b", "a"});
  CHECK(ids({2, 2}) == V{"c"});
  CHECK(ids({2, 4}).empty());
  CHECK(ids({1, 1}) == V{"a"});
  CHECK(ids({0, 0}).empty());
  CHECK(s.conversation_count() == 3);

  auto rows = s.list();
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].tokens == 8);
  CHECK(rows[1].tokens == 4);
  CHECK(rows[2].tokens == 0);
  CHECK(rows[0].model == m);
  CHECK(rows[0].raw_bytes == 8 * m.record_bytes());

  for (int i = 0; i < 120; ++i) s.create("bulk" + std::to_string(i), m);
  CHECK(s.conversation_count() == 123);
  CHECK(s.list().size() == 100);  // the default limit
  CHECK(s.list({1000, 0}).size() == 123);
  CHECK(s.list({1000, 120}).size() == 3);
}

TEST_CASE("store: a read-only store refuses every write", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers h = history(m, 12, 1);
  {
    Store s(path, small_chunks(m));
    s.append("a", m, h.tokens.data(), 9, h.source());
  }
  Options o = small_chunks(m);
  o.read_only = true;
  Store s(path, o);
  CHECK(s.count("a") == 9);
  CHECK(loads_as(s, "a", h, 9) == "");
  CHECK(s.tokens("a") == prefix(h, 9));
  CHECK(s.info("a").tokens == 9);
  CHECK(s.list().size() == 1);
  CHECK(s.verify().ok());
  CHECK(s.stats().total.tokens == 9);

  const std::string ro = name(ErrorCode::kReadOnly);
  CHECK(caught([&] { s.append("a", m, h.tokens.data(), 12, h.source()); }).name() == ro);
  CHECK(caught([&] { s.append("new", m, h.tokens.data(), 12, h.source()); }).name() == ro);
  CHECK(caught([&] { s.create("new", m); }).name() == ro);
  CHECK(caught([&] { s.truncate("a", 3); }).name() == ro);
  CHECK(caught([&] { s.remove("a"); }).name() == ro);
  CHECK(caught([&] { s.fork("a", "f"); }).name() == ro);
  CHECK(caught([&] { s.rename("a", "b"); }).name() == ro);
  CHECK(caught([&] { s.set_title("a", "t"); }).name() == ro);
  CHECK(caught([&] { s.set_metadata("a", "{}"); }).name() == ro);

  Store w(path, small_chunks(m));
  CHECK(w.count("a") == 9);
  CHECK(w.conversation_count() == 1);
  CHECK(w.info("a").title == "");
  CHECK(loads_as(w, "a", h, 9) == "");
  // A read-only Store sees what a writer commits.
  w.append("a", m, h.tokens.data(), 12, h.source());
  CHECK(loads_as(s, "a", h, 12) == "");
}

TEST_CASE("store: a store with a newer schema refuses to open", "[store]") {
  TempDir dir;
  const std::string path = dir.file("s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers h = history(m, 4, 1);
  {
    Store s(path, small_chunks(m));
    s.append("a", m, h.tokens.data(), 4, h.source());
  }
  sql_exec(path, "PRAGMA user_version=999");
  for (bool read_only : {false, true}) {
    INFO("read_only " << read_only);
    Options o;
    o.read_only = read_only;
    Caught e = caught([&] { Store s(path, o); });
    CHECK(e.name() == name(ErrorCode::kVersion));
    CHECK(e.message.find("999") != std::string::npos);
    CHECK(e.message.find(std::to_string(Store::library_schema_version())) != std::string::npos);
  }
  CHECK(sql_int(path, "PRAGMA user_version") == 999);
  CHECK(sql_int(path, "SELECT token_count FROM conversations WHERE name = 'a'") == 4);
}

TEST_CASE("store: a file that is not a colikv store is a clear error", "[store]") {
  TempDir dir;
  SECTION("another application's SQLite database") {
    const std::string path = dir.file("other.db");
    {
      SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('hello')");
    }
    for (bool read_only : {false, true}) {
      INFO("read_only " << read_only);
      Options o;
      o.read_only = read_only;
      Caught e = caught([&] { Store s(path, o); });
      CHECK((e.name() == name(ErrorCode::kCorrupt) || e.name() == name(ErrorCode::kVersion)));
      CHECK(e.message.find("other.db") != std::string::npos);
    }
    // Nothing was added to it.
    CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master") == 1);
    CHECK(sql_int(path, "PRAGMA user_version") == 0);
  }
  SECTION("random bytes") {
    const std::string path = dir.file("random.colikv");
    std::string bytes(70000, '\0');
    uint32_t x = 12345;
    for (auto& c : bytes) {
      x = x * 1664525u + 1013904223u;
      c = static_cast<char>(x >> 24);
    }
    colikv_test::write_file(path, bytes);
    for (bool read_only : {false, true}) {
      INFO("read_only " << read_only);
      Options o;
      o.read_only = read_only;
      Caught e = caught([&] { Store s(path, o); });
      CHECK((e.name() == name(ErrorCode::kCorrupt) || e.name() == name(ErrorCode::kVersion)));
      CHECK(e.message.find("random.colikv") != std::string::npos);
    }
    CHECK(colikv_test::read_file(path) == bytes);
  }
  SECTION("a short text file") {
    const std::string path = dir.file("text.colikv");
    colikv_test::write_file(path, "this is not a database\n");
    Caught e = caught([&] { Store s(path); });
    CHECK((e.name() == name(ErrorCode::kCorrupt) || e.name() == name(ErrorCode::kVersion)));
    CHECK(colikv_test::read_file(path) == "this is not a database\n");
  }
}

TEST_CASE("store: verify reports a healthy store as ok", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_indexed_model();
  EngineBuffers a = history(m, 13, 1);
  EngineBuffers b = history(m, 6, 2);
  Store s(path, small_chunks(m));
  s.append("a", m, a.tokens.data(), 13, a.source());
  s.append("b", m, b.tokens.data(), 6, b.source());
  s.fork("a", "c", 9);
  s.create("empty", m);
  std::vector<std::pair<int64_t, int64_t>> progress;
  auto r = s.verify("", [&](int64_t done, int64_t total) { progress.emplace_back(done, total); });
  INFO((r.problems.empty() ? std::string() : r.problems[0].what));
  CHECK(r.ok());
  CHECK(r.problems.empty());
  CHECK(r.integrity == "ok");
  CHECK(r.conversations == 4);
  CHECK(r.chunks == chunk_rows(path));
  CHECK(r.bytes > 0);
  REQUIRE(!progress.empty());
  for (size_t i = 1; i < progress.size(); ++i) CHECK(progress[i].first >= progress[i - 1].first);
  CHECK(progress.back().first == progress.back().second);

  auto one = s.verify("b");
  CHECK(one.ok());
  CHECK(one.conversations == 1);
  CHECK(one.chunks == 2);
  CHECK(caught([&] { s.verify("absent"); }).name() == name(ErrorCode::kNotFound));
}

TEST_CASE("store: a corrupt chunk fails load with kCorrupt and verify names it", "[store]") {
  TempDir dir;
  const std::string path = dir.file("s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers a = history(m, 20, 1);
  EngineBuffers b = history(m, 20, 2);
  {
    Store s(path, small_chunks(m));
    s.append("alpha", m, a.tokens.data(), 20, a.source());
    s.append("beta", m, b.tokens.data(), 20, b.source());
  }
  const int64_t victim = chunk_ids(path, "alpha").at(1);  // positions [4, 8) of "alpha" only
  const auto beta_ids = chunk_ids(path, "beta");
  REQUIRE(std::find(beta_ids.begin(), beta_ids.end(), victim) == beta_ids.end());
  const std::string where = " WHERE chunk_id = " + std::to_string(victim);

  SECTION("a flipped payload byte") {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    SQLite::Statement q(db, "SELECT payload FROM chunks" + where);
    REQUIRE(q.executeStep());
    std::string blob(static_cast<const char*>(q.getColumn(0).getBlob()), static_cast<size_t>(q.getColumn(0).getBytes()));
    q.reset();
    blob[blob.size() / 3] = static_cast<char>(blob[blob.size() / 3] ^ 0x10);
    SQLite::Statement u(db, "UPDATE chunks SET payload = ?" + where);
    u.bind(1, blob.data(), static_cast<int>(blob.size()));
    REQUIRE(u.exec() == 1);
  }
  SECTION("a truncated payload") { sql_exec(path, "UPDATE chunks SET payload = substr(payload, 1, length(payload) - 5)" + where); }
  SECTION("an empty payload") { sql_exec(path, "UPDATE chunks SET payload = X''" + where); }
  SECTION("a wrong raw size") { sql_exec(path, "UPDATE chunks SET raw_size = raw_size + 4" + where); }
  SECTION("a wrong checksum") { sql_exec(path, "UPDATE chunks SET checksum = (checksum + 1) % 4294967296" + where); }
  SECTION("a changed token id") {
    // The checksum covers the token ids too.
    int32_t t = a.tokens[5];
    std::string json = sql_text(path, "SELECT tokens FROM chunks" + where);
    std::string from = "," + std::to_string(t) + ",";
    std::string to = "," + std::to_string((t + 1) % m.vocab) + ",";
    auto at = json.find(from);
    REQUIRE(at != std::string::npos);
    json.replace(at, from.size(), to);
    sql_exec(path, "UPDATE chunks SET tokens = '" + json + "'" + where);
  }

  Store s(path, small_chunks(m));
  EngineBuffers out(m, 20);
  out.poison();
  Caught e = caught([&] { s.load("alpha", m, out.tokens.data(), 20, out.target()); });
  CHECK(e.name() == name(ErrorCode::kCorrupt));
  CHECK(e.message.find("alpha") != std::string::npos);
  // No byte of the failing chunk reached the buffers.
  int64_t written = 0;
  for (int l = 0; l < m.n_layers; ++l) {
    for (int64_t i = 4 * m.kv_lora; i < 8 * m.kv_lora; ++i) written += bits_of(out.lc[l][static_cast<size_t>(i)]) != 0x7fc0deadu;
    for (int64_t i = 4 * m.qk_rope; i < 8 * m.qk_rope; ++i) written += bits_of(out.rc[l][static_cast<size_t>(i)]) != 0x7fc0deadu;
  }
  CHECK(written == 0);
  // The other conversation is intact.
  CHECK(loads_as(s, "beta", b, 20) == "");

  auto r = s.verify();
  CHECK_FALSE(r.ok());
  bool named = false;
  for (const auto& p : r.problems) {
    INFO(p.conversation << " seq " << p.chunk_seq << " [" << p.first_pos << ", " << p.end_pos << "): " << p.what);
    CHECK(p.conversation != "beta");
    CHECK(!p.what.empty());
    if (p.conversation == "alpha" && p.first_pos == 4 && p.end_pos == 8 && p.chunk_id == victim && p.chunk_seq == 1)
      named = true;
  }
  CHECK(named);
  CHECK(r.integrity == "ok");
  CHECK_FALSE(s.verify("alpha").ok());
  CHECK(s.verify("beta").ok());
}

TEST_CASE("store: stats count logical, unique and stored bytes", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  const ModelSignature mi = colikv_test::tiny_indexed_model();
  const int64_t n = 40;
  EngineBuffers h = history(m, n, 1);
  EngineBuffers hi = history(mi, 6, 2);
  Store s(path, small_chunks(m));

  auto empty = s.stats();
  CHECK(empty.models.empty());
  CHECK(empty.total.tokens == 0);
  CHECK(empty.total.conversations == 0);

  s.append("a", m, h.tokens.data(), n, h.source());
  s.fork("a", "b");
  auto st = s.stats();
  REQUIRE(st.models.size() == 1);
  const auto& u = st.models[0];
  CHECK(u.model == m);
  CHECK(u.chunk_tokens == kChunk);
  CHECK(u.conversations == 2);
  CHECK(u.tokens == 2 * n);
  CHECK(u.chunks == n / kChunk);
  CHECK(u.logical_bytes == 2 * n * m.record_bytes());
  CHECK(u.unique_bytes == n * m.record_bytes());
  CHECK(u.stored_bytes == payload_bytes(path));
  CHECK(u.saved_by_sharing() == n * m.record_bytes());
  CHECK(u.saved_by_sharing() > 0);
  CHECK(st.total.model.n_layers == 0);
  CHECK(st.total.logical_bytes == u.logical_bytes);
  CHECK(st.total.stored_bytes == u.stored_bytes);
  CHECK(st.file_bytes >= st.total.stored_bytes);

  // The indexed model gets its own row, in creation order; its chunk size
  // follows from the same target (1168 bytes: 2 tokens of 452).
  s.append("i", mi, hi.tokens.data(), 6, hi.source());
  st = s.stats();
  REQUIRE(st.models.size() == 2);
  CHECK(st.models[0].model == m);
  CHECK(st.models[1].model == mi);
  CHECK(st.models[1].chunk_tokens == 2);
  CHECK(st.models[1].chunks == 3);
  CHECK(st.models[1].conversations == 1);
  CHECK(st.models[1].tokens == 6);
  CHECK(st.models[1].logical_bytes == 6 * mi.record_bytes());
  CHECK(st.models[1].unique_bytes == 6 * mi.record_bytes());
  CHECK(st.total.conversations == 3);
  CHECK(st.total.tokens == 2 * n + 6);
  CHECK(st.total.chunks == n / kChunk + 3);
  CHECK(st.total.logical_bytes == 2 * n * m.record_bytes() + 6 * mi.record_bytes());
  CHECK(st.total.unique_bytes == n * m.record_bytes() + 6 * mi.record_bytes());
  CHECK(st.total.stored_bytes == payload_bytes(path));
}

TEST_CASE("store: chunk size in tokens is fixed per model", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  ModelSignature glm;
  glm.n_layers = 78; glm.kv_lora = 512; glm.qk_rope = 64; glm.vocab = 154880;
  const ModelSignature tiny = colikv_test::tiny_model();
  {
    Store s(path);  // default target: 4 MiB
    s.create("g", glm);
    s.create("t", tiny);
  }
  const std::string q = "SELECT chunk_tokens FROM models WHERE signature = ";
  CHECK(sql_int(path, q + "'" + glm.to_string() + "'") == 16);    // 16 * 179716 bytes <= 4 MiB < 32 * ...
  CHECK(sql_int(path, q + "'" + tiny.to_string() + "'") == 1024); // capped at 1024 tokens
  {
    Options o;
    o.chunk_target_bytes = 1;  // at least one token; an existing model keeps its size
    Store s(path, o);
    ModelSignature other = tiny;
    other.weights_id = "w";
    s.create("o", other);
    EngineBuffers h = history(tiny, 3, 1);
    s.append("t", tiny, h.tokens.data(), 3, h.source());
    CHECK(chunk_rows(path) == 1);
  }
  ModelSignature other = tiny;
  other.weights_id = "w";
  CHECK(sql_int(path, q + "'" + other.to_string() + "'") == 1);
  CHECK(sql_int(path, q + "'" + tiny.to_string() + "'") == 1024);
}

TEST_CASE("store: one Store shared by threads", "[backends][store][concurrency]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  const int64_t n = 48;
  Store s(path, small_chunks(m));
  std::vector<EngineBuffers> hs;
  for (uint32_t t = 0; t < 3; ++t) hs.push_back(history(m, n, 100 + t));
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (size_t t = 0; t < hs.size(); ++t) {
    threads.emplace_back([&, t] {
      try {
        const std::string id = "t" + std::to_string(t);
        for (int64_t len = 3; len <= n; len += 3) {
          s.append(id, m, hs[t].tokens.data(), len, hs[t].source());
          EngineBuffers out(m, len);
          if (s.load(id, m, out.tokens.data(), len, out.target()) != len || !hs[t].compare(out, len).empty()) {
            std::lock_guard<std::mutex> g(mu);
            failures.push_back(id + ": bad load at " + std::to_string(len));
          }
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> g(mu);
        failures.push_back(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == std::vector<std::string>{});
  for (size_t t = 0; t < hs.size(); ++t) CHECK(loads_as(s, "t" + std::to_string(t), hs[t], n) == "");
  CHECK(s.verify().ok());
}

TEST_CASE("store: two writers racing on one conversation keep one consistent history", "[backends][store][concurrency]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  const Options o = small_chunks(m);
  { Store s(path, o); }  // the schema exists before the race
  const int64_t n = 90;
  std::mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> g(mu);
    failures.push_back(what);
  };

  SECTION("both writers extend the same history") {
    // Whoever commits, every committed state is a prefix of h. A writer whose
    // view is stale gets kConflict (a commit came in during its call) or
    // kInvalidArgument (its len is already below the count); never kDiverged.
    EngineBuffers h = history(m, n, 77);
    std::atomic<int64_t> successes{0}, conflicts{0};
    auto writer = [&](int64_t step) {
      try {
        Store s(path, o);
        for (int iter = 0; iter < 10000; ++iter) {
          int64_t c = s.count("shared");
          if (c >= n) return;
          int64_t len = std::min(n, c + step);
          try {
            s.append("shared", m, h.tokens.data(), len, h.source());
            ++successes;
          } catch (const Error& e) {
            if (e.code() == ErrorCode::kConflict) {
              ++conflicts;
            } else if (e.code() == ErrorCode::kInvalidArgument && s.count("shared") > len) {
              // overtaken before the call: fine
            } else {
              fail(std::string(colikv::error_code_name(e.code())) + ": " + e.what());
              return;
            }
          }
        }
        fail("no progress");
      } catch (const std::exception& e) {
        fail(e.what());
      }
    };
    std::thread t1(writer, 3), t2(writer, 5);
    t1.join();
    t2.join();
    CHECK(failures == std::vector<std::string>{});
    CHECK(successes > 0);
    Store s(path, o);
    CHECK(s.count("shared") == n);
    CHECK(loads_as(s, "shared", h, n) == "");
    CHECK(chunk_layout(path, "shared", kChunk) == "");
    // The tail is one piece or several, depending on which writer won each turn.
    CHECK(chunk_rows(path) == static_cast<int64_t>(chunk_ids(path, "shared").size()));
    CHECK(orphan_chunks(path) == 0);
    CHECK(s.verify().ok());
  }

  SECTION("writers with different histories: the first one wins") {
    EngineBuffers ha = history(m, n, 11);
    EngineBuffers hb = history(m, n, 22);
    REQUIRE(ha.tokens[0] != hb.tokens[0]);  // they differ from position 0 on
    auto writer = [&](const EngineBuffers& h, int64_t step) {
      try {
        Store s(path, o);
        for (int iter = 0; iter < 10000; ++iter) {
          int64_t c = s.count("shared");
          if (c >= n) return;
          int64_t len = std::min(n, c + step);
          try {
            s.append("shared", m, h.tokens.data(), len, h.source());
          } catch (const Error& e) {
            if (e.code() == ErrorCode::kDiverged) {
              if (e.position() != 0) fail("diverged at " + std::to_string(e.position()) + ", expected 0");
              return;  // the other history is there: this writer lost
            }
            if (e.code() == ErrorCode::kConflict) continue;
            if (e.code() == ErrorCode::kInvalidArgument && s.count("shared") > len) continue;
            fail(std::string(colikv::error_code_name(e.code())) + ": " + e.what());
            return;
          }
        }
        fail("no progress");
      } catch (const std::exception& e) {
        fail(e.what());
      }
    };
    std::thread t1(writer, std::cref(ha), 3), t2(writer, std::cref(hb), 4);
    t1.join();
    t2.join();
    CHECK(failures == std::vector<std::string>{});
    Store s(path, o);
    CHECK(s.count("shared") == n);
    auto toks = s.tokens("shared");
    REQUIRE(!toks.empty());
    const EngineBuffers& winner = toks[0] == ha.tokens[0] ? ha : hb;
    CHECK(loads_as(s, "shared", winner, n) == "");
    CHECK(orphan_chunks(path) == 0);
    CHECK(s.verify().ok());
  }
}

TEST_CASE("store: a diverged writer racing an active writer only ever gets kDiverged or kConflict", "[store][concurrency]") {
  // The writer grows the conversation one token at a time, so its last,
  // partial chunk is replaced (and the old one freed) by every commit; the
  // other writer's tokens differ at position 0, and it keeps trying to append
  // while that happens. Whatever it reads must be one consistent state.
  TempDir dir;
  const std::string path = dir.file("s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  Options o;  // default chunk size: 1024 tokens, so chunk 0 stays partial
  o.synchronous = colikv::Synchronous::kNormal;
  const int64_t n = 200;
  EngineBuffers hw = history(m, n, 11);
  EngineBuffers hl = history(m, n, 22);
  REQUIRE(hw.tokens[0] != hl.tokens[0]);
  { Store s(path, o); s.append("c", m, hw.tokens.data(), 1, hw.source()); }
  std::atomic<bool> done{false};
  std::mutex mu;
  std::vector<std::string> failures;
  int64_t diverged = 0;
  std::thread loser([&] {
    try {
      Store s(path, o);
      while (!done.load()) {
        try {
          s.append("c", m, hl.tokens.data(), n, hl.source());
          std::lock_guard<std::mutex> g(mu);
          failures.push_back("the diverged append succeeded");
          return;
        } catch (const Error& e) {
          if (e.code() == ErrorCode::kDiverged && e.position() == 0) {
            ++diverged;
          } else if (e.code() != ErrorCode::kConflict) {
            std::lock_guard<std::mutex> g(mu);
            failures.push_back(std::string(colikv::error_code_name(e.code())) + ": " + e.what());
            return;
          }
        }
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> g(mu);
      failures.push_back(e.what());
    }
  });
  try {
    Store s(path, o);
    for (int64_t len = 2; len <= n; ++len) s.append("c", m, hw.tokens.data(), len, hw.source());
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> g(mu);
    failures.push_back(std::string("writer: ") + e.what());
  }
  done = true;
  loser.join();
  CHECK(failures == std::vector<std::string>{});
  CHECK(diverged > 0);
  Store s(path, o);
  CHECK(loads_as(s, "c", hw, n) == "");
  CHECK(orphan_chunks(path) == 0);
}

TEST_CASE("store: a reader racing an active writer always loads a committed prefix", "[backends][store][concurrency]") {
  // Every commit of the writer replaces the partial chunk the reader may be
  // about to read; each load must still be one committed state, bit-exact.
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_indexed_model();
  Options o;
  o.synchronous = colikv::Synchronous::kNormal;
  const int64_t n = 200;
  EngineBuffers h = history(m, n, 5);
  { Store s(path, o); s.append("c", m, h.tokens.data(), 1, h.source()); }
  std::atomic<bool> done{false};
  std::vector<std::string> failures;
  std::mutex mu;
  int64_t loads = 0;
  std::thread reader([&] {
    try {
      Store s(path, o);
      EngineBuffers out(m, n);
      int64_t last = 0;
      bool final_pass = false;
      while (!final_pass) {
        final_pass = done.load();
        int64_t got = s.load("c", m, out.tokens.data(), n, out.target());
        ++loads;
        std::string d = got < last ? "count went back" : h.compare(out, got);
        if (!d.empty() || (final_pass && got != n)) {
          std::lock_guard<std::mutex> g(mu);
          failures.push_back("load of " + std::to_string(got) + ": " + (d.empty() ? "not the final count" : d));
          return;
        }
        last = got;
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> g(mu);
      failures.push_back(std::string("reader: ") + e.what());
    }
  });
  try {
    Store s(path, o);
    for (int64_t len = 2; len <= n; ++len) s.append("c", m, h.tokens.data(), len, h.source());
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> g(mu);
    failures.push_back(std::string("writer: ") + e.what());
  }
  done = true;
  reader.join();
  CHECK(failures == std::vector<std::string>{});
  CHECK(loads > 0);
}

TEST_CASE("store: append and load check the caller's buffers", "[backends][store]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_indexed_model();
  EngineBuffers h = history(m, 6, 1);
  Store s(path, small_chunks(m));
  s.append("c", m, h.tokens.data(), 6, h.source());
  EngineBuffers out(m, 6);
  const std::string invalid = name(ErrorCode::kInvalidArgument);

  colikv::KvTarget no_ic = out.target();
  no_ic.Ic = nullptr;  // the model has indexed layers
  CHECK(caught([&] { s.load("c", m, out.tokens.data(), 6, no_ic); }).name() == invalid);
  colikv::KvTarget no_lc = out.target();
  no_lc.Lc = nullptr;
  CHECK(caught([&] { s.load("c", m, out.tokens.data(), 6, no_lc); }).name() == invalid);
  CHECK(caught([&] { s.load("c", m, nullptr, 6, out.target()); }).name() == invalid);
  // Ic with a wrong number of non-null layers.
  std::vector<float*> ic(static_cast<size_t>(m.n_layers), nullptr);
  ic[static_cast<size_t>(m.n_layers - 1)] = out.ic[static_cast<size_t>(m.n_layers - 1)].data();
  colikv::KvTarget one_ic = out.target();
  one_ic.Ic = ic.data();
  CHECK(caught([&] { s.load("c", m, out.tokens.data(), 6, one_ic); }).name() == invalid);

  EngineBuffers more = history(m, 9, 1);
  colikv::KvSource more_no_ic = more.source();
  more_no_ic.Ic = nullptr;
  CHECK(caught([&] { s.append("c", m, more.tokens.data(), 9, more_no_ic); }).name() == invalid);
  CHECK(s.count("c") == 6);
  CHECK(loads_as(s, "c", h, 6) == "");
}
