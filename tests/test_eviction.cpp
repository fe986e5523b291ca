// Eviction under a byte budget: Store::gc, Options::max_store_bytes, loading
// and re-saving evicted conversations, vacuum. Tiny shapes, 4 tokens a chunk.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "colikv/coli_kv.h"
#include "colikv/colikv.h"
#include "colikv/store.h"
#include "backend.h"
#include "test_support.h"

using colikv::Error;
using colikv::ErrorCode;
using colikv::EvictionReport;
using colikv::ModelSignature;
using colikv::Options;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

constexpr int64_t kC = 4;  // tokens a chunk

Options small(const ModelSignature& m) { return colikv_test::chunked_options(m, kC); }

// The store e.db of the tiny model in small chunks, on either backend.
struct EvictionStore : colikv_test::StoreFixture {
  EvictionStore() : StoreFixture(colikv_test::tiny_model(), kC, "e.db") {}
};

// The history every test conversation is cut from: KV values depend on the
// position only (seed 11), token ids on (conversation, position) as given.
EngineBuffers engine(const ModelSignature& m, const std::vector<int32_t>& tokens) {
  EngineBuffers b(m, static_cast<int64_t>(tokens.size()) + 8);
  b.fill(0, b.capacity, 11);
  std::copy(tokens.begin(), tokens.end(), b.tokens.begin());
  return b;
}

std::vector<int32_t> toks(int32_t from, int n) { return colikv_test::token_run(from, n); }

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void put(Store& s, const std::string& id, const ModelSignature& m, const std::vector<int32_t>& t) {
  EngineBuffers b = engine(m, t);
  s.append(id, m, t.data(), static_cast<int64_t>(t.size()), b.source());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // distinct last-used times
}

// Loads id (or its first `limit` positions) and compares tokens and KV with the history.
void check_loads(Store& s, const std::string& id, const ModelSignature& m, const std::vector<int32_t>& t,
                 int64_t limit = -1) {
  EngineBuffers want = engine(m, t);
  EngineBuffers got(m, want.capacity);
  got.poison();
  const int64_t n = s.load(id, m, got.tokens.data(), got.capacity, got.target(), limit);
  const int64_t expect = limit < 0 ? static_cast<int64_t>(t.size()) : limit;
  REQUIRE(n == expect);
  CHECK(got.compare(want, n).empty());
  for (int64_t i = 0; i < n; ++i) REQUIRE(got.tokens[static_cast<size_t>(i)] == t[static_cast<size_t>(i)]);
}

// Loading an evicted conversation fails with kEvicted, returns its token ids
// and writes no KV byte.
void check_evicted(Store& s, const std::string& id, const ModelSignature& m, const std::vector<int32_t>& t,
                   int64_t first_gone) {
  EngineBuffers got(m, static_cast<int64_t>(t.size()) + 8);
  got.poison();
  EngineBuffers poisoned(m, got.capacity);
  poisoned.poison();
  try {
    s.load(id, m, got.tokens.data(), got.capacity, got.target());
    FAIL("load of evicted conversation '" << id << "' succeeded");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kEvicted);
    CHECK(e.position() == first_gone);
    CHECK(std::string(e.what()).find(id) != std::string::npos);
  }
  for (size_t i = 0; i < t.size(); ++i) REQUIRE(got.tokens[i] == t[i]);
  // compare() is bit-exact: NaN patterns compare equal to themselves.
  poisoned.tokens = got.tokens;
  CHECK(got.compare(poisoned, got.capacity).empty());
  CHECK(s.info(id).evicted);
  CHECK(s.tokens(id) == t);
}

int64_t stored(Store& s) { return s.stats().total.stored_bytes; }

}  // namespace

TEST_CASE_METHOD(EvictionStore, "gc: evicts least recently used conversations until the budget is met",
                 "[backends][eviction]") {
  const ModelSignature& m = model;
  Store& s = store();
  std::vector<std::vector<int32_t>> t;
  for (int i = 0; i < 6; ++i) {
    t.push_back(toks(100 * (i + 1), 10));
    put(s, "c" + std::to_string(i), m, t.back());
  }
  // c1 is used again: c0, c2, c3 ... are now the least recently used.
  check_loads(s, "c1", m, t[1]);
  const int64_t before = stored(s);
  const int64_t budget = before / 2;
  EvictionReport r = s.gc(budget);
  CHECK(r.fits);
  CHECK(r.stored_bytes_before == before);
  CHECK(r.stored_bytes_after <= budget);
  CHECK(r.freed_bytes == before - r.stored_bytes_after);
  CHECK(stored(s) == r.stored_bytes_after);
  REQUIRE(r.conversations.size() == 3);  // equal sizes: half of them
  CHECK(r.conversations == std::vector<std::string>{"c0", "c2", "c3"});
  CHECK(r.chunks == 9);
  for (int i : {0, 2, 3}) check_evicted(s, "c" + std::to_string(i), m, t[i], 0);
  for (int i : {1, 4, 5}) {
    check_loads(s, "c" + std::to_string(i), m, t[i]);
    CHECK_FALSE(s.info("c" + std::to_string(i)).evicted);
  }
  auto st = s.stats();
  CHECK(st.evicted_conversations == 3);
  CHECK(st.evicted_chunks == 9);
  CHECK(s.conversation_count() == 6);  // rows, metadata and token ids stay
  CHECK(s.verify().ok());
  // Within budget: nothing more to do.
  EvictionReport again = s.gc(budget);
  CHECK(again.freed_bytes == 0);
  CHECK(again.conversations.empty());
  // gc(0) evicts every conversation.
  EvictionReport all = s.gc(0);
  CHECK(all.stored_bytes_after == 0);
  CHECK(s.stats().evicted_conversations == 6);
  CHECK_THROWS_MATCHES(s.gc(-1), Error, Catch::Predicate<Error>([](const Error& e) {
                         return e.code() == ErrorCode::kInvalidArgument;
                       }));
}

TEST_CASE_METHOD(EvictionStore, "gc: chunks shared with a kept conversation stay", "[backends][eviction]") {
  const ModelSignature& m = model;
  Store& s = store();
  const auto shared = toks(10, 8);  // two full chunks
  const auto a = cat(shared, toks(500, 6));
  const auto b = cat(shared, toks(600, 6));
  put(s, "a", m, a);
  put(s, "b", m, b);
  const int64_t before = stored(s);
  EvictionReport r = s.gc(before - 1);  // evicting "a" alone is enough
  CHECK(r.conversations == std::vector<std::string>{"a"});
  CHECK(r.chunks == 2);  // a's own chunks; the two shared ones stay
  check_evicted(s, "a", m, a, 8);
  check_loads(s, "a", m, a, 8);  // the shared prefix still loads
  check_loads(s, "b", m, b);
  // The lookup reports it, with how much of it loads.
  auto p = s.match(m, a.data(), static_cast<int64_t>(a.size()));
  CHECK(p.id == "a");
  CHECK(p.tokens == 14);
  CHECK(p.loadable == 8);
  CHECK(p.evicted());
  // Evicting b too frees the shared chunks: both are fully evicted.
  r = s.gc(0);
  CHECK(r.conversations == std::vector<std::string>{"a", "b"});  // a lost the shared chunks too
  check_evicted(s, "a", m, a, 0);
  check_evicted(s, "b", m, b, 0);
  p = s.match(m, b.data(), static_cast<int64_t>(b.size()));
  CHECK(p.id == "b");
  CHECK(p.loadable == 0);
  CHECK(s.verify().ok());
}

TEST_CASE_METHOD(EvictionStore, "evicted conversations are re-saved by appending them again", "[backends][eviction]") {
  const ModelSignature& m = model;
  Store& s = store();
  const auto a = toks(10, 10);
  const auto b = toks(300, 9);
  put(s, "a", m, a);
  put(s, "b", m, b);
  s.gc(0);
  // The same length: the engine re-prefilled it and saves it back.
  put(s, "a", m, a);
  CHECK_FALSE(s.info("a").evicted);
  check_loads(s, "a", m, a);
  // Longer: the evicted chunks and the new turn are saved together.
  const auto b2 = cat(b, toks(700, 6));
  put(s, "b", m, b2);
  CHECK_FALSE(s.info("b").evicted);
  check_loads(s, "b", m, b2);
  CHECK(s.stats().evicted_chunks == 0);
  CHECK(s.verify().ok());
  // A new conversation with an evicted conversation's prefix refills the shared chunks.
  s.gc(0);
  const auto c = cat(toks(10, 8), toks(900, 3));
  put(s, "c", m, c);
  check_loads(s, "c", m, c);
  check_loads(s, "a", m, a, 8);
  check_evicted(s, "a", m, a, 8);
}

TEST_CASE_METHOD(EvictionStore, "truncate and fork of an evicted conversation keep its token ids",
                 "[backends][eviction]") {
  const ModelSignature& m = model;
  Store& s = store();
  const auto a = toks(10, 11);
  put(s, "a", m, a);
  s.gc(0);
  s.fork("a", "f", 7);  // ends inside an evicted chunk
  s.truncate("a", 6);
  const std::vector<int32_t> a6(a.begin(), a.begin() + 6), a7(a.begin(), a.begin() + 7);
  check_evicted(s, "a", m, a6, 0);
  check_evicted(s, "f", m, a7, 0);
  CHECK(s.verify().ok());
  // Re-saved after a divergence: truncate, then append the new tokens with the KV of all positions.
  const auto f2 = cat(a7, toks(800, 5));
  put(s, "f", m, f2);
  check_loads(s, "f", m, f2);
  CHECK_FALSE(s.info("f").evicted);
  CHECK(s.info("a").evicted);
}

TEST_CASE("max_store_bytes: appends keep the store within its budget", "[backends][eviction]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  int64_t per_conv = 0;
  {
    Store probe(colikv_test::store_at(dir, "probe.db"), small(m));
    put(probe, "x", m, toks(100, 12));
    per_conv = stored(probe);
  }
  Options o = small(m);
  o.max_store_bytes = per_conv * 3 + per_conv / 2;  // room for three and a half
  Store s(colikv_test::store_at(dir, "e.db"), o);
  std::vector<std::vector<int32_t>> t;
  for (int i = 0; i < 8; ++i) {
    t.push_back(toks(100 * (i + 1), 12));
    put(s, "c" + std::to_string(i), m, t.back());
    CHECK(stored(s) <= o.max_store_bytes);
    check_loads(s, "c" + std::to_string(i), m, t.back());  // the one just written is never evicted
    if (i >= 3) check_loads(s, "c1", m, t[1]);  // kept in use: the others go before it
  }
  for (int i : {0, 2, 3, 4, 5}) CHECK(s.info("c" + std::to_string(i)).evicted);
  for (int i : {1, 6, 7}) CHECK_FALSE(s.info("c" + std::to_string(i)).evicted);
  // Larger than the whole budget: it is kept and everything else goes.
  const auto big = toks(900, 60);  // shares no chunk with c0..c7
  put(s, "big", m, big);
  check_loads(s, "big", m, big);
  for (int i = 0; i < 8; ++i) {
    INFO("c" << i << " stored " << stored(s) << " budget " << o.max_store_bytes);
    CHECK(s.info("c" + std::to_string(i)).evicted);
  }
  CHECK(s.stats().evicted_conversations == 8);
  CHECK(s.verify().ok());
}

TEST_CASE("a reader loading meanwhile is not affected by eviction", "[backends][eviction]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  Options o = small(m);
  o.threads = 1;  // decode a window of two chunks at a time: most rows are read after the gc
  const auto t = toks(3, 160);
  {
    Store w(colikv_test::store_at(dir, "e.db"), o);
    put(w, "long", m, t);
    colikv::export_coli_kv(w, "long", dir.file("before.coli_kv"));
  }
  Store reader(colikv_test::store_at(dir, "e.db"), o);
  Store other(colikv_test::store_at(dir, "e.db"), o);  // another connection, as another process would have
  colikv::ExportOptions eo;
  int calls = 0;
  EvictionReport r;
  eo.progress = [&](int64_t, int64_t) {
    if (calls++ == 0) r = other.gc(0);
  };
  colikv::export_coli_kv(reader, "long", dir.file("during.coli_kv"), eo);
  CHECK(calls == 40);
  CHECK(r.chunks == 40);  // the gc did evict it, while the export read its snapshot
  CHECK(colikv_test::read_file(dir.file("during.coli_kv")) == colikv_test::read_file(dir.file("before.coli_kv")));
  CHECK_THROWS_MATCHES(colikv::export_coli_kv(reader, "long", dir.file("after.coli_kv")), Error,
                       Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::kEvicted; }));
}

TEST_CASE("gc gives the space of evicted data back to the filesystem, vacuum that of an older store",
          "[eviction]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  Options o = small(m);
  o.page_size = 4096;
  o.wal_checkpoint_bytes = 1000 * 4096;  // checkpoints at 1000 pages, as these figures assume
  o.chunk_target_bytes = 16 * m.record_bytes();  // chunks larger than a page
  const std::string path = dir.file("e.db"), older = dir.file("older.db");
  auto checkpoint = [&](const std::string& p) {
    SQLite::Database db(p, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    return db.execAndGet("PRAGMA freelist_count").getInt64();
  };
  auto fill = [&](Store& s) {
    for (int i = 0; i < 20; ++i) put(s, "c" + std::to_string(i), m, toks(10 * i, 64));
  };
  {
    Store s(path, o);
    fill(s);
  }
  std::filesystem::copy_file(path, older);
  {
    // A store as an older colikv made it: without incremental vacuum.
    SQLite::Database db(older, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA auto_vacuum = NONE");
    db.exec("VACUUM");
    REQUIRE(db.execAndGet("PRAGMA auto_vacuum").getInt64() == 0);
  }
  CHECK(checkpoint(path) == 0);
  const auto full_size = std::filesystem::file_size(path);
  {
    Store s(path, o);
    s.gc(0);
    CHECK(checkpoint(path) == 0);  // given back by the gc itself, a chunk's worth per transaction
    CHECK(std::filesystem::file_size(path) < full_size / 2);
    const auto v = s.vacuum();  // nothing left for it
    CHECK(v.reclaimable_bytes == 0);
    CHECK(v.held_back.empty());
    CHECK(v.file_bytes_after <= v.file_bytes_before);
    CHECK(s.conversation_count() == 20);
    CHECK(s.tokens("c3") == toks(30, 64));
    CHECK(s.verify().ok());
  }
  {
    Store s(older, o);
    const auto older_size = std::filesystem::file_size(older);
    s.gc(0);
    CHECK(checkpoint(older) > 0);  // freed pages are kept for reuse ...
    CHECK(std::filesystem::file_size(older) == older_size);
    const auto v = s.vacuum();  // ... until vacuum gives them back, turning the steps on
    CHECK(v.reclaimable_bytes > 0);
    CHECK(v.held_back.empty());
    CHECK(v.file_bytes_after == static_cast<int64_t>(std::filesystem::file_size(older)));
    CHECK(v.file_bytes_after < static_cast<int64_t>(older_size) / 2);
    CHECK(v.file_bytes_before >= static_cast<int64_t>(older_size));
    CHECK(s.tokens("c3") == toks(30, 64));
    CHECK(s.verify().ok());
    SQLite::Database db(older, SQLite::OPEN_READONLY);
    CHECK(db.execAndGet("PRAGMA auto_vacuum").getInt64() == 2);
  }
  Options ro = o;
  ro.read_only = true;
  Store r(path, ro);
  CHECK_THROWS_MATCHES(r.gc(0), Error, Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::kReadOnly; }));
  CHECK_THROWS_MATCHES(r.vacuum(), Error, Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::kReadOnly; }));
}

TEST_CASE("eviction in the C API and in the schema's views", "[eviction]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const auto t = toks(50, 9);
  {
    Store s(dir.file("e.db"), small(m));
    put(s, "a", m, t);
    put(s, "b", m, toks(70, 9));
  }
  colikv_store* st = nullptr;
  REQUIRE(colikv_open(dir.file("e.db").c_str(), 0, &st) == COLIKV_OK);
  CHECK(colikv_gc(st, 0) > 0);
  CHECK(colikv_gc(st, 0) == 0);
  CHECK(colikv_gc(st, -5) == COLIKV_ERR_INVALID);
  colikv_model cm{m.n_layers, m.kv_lora, m.qk_rope, m.index_hd, m.n_indexed, m.vocab, nullptr};
  EngineBuffers b(m, 16);
  std::vector<float*> lc, rc;
  for (int l = 0; l < m.n_layers; ++l) {
    lc.push_back(b.lc[static_cast<size_t>(l)].data());
    rc.push_back(b.rc[static_cast<size_t>(l)].data());
  }
  CHECK(colikv_load(st, "a", &cm, b.tokens.data(), 16, lc.data(), rc.data(), nullptr) == COLIKV_ERR_EVICTED);
  CHECK(std::vector<int32_t>(b.tokens.begin(), b.tokens.begin() + 9) == t);
  CHECK(std::string(colikv_strerror(COLIKV_ERR_EVICTED)) == "evicted");
  CHECK(std::string(colikv_errmsg(st)).find("evicted") != std::string::npos);
  colikv_close(st);
  SQLite::Database db(dir.file("e.db"));
  CHECK(db.execAndGet("SELECT count(*) FROM conversation_summary WHERE evicted").getInt() == 2);
  CHECK(db.execAndGet("SELECT sum(stored_bytes) FROM conversation_summary").getInt64() == 0);
  CHECK(db.execAndGet("SELECT count(*) FROM conversation_tokens WHERE conversation = 'a'").getInt() == 9);
}
