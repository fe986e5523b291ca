// The tail of a conversation in pieces (src/core/chunk_layout.h, docs/format.md
// "Chunk lists"): a turn inside the tail writes one chunk row and touches no
// stored one; a tail that reaches a full chunk is re-packed into one shared
// by content key; every reader follows chunks.first_pos.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "test_support.h"

using colikv_test::loads_as;

using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;
using colikv_test::history;

namespace {

constexpr int64_t kC = 16;  // tokens per full chunk in these tests

// The store s.colikv of the tiny model in kC-token chunks, on either backend.
struct TailStore : colikv_test::StoreFixture {
  TailStore() : StoreFixture(colikv_test::tiny_model(), kC, "s.colikv") {}
};

// A chunk list entry as stored: enough to tell a rewritten chunk from an untouched one.
struct Entry {
  std::string chunk_id, first_pos, n_tokens, checksum, raw_size;
  bool operator==(const Entry& o) const {
    return chunk_id == o.chunk_id && first_pos == o.first_pos && n_tokens == o.n_tokens && checksum == o.checksum &&
           raw_size == o.raw_size;
  }
};

std::vector<Entry> entries(const std::string& loc, const std::string& id) {
  std::vector<Entry> out;
  for (const auto& r : colikv_test::store_query(
           loc,
           "SELECT cc.chunk_id, ch.first_pos, ch.n_tokens, ch.checksum, ch.raw_size FROM conversation_chunks cc "
           "JOIN conversations c ON c.conversation_id = cc.conversation_id JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
           "WHERE c.name = ? ORDER BY cc.seq",
           {id}))
    out.push_back({r[0], r[1], r[2], r[3], r[4]});
  return out;
}

int64_t chunk_rows(const std::string& loc) { return colikv_test::store_int(loc, "SELECT count(*) FROM chunks"); }

std::vector<int64_t> starts(const std::string& loc, const std::string& id) {
  std::vector<int64_t> out;
  for (const Entry& e : entries(loc, id)) out.push_back(std::stoll(e.first_pos));
  return out;
}

// Appends the turns ending at each of `ends`, as an engine does turn by turn.
void turns(Store& s, const std::string& id, const EngineBuffers& b, const std::vector<int64_t>& ends) {
  for (int64_t end : ends) s.write(id, b.model, b.tokens.data(), s.count(id), end, b.source());
}

}  // namespace

TEST_CASE_METHOD(TailStore, "tail pieces: a turn inside the tail writes one chunk row and rewrites nothing stored",
                 "[backends][tail]") {
  const std::string& loc = path;
  const EngineBuffers h = history(40, 5);
  Store& s = store();
  std::vector<Entry> before;
  for (int64_t end : {5, 8, 12, 15}) {
    const int64_t rows_before = chunk_rows(loc);
    turns(s, "turns", h, {end});
    const std::vector<Entry> now = entries(loc, "turns");
    INFO("turn ending at " << end);
    REQUIRE(now.size() == before.size() + 1);
    CHECK(std::vector<Entry>(now.begin(), now.end() - 1) == before);  // every stored piece untouched
    CHECK(chunk_rows(loc) == rows_before + 1);
    CHECK(read("turns", h, end) == "");
    before = now;
  }
  CHECK(starts(loc, "turns") == std::vector<int64_t>{0, 5, 8, 12});

  // Reaching C tokens re-packs the tail into a full chunk: the same chunk an
  // identical conversation written in one append holds, by content key.
  turns(s, "turns", h, {19});
  CHECK(starts(loc, "turns") == std::vector<int64_t>{0, 16});
  write("whole", h, 19);
  CHECK(entries(loc, "whole") == entries(loc, "turns"));  // the piece [16, 19) is the same content too
  CHECK(read("turns", h, 19) == "");
  CHECK(chunk_rows(loc) == 2);  // the old pieces are freed
  CHECK(s.verify().ok());
}

TEST_CASE_METHOD(TailStore, "tail pieces: a re-pack keeps the stored rows, not the caller's recomputed ones",
                 "[backends][tail]") {
  const std::string& loc = path;
  const ModelSignature& m = model;
  const EngineBuffers h = history(40, 6);
  Store& s = store();
  turns(s, "c", h, {6, 11});
  EngineBuffers recomputed = h;  // the engine recomputed positions 3 and 9 meanwhile
  recomputed.fill(3, 4, 99);
  recomputed.fill(9, 10, 99);
  REQUIRE(recomputed.compare(h, 20) != "");
  s.write("c", m, recomputed.tokens.data(), 11, 20, recomputed.source());
  CHECK(starts(loc, "c") == std::vector<int64_t>{0, 16});
  CHECK(read("c", h, 20) == "");
}

TEST_CASE("tail pieces: turns of many sizes round-trip bit-exact and export as the engine's file",
          "[backends][tail]") {
  TempDir dir;
  const std::string loc = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const int64_t n = 400;
  const EngineBuffers h = history(m, n, 7);
  Store s(loc, colikv_test::chunked_options(m, kC));
  std::mt19937 rng(12);
  const std::vector<int64_t> sizes = {1, 15, kC - 1, kC, kC + 1, 3 * kC + 7};
  for (int run = 0; run < 3; ++run) {
    const std::string id = "c" + std::to_string(run);
    int64_t len = 0;
    while (len < n) {
      const int64_t step = run == 0 ? sizes[static_cast<size_t>(len) % sizes.size()] : sizes[rng() % sizes.size()];
      len = std::min(n, len + step);
      if (run == 2)
        s.append(id, m, h.tokens.data(), len, h.source());  // the caller's rows throughout
      else
        turns(s, id, h, {len});
      INFO(id << " at " << len);
      REQUIRE(loads_as(s, id, h, len) == "");
    }
    const std::string exported = dir.file(id + ".coli_kv"), engine = dir.file(id + "-engine.coli_kv");
    colikv::export_coli_kv(s, id, exported, {});
    colikv_test::write_coli_kv(engine, h, n);
    CHECK(colikv_test::read_file(exported) == colikv_test::read_file(engine));
  }
  CHECK(s.verify().ok());
}

TEST_CASE_METHOD(TailStore, "tail pieces: truncate and fork cut inside a piece, at a piece boundary and inside a full chunk",
                 "[backends][tail]") {
  const std::string& loc = path;
  const EngineBuffers h = history(60, 8);
  Store& s = store();
  turns(s, "src", h, {16, 21, 24, 30});
  REQUIRE(starts(loc, "src") == (std::vector<int64_t>{0, 16, 21, 24}));
  const std::vector<Entry> src = entries(loc, "src");
  for (int64_t cut : {22, 24, 10, 16, 3}) {
    INFO("cut at " << cut);
    const std::string f = "fork" + std::to_string(cut), t = "trunc" + std::to_string(cut);
    s.fork("src", f, cut);
    CHECK(read(f, h, cut) == "");
    s.fork("src", t);
    s.truncate(t, cut);
    CHECK(read(t, h, cut) == "");
    // The chunks before the cut are shared as they are.
    const std::vector<Entry> got = entries(loc, f);
    size_t whole = 0;
    while (whole < src.size() && std::stoll(src[whole].first_pos) + std::stoll(src[whole].n_tokens) <= cut) ++whole;
    REQUIRE(got.size() >= whole);
    CHECK(std::vector<Entry>(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(whole)) ==
          std::vector<Entry>(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(whole)));
    CHECK(entries(loc, t) == got);
    // Both grow on from the cut, in pieces and through a re-pack.
    turns(s, f, h, {cut + 1, 37});
    CHECK(read(f, h, 37) == "");
  }
  CHECK(read("src", h, 30) == "");
  CHECK(s.verify().ok());
}

TEST_CASE("tail pieces: write() rewrites a tail from inside a piece", "[backends][tail]") {
  TempDir dir;
  const std::string loc = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  const EngineBuffers h = history(m, 40, 9);
  EngineBuffers other = history(m, 40, 10);
  for (int64_t p = 0; p < 22; ++p) other.tokens[static_cast<size_t>(p)] = h.tokens[static_cast<size_t>(p)];
  other.fill(0, 22, 9);
  Store s(loc, colikv_test::chunked_options(m, kC));
  turns(s, "c", h, {16, 20, 25, 28});
  s.write("c", m, other.tokens.data(), 22, 27, other.source());
  CHECK(starts(loc, "c") == (std::vector<int64_t>{0, 16, 20, 22}));
  CHECK(loads_as(s, "c", other, 27) == "");
  s.write("c", m, other.tokens.data(), 18, 35, other.source());
  CHECK(starts(loc, "c") == (std::vector<int64_t>{0, 16, 32}));
  CHECK(loads_as(s, "c", other, 35) == "");
}

TEST_CASE_METHOD(TailStore, "tail pieces: match and match_loadable find a prompt ending in any piece",
                 "[backends][tail]") {
  const std::string& loc = path;
  const ModelSignature& m = model;
  const EngineBuffers h = history(40, 11);
  Store& s = store();
  turns(s, "p", h, {16, 18, 20, 23, 27, 30});  // a full chunk, then 5 pieces
  REQUIRE(starts(loc, "p").size() == 6);
  s.append("other", m, history(20, 12).tokens.data(), 20, history(20, 12).source());
  for (int64_t len : {30, 22, 17, 5}) {  // the whole tail, inside the 3rd piece, inside the 1st, in the full chunk
    INFO("prompt of " << len << " stored tokens");
    std::vector<int32_t> prompt(h.tokens.begin(), h.tokens.begin() + len);
    prompt.push_back((h.tokens[static_cast<size_t>(len)] + 1) % m.vocab);  // then it differs
    const colikv::PrefixMatch r = s.match(m, prompt.data(), static_cast<int64_t>(prompt.size()));
    CHECK(r.id == "p");
    CHECK(r.tokens == len);
    CHECK(r.loadable == len);
    const colikv::PrefixMatch l = s.match_loadable(m, prompt.data(), static_cast<int64_t>(prompt.size()));
    CHECK(l.id == "p");
    CHECK(l.tokens == len);
  }
}

namespace {

// h's tokens and values (h = history(.., h_seed)) up to `shared`, then other
// tokens: a history that diverges there.
EngineBuffers diverging(const EngineBuffers& h, uint32_t h_seed, int64_t shared, uint32_t seed) {
  EngineBuffers d = history(h.model, h.capacity, seed);
  for (int64_t p = 0; p < h.capacity; ++p) {
    const size_t i = static_cast<size_t>(p);
    d.tokens[i] = p < shared ? h.tokens[i] : (h.tokens[i] + 1) % h.model.vocab;
  }
  d.fill(0, shared, h_seed);
  return d;
}

// b's first len tokens, then one it does not hold.
std::vector<int32_t> prompt_of(const EngineBuffers& b, int64_t len) {
  std::vector<int32_t> prompt(b.tokens.begin(), b.tokens.begin() + len);
  prompt.push_back((b.tokens[static_cast<size_t>(len)] + 1) % b.model.vocab);
  return prompt;
}

// "" when match and match_loadable both find `id` holding the first len tokens of b.
std::string matches(Store& s, const EngineBuffers& b, int64_t len, const std::string& id) {
  const std::vector<int32_t> prompt = prompt_of(b, len);
  const colikv::PrefixMatch r = s.match(b.model, prompt.data(), static_cast<int64_t>(prompt.size()));
  const colikv::PrefixMatch l = s.match_loadable(b.model, prompt.data(), static_cast<int64_t>(prompt.size()));
  const std::string want = id + " " + std::to_string(len) + "/" + std::to_string(len);
  const std::string got = r.id + " " + std::to_string(r.tokens) + "/" + std::to_string(r.loadable);
  const std::string got_loadable = l.id + " " + std::to_string(l.tokens) + "/" + std::to_string(l.loadable);
  if (got != want) return "match: got " + got + ", expected " + want;
  if (got_loadable != want) return "match_loadable: got " + got_loadable + ", expected " + want;
  return "";
}

// The turn ends of a history from `base` on: the turns given, after the full chunks before base.
std::vector<int64_t> after(int64_t base, std::vector<int64_t> ends) {
  if (base > 0) ends.insert(ends.begin(), base);
  return ends;
}

}  // namespace

// docs/format.md, "Chunk lists": a piece is indexed by the tail up to its end,
// so a prompt is matched through pieces whatever the segmentation.
TEST_CASE("tail pieces: a short piece followed by more wins over a longer diverging piece", "[backends][tail]") {
  TempDir dir;
  const std::string loc = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  uint32_t seed = 20;
  for (const int64_t base : {int64_t{0}, kC}) {
    for (const bool x_last : {true, false}) {
      INFO("tail at " << base << ", x written " << (x_last ? "last" : "first"));
      seed += 2;  // a history of its own in each round
      const EngineBuffers x = history(m, 40, seed);
      const EngineBuffers y = diverging(x, seed, base + 11, seed + 1);  // one piece holding 11 of x's tail, then not
      Store s(loc, colikv_test::chunked_options(m, kC));
      const std::string xi = "x" + std::to_string(base) + (x_last ? "last" : "first");
      const std::string yi = "y" + std::to_string(base) + (x_last ? "last" : "first");
      if (x_last) turns(s, yi, y, after(base, {base + 13}));
      turns(s, xi, x, after(base, {base + 5, base + 14}));  // pieces of 5 and 9 tokens
      if (!x_last) turns(s, yi, y, after(base, {base + 13}));
      CHECK(matches(s, x, base + 14, xi) == "");  // the whole of x
      CHECK(matches(s, x, base + 12, xi) == "");  // inside x's second piece, past y's divergence
      CHECK(matches(s, y, base + 13, yi) == "");  // the whole of y
      CHECK(matches(s, x, base + 3, x_last ? xi : yi) == "");  // inside both: the most recently used
    }
  }
}

TEST_CASE("tail pieces: three segmentations of one history are each matched", "[backends][tail]") {
  TempDir dir;
  const std::string loc = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  const EngineBuffers h = history(m, 40, 23);
  const EngineBuffers b = diverging(h, 23, 26, 24);
  Store s(loc, colikv_test::chunked_options(m, kC));
  turns(s, "a", h, {16, 20, 30});         // h to 30 in two pieces
  turns(s, "b", b, {16, 28});             // h to 26 in one piece, then not
  turns(s, "c", h, {16, 18, 21, 24});     // h to 24 in three pieces
  CHECK(matches(s, h, 30, "a") == "");
  CHECK(matches(s, h, 27, "a") == "");
  CHECK(matches(s, h, 25, "b") == "");  // a and b hold it; b was used last
  CHECK(matches(s, h, 23, "c") == "");  // all three hold it; c was used last
  CHECK(matches(s, h, 17, "c") == "");
  CHECK(matches(s, b, 28, "b") == "");
}

TEST_CASE_METHOD(TailStore, "tail pieces: pieces cut by truncate and fork, and pieces after them, are matched",
                 "[backends][tail]") {
  const std::string& loc = path;
  const EngineBuffers h = history(40, 25);
  Store& s = store();
  turns(s, "src", h, {16, 21, 24, 30});
  s.fork("src", "f", 22);  // cuts the piece [21, 24)
  s.fork("src", "t");
  s.truncate("t", 27);     // cuts the piece [24, 30)
  s.remove("src");
  REQUIRE(starts(loc, "f") == (std::vector<int64_t>{0, 16, 21}));
  REQUIRE(starts(loc, "t") == (std::vector<int64_t>{0, 16, 21, 24}));
  CHECK(matches(s, h, 27, "t") == "");  // t's cut piece
  CHECK(matches(s, h, 25, "t") == "");
  turns(s, "f", h, {25});  // a piece after the cut one; f is now the most recently used
  REQUIRE(starts(loc, "f") == (std::vector<int64_t>{0, 16, 21, 22}));
  CHECK(matches(s, h, 22, "f") == "");  // f's cut piece
  CHECK(matches(s, h, 25, "f") == "");  // the piece after it
  CHECK(matches(s, h, 27, "t") == "");
  s.fork("f", "g", 10);  // a cut inside a full chunk starts the tail; g is the newest
  CHECK(matches(s, h, 10, "g") == "");
  CHECK(s.verify().ok());
}

TEST_CASE_METHOD(TailStore, "tail pieces: a conversation with pieces evicted, then re-saved", "[backends][tail]") {
  const std::string& loc = path;
  const ModelSignature& m = model;
  const EngineBuffers h = history(40, 13);
  Store& s = store();
  turns(s, "c", h, {16, 19, 23, 26});
  s.gc(0);
  EngineBuffers out(m, 30);
  const ErrorCode code = colikv_test::error_code_of([&] { s.load("c", m, out.tokens.data(), 30, out.target()); });
  CHECK(code == ErrorCode::kEvicted);
  CHECK(std::vector<int32_t>(out.tokens.begin(), out.tokens.begin() + 26) ==
        std::vector<int32_t>(h.tokens.begin(), h.tokens.begin() + 26));
  // The engine re-saves from its buffers: the evicted pieces come back as one.
  turns(s, "c", h, {26});
  CHECK(read("c", h, 26) == "");
  CHECK(starts(loc, "c") == (std::vector<int64_t>{0, 16}));
  turns(s, "c", h, {28});
  CHECK(read("c", h, 28) == "");
  CHECK(s.verify().ok());
}

TEST_CASE("tail pieces: a 33rd piece merges the tail into one", "[backends][tail]") {
  TempDir dir;
  const std::string loc = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  const EngineBuffers h = history(m, 80, 14);
  Store s(loc, colikv_test::chunked_options(m, 64));
  for (int64_t len = 1; len <= 40; ++len) {
    turns(s, "c", h, {len});
    INFO("after " << len << " one-token turns");
    const size_t pieces = starts(loc, "c").size();
    CHECK(pieces == static_cast<size_t>(len <= 32 ? len : len - 32));
    CHECK(chunk_rows(loc) == static_cast<int64_t>(pieces));
  }
  CHECK(loads_as(s, "c", h, 40) == "");
  CHECK(s.verify().ok());
}

TEST_CASE("tail pieces: a schema-5 store opens, upgrades, loads and appends in pieces", "[tail][migrations]") {
  TempDir dir;
  const std::string path = dir.file("v5.colikv");
  const ModelSignature m = colikv_test::tiny_model();
  const EngineBuffers h = history(m, 40, 15);
  {  // What schema 5 wrote: the partial last chunk re-encoded whole each turn.
    Store s(path, colikv_test::chunked_options(m, kC));
    turns(s, "old", h, {21});
  }
  colikv_test::undo_tenants(path, 5);
  { SQLite::Database db(path, SQLite::OPEN_READWRITE); db.exec("PRAGMA user_version = 5"); }
  Store s(path, colikv_test::chunked_options(m, kC));
  CHECK(s.schema_version() == Store::library_schema_version());
  CHECK(loads_as(s, "old", h, 21) == "");
  const std::vector<Entry> v5 = entries(path, "old");
  turns(s, "old", h, {25});
  const std::vector<Entry> now = entries(path, "old");
  REQUIRE(now.size() == 3);
  CHECK(std::vector<Entry>(now.begin(), now.begin() + 2) == v5);
  CHECK(loads_as(s, "old", h, 25) == "");
}

namespace {

// p: 30 tokens in chunks of 16: a full chunk, then pieces [16, 21), [21, 24), [24, 30).
// many: 32 one-token pieces of a model with chunks of 64; extra: the same
// tokens as [0, 32) and [32, 33), whose second chunk a tampered list borrows.
struct HostileStore {
  ModelSignature m = colikv_test::tiny_model(), wide = colikv_test::tiny_indexed_model();
  EngineBuffers h = history(m, 40, 16), w = history(wide, 40, 17);
  explicit HostileStore(const std::string& path) {
    {
      Store s(path, colikv_test::chunked_options(m, kC));
      turns(s, "p", h, {16, 21, 24, 30});
    }
    Store s(path, colikv_test::chunked_options(wide, 64));
    for (int64_t len = 1; len <= 32; ++len) turns(s, "many", w, {len});
    turns(s, "extra", w, {32, 33});
  }
};

std::string chunk_of(const std::string& path, const std::string& id, int seq) {
  return entries(path, id)[static_cast<size_t>(seq)].chunk_id;
}

std::string snapshot(const std::string& path) {
  std::string out;
  for (const auto& r : colikv_test::store_query(path, "SELECT name, token_count, generation FROM conversations ORDER BY name"))
    out += r[0] + ":" + r[1] + ":" + r[2] + " ";
  for (const char* id : {"p", "many", "extra"})
    for (const Entry& e : entries(path, id)) out += e.chunk_id + "@" + e.first_pos + "+" + e.n_tokens + " ";
  return out;
}

void tamper(const std::string& path, const std::string& sql) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  db.exec("PRAGMA ignore_check_constraints = ON");
  db.exec(sql);
}

// Every reader and writer of conversation id refuses it as corrupt, naming
// the chunk and `words`, and changes nothing.
void expect_refused(const std::string& path, const HostileStore& hs, const std::string& id, const EngineBuffers& b,
                    const std::vector<std::string>& words) {
  const std::string before = snapshot(path);
  Store s(path, colikv_test::chunked_options(b.model, kC));
  EngineBuffers out(b.model, 40);
  const std::vector<std::function<void()>> calls = {
      [&] { s.load(id, b.model, out.tokens.data(), 40, out.target()); },
      [&] { s.truncate(id, 1); },
      [&] { s.fork(id, "f", 20); },
      [&] { s.write(id, b.model, b.tokens.data(), s.count(id), s.count(id) + 1, b.source()); },
      [&] { s.append(id, b.model, b.tokens.data(), s.count(id) + 1, b.source()); },
  };
  for (size_t k = 0; k < calls.size(); ++k) {
    INFO("call " << k);
    try {
      calls[k]();
      FAIL("no error");
    } catch (const colikv::Error& e) {
      INFO(e.what());
      CHECK(e.code() == ErrorCode::kCorrupt);
      CHECK(std::string(e.what()).find("'" + id + "': chunk ") != std::string::npos);
      for (const auto& w : words) CHECK(std::string(e.what()).find(w) != std::string::npos);
    }
  }
  CHECK(!s.verify(id).ok());
  CHECK(snapshot(path) == before);
  (void)hs;
}

}  // namespace

TEST_CASE("tail pieces: a hostile chunk list is corrupt, named, and changes nothing", "[hostile][tail]") {
  TempDir dir;
  const std::string path = dir.file("h.colikv");
  HostileStore hs(path);
  SECTION("overlapping pieces") {
    tamper(path, "UPDATE chunks SET first_pos = 20 WHERE chunk_id = " + chunk_of(path, "p", 2));
    expect_refused(path, hs, "p", hs.h, {"overlaps positions [20, 21)"});
  }
  SECTION("a gap between pieces") {
    tamper(path, "UPDATE chunks SET first_pos = 22 WHERE chunk_id = " + chunk_of(path, "p", 2));
    expect_refused(path, hs, "p", hs.h, {"leaves positions [21, 22) uncovered"});
  }
  SECTION("a piece crossing the chunk boundary") {
    tamper(path, "UPDATE chunks SET n_tokens = 10 WHERE chunk_id = " + chunk_of(path, "p", 3));
    tamper(path, "UPDATE conversations SET token_count = 34 WHERE name = 'p'");
    // [24, 34) crosses 32, so the tail starts at 32: the first piece before it is named.
    expect_refused(path, hs, "p", hs.h, {"positions [16, 21)", "holds 5 tokens before position 32"});
  }
  SECTION("a piece of no tokens") {
    tamper(path, "UPDATE chunks SET n_tokens = 0 WHERE chunk_id = " + chunk_of(path, "p", 2));
    expect_refused(path, hs, "p", hs.h, {"holds 0 tokens"});
  }
  SECTION("more pieces than a tail may hold") {
    tamper(path, "INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) SELECT conversation_id, 32, " +
                     chunk_of(path, "extra", 1) + " FROM conversations WHERE name = 'many'");
    tamper(path, "UPDATE conversations SET token_count = 33 WHERE name = 'many'");
    expect_refused(path, hs, "many", hs.w, {"positions [32, 33)", "beyond the 32"});
  }
}

namespace {

// verify's problems with conversation p, one line each.
std::string problems_of(const std::string& path) {
  Store s(path);
  std::string out;
  for (const colikv::VerifyProblem& p : s.verify("p").problems)
    out += "seq " + std::to_string(p.chunk_seq) + " [" + std::to_string(p.first_pos) + ", " +
           std::to_string(p.end_pos) + "): " + p.what + "\n";
  return out;
}

}  // namespace

TEST_CASE("tail pieces: verify checks the region chunk_meta indexes each piece by", "[hostile][tail]") {
  TempDir dir;
  const std::string path = dir.file("h.colikv");
  HostileStore hs(path);
  REQUIRE(problems_of(path) == "");
  const std::string piece = chunk_of(path, "p", 3);  // [24, 30), indexed by [16, 30)
  SECTION("a piece indexed by its own tokens") {
    tamper(path, "UPDATE chunk_meta SET tokens = (SELECT tokens FROM chunks WHERE chunk_id = " + piece +
                     ") WHERE chunk_id = " + piece);
    CHECK(problems_of(path) == "seq 3 [24, 30): chunk_meta.tokens is not the token ids of positions [16, 30), "
                               "the chunk's region\n");
  }
  SECTION("a piece indexed after the piece before it") {
    tamper(path, "UPDATE chunk_meta SET prev_hash = (SELECT chain_hash FROM chunk_meta WHERE chunk_id = " +
                     chunk_of(path, "p", 2) + ") WHERE chunk_id = " + piece);
    CHECK(problems_of(path) == "seq 3 [24, 30): chunk_meta.prev_hash is not the chain hash at position 16, "
                               "where the chunk's region starts\n");
  }
}

TEST_CASE("tail pieces: a PostgreSQL store of schema 1 upgrades, loads and appends in pieces", "[postgres][tail]") {
  const std::string loc = colikv_test::fresh_pg_store();
  const ModelSignature m = colikv_test::tiny_model();
  const EngineBuffers h = history(m, 40, 18);
  {  // Schema 1's layout: one piece at most.
    Store s(loc, colikv_test::chunked_options(m, kC));
    turns(s, "old", h, {21});
  }
  colikv_test::store_exec(loc, "UPDATE colikv_schema SET version = 1");
  // Nor schema 7's models per tenant, nor schema 6's queue of chunks to free, nor schema 4's tenant roles
  // (their policies go with tenant_roles and the columns), nor schema 3's
  // tenants (the view that reads tenant_id goes with it; 0003 makes it again).
  for (const char* undo : {"DROP FUNCTION colikv_grant_tenant_writes(text)", "ALTER TABLE models DROP COLUMN tenant_id CASCADE",
                           "ALTER TABLE models ADD CONSTRAINT models_signature_key UNIQUE (signature)",
                           "DROP TABLE chunks_to_free", "DROP TABLE tenant_roles CASCADE", "ALTER TABLE chunks DROP COLUMN tenant_id CASCADE",
                           "ALTER TABLE chunk_meta DROP COLUMN tenant_id CASCADE",
                           "ALTER TABLE chunks ADD CONSTRAINT chunks_model_id_hash_key UNIQUE (model_id, hash)",
                           "ALTER TABLE conversations DROP COLUMN tenant_id CASCADE", "DROP TABLE tenants",
                           "ALTER TABLE conversations ADD CONSTRAINT conversations_name_key UNIQUE (name)"})
    colikv_test::store_exec(loc, undo);
  Store s(loc, colikv_test::chunked_options(m, kC));
  CHECK(s.schema_version() == Store::library_schema_version(loc));
  CHECK(loads_as(s, "old", h, 21) == "");
  const std::vector<Entry> v1 = entries(loc, "old");
  turns(s, "old", h, {25});
  const std::vector<Entry> now = entries(loc, "old");
  REQUIRE(now.size() == 3);
  CHECK(std::vector<Entry>(now.begin(), now.begin() + 2) == v1);
  CHECK(loads_as(s, "old", h, 25) == "");
}

// PostgreSQL reads payloads a batch of up to 1 MiB at a time: full chunks of
// ~400 KB and a tail of small pieces cross several batch boundaries.
TEST_CASE("tail pieces: a load whose payloads span several read batches is bit-exact", "[backends][tail]") {
  TempDir dir;
  const std::string loc = colikv_test::store_at(dir, "s.colikv");
  const ModelSignature m = colikv_test::wide_model();
  const int64_t chunk = 64, n = 8 * chunk + 30;
  const EngineBuffers h = history(m, n, 9);
  Store s(loc, colikv_test::chunked_options(m, chunk));
  s.append("c", m, h.tokens.data(), 8 * chunk, h.source());
  turns(s, "c", h, {8 * chunk + 3, 8 * chunk + 9, 8 * chunk + 17, n});
  REQUIRE(starts(loc, "c").size() == 12);  // 8 full chunks, 4 pieces
  CHECK(loads_as(s, "c", h, n) == "");
  EngineBuffers part(m, 5 * chunk + 1);
  CHECK(s.load("c", m, part.tokens.data(), part.capacity, part.target(), 5 * chunk + 1) == 5 * chunk + 1);
  CHECK(h.compare(part, 5 * chunk + 1) == "");
}
