// Longest-prefix lookup: Store::match and colikv_match. Tiny shapes with 4
// tokens a chunk, so that full chunks, partial chunks and divergence inside a
// chunk all occur within a dozen tokens.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "colikv/colikv.h"
#include "colikv/store.h"
#include "sqlite/sqlite_migrations.h"
#include "backend.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv::Options;
using colikv::PrefixMatch;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

constexpr int64_t kC = 4;  // tokens a chunk

Options four_token_chunks(const ModelSignature& m) { return colikv_test::chunked_options(m, kC); }

// Stores conversation `id` holding `tokens`; KV values depend on the position
// only, so shared prefixes have equal data whoever wrote them.
void put(Store& s, const std::string& id, const ModelSignature& m, const std::vector<int32_t>& tokens) {
  EngineBuffers b(m, static_cast<int64_t>(tokens.size()) + 1);
  b.fill(0, b.capacity, 7);
  s.append(id, m, tokens.data(), static_cast<int64_t>(tokens.size()), b.source());
}

PrefixMatch match(Store& s, const ModelSignature& m, const std::vector<int32_t>& t) {
  return s.match(m, t.data(), static_cast<int64_t>(t.size()));
}

std::vector<int32_t> seq(int32_t from, int n) { return colikv_test::token_run(from, n); }

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void pause_ms() { std::this_thread::sleep_for(std::chrono::milliseconds(3)); }

// The store m.db of the tiny model in kC-token chunks, on either backend.
struct MatchStore : colikv_test::StoreFixture {
  MatchStore() : StoreFixture(colikv_test::tiny_model(), kC, "m.db") {}
};

}  // namespace

TEST_CASE_METHOD(MatchStore, "match: exact, longer and shorter prompts", "[backends][match]") {
  const ModelSignature& m = model;
  Store& s = store();
  const auto conv = seq(100, 10);  // two full chunks and a partial one
  put(s, "a", m, conv);

  PrefixMatch r = match(s, m, conv);
  CHECK(r.id == "a");
  CHECK(r.tokens == 10);
  CHECK(r.loadable == 10);
  CHECK_FALSE(r.evicted());

  r = match(s, m, cat(conv, seq(500, 7)));  // the next turn: the whole conversation is reused
  CHECK(r.id == "a");
  CHECK(r.tokens == 10);

  for (int n = 1; n < 10; ++n) {  // a prefix of it, ending in or at a chunk
    r = match(s, m, seq(100, n));
    CHECK(r.id == "a");
    CHECK(r.tokens == n);
  }
  CHECK(match(s, m, {}).tokens == 0);
}

TEST_CASE("match: chunks of 1024 long token ids", "[backends][match]") {
  // A chunk's token list is then ~7 KB of JSON: longer than a PostgreSQL
  // btree entry may be, which the prefix index must not need whole.
  TempDir dir;
  ModelSignature m = colikv_test::tiny_model();
  m.vocab = 2000000;
  Store s(colikv_test::store_at(dir, "m.db"), colikv_test::chunked_options(m, 1024));
  const auto conv = seq(1000000, 2500);  // two full chunks and a partial one
  put(s, "long", m, conv);
  put(s, "other", m, cat(seq(1000000, 1500), seq(1500000, 700)));  // shares 1500 tokens of chunk 1
  CHECK(match(s, m, conv).id == "long");
  CHECK(match(s, m, conv).tokens == 2500);
  for (int n : {1, 1023, 1024, 1025, 1500, 2047, 2048, 2100}) {
    const PrefixMatch r = match(s, m, seq(1000000, n));
    INFO(n);
    CHECK(r.tokens == n);
  }
  const PrefixMatch r = match(s, m, cat(seq(1000000, 1500), seq(1500000, 10)));
  CHECK(r.id == "other");
  CHECK(r.tokens == 1510);
  CHECK(s.verify().ok());
}

TEST_CASE_METHOD(MatchStore, "match: a differing token at every position", "[backends][match]") {
  const ModelSignature& m = model;
  Store& s = store();
  const auto conv = seq(100, 11);
  put(s, "a", m, conv);
  for (int p = 0; p < 11; ++p) {
    auto prompt = conv;
    prompt[static_cast<size_t>(p)] = 999;
    prompt.push_back(5);
    PrefixMatch r = match(s, m, prompt);
    INFO("diverging at " << p);
    CHECK(r.tokens == p);
    CHECK(r.id == (p == 0 ? "" : "a"));
  }
  // Digits that are a prefix of another token's digits are not a match
  // ("[100,10" is a text prefix of "[100,101").
  put(s, "b", m, {7, 12, 5, 6, 1});
  CHECK(match(s, m, {7, 1, 5}).tokens == 1);
  CHECK(match(s, m, {7, 123}).tokens == 1);
  CHECK(match(s, m, {7, 12}).tokens == 2);
}

TEST_CASE_METHOD(MatchStore, "match: branches sharing a prefix, the longest wins", "[backends][match]") {
  const ModelSignature& m = model;
  Store& s = store();
  const auto system = seq(10, 6);  // ends inside the second chunk
  put(s, "x", m, cat(system, seq(200, 9)));
  put(s, "y", m, cat(system, seq(300, 3)));
  put(s, "z", m, cat(cat(system, seq(200, 4)), seq(700, 5)));  // diverges from x at 10

  PrefixMatch r = match(s, m, cat(system, seq(300, 2)));
  CHECK(r.id == "y");
  CHECK(r.tokens == 8);
  r = match(s, m, cat(system, seq(200, 8)));
  CHECK(r.id == "x");
  CHECK(r.tokens == 14);
  r = match(s, m, cat(cat(system, seq(200, 4)), seq(700, 2)));
  CHECK(r.id == "z");
  CHECK(r.tokens == 12);
  r = match(s, m, cat(system, {1, 2, 3}));  // only the system prompt is shared
  CHECK(r.tokens == 6);
  CHECK((r.id == "x" || r.id == "y" || r.id == "z"));
}

TEST_CASE_METHOD(MatchStore, "match: ties go to the most recently used", "[backends][match]") {
  const ModelSignature& m = model;
  Store& s = store();
  const auto conv = seq(40, 9);
  put(s, "old", m, conv);
  pause_ms();
  s.fork("old", "new");  // same tokens, same chunks; forking uses "old" too
  pause_ms();
  put(s, "other", m, seq(40, 3));  // shorter: not a tie

  EngineBuffers b(m, 16);
  auto use = [&](const std::string& id) {
    pause_ms();
    s.load(id, m, b.tokens.data(), 16, b.target());
  };
  use("new");
  CHECK(match(s, m, conv).id == "new");
  use("old");
  CHECK(match(s, m, conv).id == "old");
  CHECK(match(s, m, seq(40, 6)).id == "old");
  use("new");
  CHECK(match(s, m, seq(40, 6)).id == "new");
  CHECK(match(s, m, seq(40, 6)).tokens == 6);
  // The shorter one ties only on its own length, and is now the most recent.
  use("other");
  CHECK(match(s, m, seq(40, 3)).id == "other");
  CHECK(match(s, m, seq(40, 8)).id == "new");
}

TEST_CASE("match: never crosses models", "[backends][match]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  ModelSignature other = m;
  other.weights_id = "other-weights";
  Store s(colikv_test::store_at(dir, "m.db"), four_token_chunks(m));
  const auto conv = seq(100, 10);
  put(s, "a", m, conv);
  CHECK(match(s, other, conv).tokens == 0);
  CHECK(match(s, other, conv).id.empty());
  CHECK(match(s, colikv_test::tiny_indexed_model(), conv).tokens == 0);
  put(s, "b", other, seq(100, 5));
  CHECK(match(s, other, conv).id == "b");
  CHECK(match(s, other, conv).tokens == 5);
  CHECK(match(s, m, conv).id == "a");
  ModelSignature bad = m;
  bad.n_layers = 0;
  CHECK_THROWS_AS(match(s, bad, conv), colikv::Error);
}

TEST_CASE("match: follows truncate, delete and rename", "[match]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  Store s(dir.file("m.db"), four_token_chunks(m));
  const auto conv = seq(100, 10);
  put(s, "a", m, conv);
  s.truncate("a", 5);
  CHECK(match(s, m, conv).tokens == 5);
  s.truncate("a", 4);
  CHECK(match(s, m, conv).tokens == 4);
  s.rename("a", "b");
  CHECK(match(s, m, conv).id == "b");
  s.remove("b");
  CHECK(match(s, m, conv).tokens == 0);
  CHECK(match(s, m, conv).id.empty());
  // Chunks freed with it left no lookup rows behind.
  SQLite::Database db(dir.file("m.db"));
  CHECK(db.execAndGet("SELECT count(*) FROM chunk_meta").getInt() == 0);
}

TEST_CASE("match: thousands of conversations sharing a system prompt", "[backends][match]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  Options o = four_token_chunks(m);
  o.page_size = 4096;  // small pages: thousands of small appends write less
  o.wal_checkpoint_bytes = 1000 * 4096;  // checkpoints at 1000 pages, as these figures assume
  Store s(colikv_test::store_at(dir, "m.db"), o);
  const auto system = seq(10, 5);
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    // Conversation i: the system prompt, then i's own tokens.
    put(s, "c" + std::to_string(i), m, cat(system, {900 + i % 97, i / 97, 3, i % 7, 1}));
  }
  // How fast a lookup is at this size is the benchmark's (colikv_bench --only
  // many), not a timed assertion here: on a loaded CI machine it only flakes.
  for (int i = 0; i < n; i += 37) {
    auto prompt = cat(system, {900 + i % 97, i / 97, 3, i % 7, 1, 55, 66});
    PrefixMatch r = match(s, m, prompt);
    CHECK(r.id == "c" + std::to_string(i));
    CHECK(r.tokens == 10);
  }
  // A new chat with the same system prompt: every conversation ties; the
  // most recently written one wins.
  PrefixMatch r = match(s, m, cat(system, {5, 5, 5}));
  CHECK(r.tokens == 5);
  CHECK(r.id == "c" + std::to_string(n - 1));
  r = match(s, m, cat(system, {900 + 3, 0, 3, 3, 99}));  // "c3" shares 9 tokens
  CHECK(r.id == "c3");
  CHECK(r.tokens == 9);
}

TEST_CASE("match: stores written before schema 3 are indexed by the migration", "[match]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string path = dir.file("m.db");
  {
    Store s(path, four_token_chunks(m));
    put(s, "a", m, seq(100, 10));
    put(s, "b", m, cat(seq(100, 6), seq(300, 4)));
  }
  {
    // Back to schema 2 as that library would have left it: chunks stored
    // under their chain hash, no chunk_meta.
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("UPDATE chunks SET hash = (SELECT chain_hash FROM chunk_meta k WHERE k.chunk_id = chunks.chunk_id); "
            "DROP TABLE chunk_meta; DROP INDEX chunks_evicted; PRAGMA user_version=2");
  }
  colikv_test::undo_tenants(path, 2);  // schema 2's conversations and views
  Store s(path, four_token_chunks(m));
  CHECK(s.schema_version() >= 3);
  PrefixMatch r = match(s, m, cat(seq(100, 6), seq(300, 3)));
  CHECK(r.id == "b");
  CHECK(r.tokens == 9);
  r = match(s, m, seq(100, 9));
  CHECK(r.id == "a");
  CHECK(r.tokens == 9);
  CHECK(s.verify().ok());
}

TEST_CASE("match: the C API", "[backends][match]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  {
    Store s(colikv_test::store_at(dir, "m.db"), four_token_chunks(m));
    put(s, "conversation-1", m, seq(100, 10));
  }
  colikv_store* st = nullptr;
  REQUIRE(colikv_open(colikv_test::store_at(dir, "m.db").c_str(), 0, &st) == COLIKV_OK);
  colikv_model cm{m.n_layers, m.kv_lora, m.qk_rope, m.index_hd, m.n_indexed, m.vocab, nullptr};
  auto prompt = seq(100, 7);
  prompt.push_back(1);
  char id[64];
  CHECK(colikv_match(st, &cm, prompt.data(), 8, id, sizeof id) == 7);
  CHECK(std::string(id) == "conversation-1");
  char small[5] = "xxxx";
  CHECK(colikv_match(st, &cm, prompt.data(), 8, small, sizeof small) == COLIKV_ERR_TOO_LARGE);
  CHECK(std::string(colikv_errmsg(st)).find("conv_cap") != std::string::npos);
  CHECK(std::string(small).empty());
  int32_t none[] = {1, 2};
  CHECK(colikv_match(st, &cm, none, 2, id, sizeof id) == 0);
  CHECK(std::string(id).empty());
  cm.weights_id = "another";
  CHECK(colikv_match(st, &cm, prompt.data(), 8, id, sizeof id) == 0);
  CHECK(colikv_match(st, nullptr, prompt.data(), 8, id, sizeof id) == COLIKV_ERR_INVALID);
  CHECK(colikv_match(st, &cm, nullptr, 8, id, sizeof id) == COLIKV_ERR_INVALID);
  colikv_close(st);
}

TEST_CASE("match: conversations of a lossy precision are found too", "[backends][match]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  Options bf16 = four_token_chunks(m);
  bf16.new_conversation_precision = colikv::Precision::kBf16;
  Store lossy(colikv_test::store_at(dir, "m.db"), bf16);
  Store exact(colikv_test::store_at(dir, "m.db"), four_token_chunks(m));
  put(lossy, "half", m, seq(100, 10));
  pause_ms();
  put(exact, "full", m, seq(100, 7));
  PrefixMatch r = match(exact, m, seq(100, 12));
  CHECK(r.id == "half");  // chunks of each precision chain from their own seed
  CHECK(r.tokens == 10);
  r = match(exact, m, seq(100, 7));  // a tie across precisions: the most recently used
  CHECK(r.id == "full");
  CHECK(r.tokens == 7);
}

TEST_CASE_METHOD(MatchStore, "match_loadable: the longest prefix whose KV data is still stored", "[backends][match]") {
  const ModelSignature& m = model;
  Store& s = store();
  put(s, "long", m, seq(1, 10));   // chunks [1..4] [5..8] [9,10]
  pause_ms();
  put(s, "short", m, seq(1, 6));   // shares [1..4]; its own [5,6]
  const auto prompt = seq(1, 12);
  PrefixMatch r = s.match_loadable(m, prompt.data(), static_cast<int64_t>(prompt.size()));
  CHECK(r.id == "long");  // nothing evicted yet: the longest match
  CHECK(r.tokens == 10);
  s.gc(s.stats().total.stored_bytes - 1);  // evicts "long", the least recently used: its last two chunks

  PrefixMatch any = match(s, m, prompt);
  CHECK(any.id == "long");
  CHECK(any.tokens == 10);
  CHECK(any.loadable == 4);
  r = s.match_loadable(m, prompt.data(), static_cast<int64_t>(prompt.size()));
  CHECK(r.id == "short");
  CHECK(r.tokens == 6);
  CHECK(r.loadable == 6);
  EngineBuffers b(m, 12);
  CHECK(s.load_range(r.id, m, 0, r.tokens, b.tokens.data(), b.target()) == 6);

  // Without "short", the part of "long" that was not evicted.
  s.remove("short");
  r = s.match_loadable(m, prompt.data(), static_cast<int64_t>(prompt.size()));
  CHECK(r.id == "long");
  CHECK(r.tokens == 4);
  CHECK(s.load_range(r.id, m, 0, r.tokens, b.tokens.data(), b.target()) == 4);
  s.gc(0);
  CHECK(s.match_loadable(m, prompt.data(), static_cast<int64_t>(prompt.size())).tokens == 0);
}

TEST_CASE("match_loadable: the C API adopts from a shorter prefix when the longest match was evicted",
          "[backends][match]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  {
    Store s(colikv_test::store_at(dir, "m.db"), four_token_chunks(m));
    put(s, "long", m, seq(1, 10));
    pause_ms();
    put(s, "short", m, seq(1, 6));
    s.gc(s.stats().total.stored_bytes - 1);
  }
  colikv_store* st = nullptr;
  REQUIRE(colikv_open(colikv_test::store_at(dir, "m.db").c_str(), 0, &st) == COLIKV_OK);
  colikv_model cm{m.n_layers, m.kv_lora, m.qk_rope, m.index_hd, m.n_indexed, m.vocab, nullptr};
  const auto prompt = seq(1, 12);
  EngineBuffers b(m, 12);
  const colikv::KvTarget t = b.target();
  char id[64];
  // What kv_disk_adopt did: the longest match cannot be loaded.
  REQUIRE(colikv_match(st, &cm, prompt.data(), 12, id, sizeof id) == 10);
  CHECK(colikv_load_range(st, id, &cm, 2, 10, b.tokens.data(), t.Lc, t.Rc, t.Ic) ==
        COLIKV_ERR_EVICTED);
  // What it does now.
  REQUIRE(colikv_match_loadable(st, &cm, prompt.data(), 12, id, sizeof id) == 6);
  CHECK(std::string(id) == "short");
  CHECK(colikv_load_range(st, id, &cm, 2, 6, b.tokens.data(), t.Lc, t.Rc, t.Ic) == 4);
  char small[3] = "xx";
  CHECK(colikv_match_loadable(st, &cm, prompt.data(), 12, small, sizeof small) == COLIKV_ERR_TOO_LARGE);
  CHECK(std::string(colikv_errmsg(st)).find("colikv_match_loadable") != std::string::npos);
  CHECK(colikv_match_loadable(st, nullptr, prompt.data(), 12, id, sizeof id) == COLIKV_ERR_INVALID);
  colikv_close(st);
}
