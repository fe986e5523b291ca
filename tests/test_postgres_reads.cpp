// The PostgreSQL read path (issue 20): a load is one streamed statement
// whatever the number of its chunks, a load that loses its connection midway
// fails clearly and the next call reconnects, a load abandoned midway leaves
// the connection usable. Round trips are counted on the store's own
// connection (PgConnection::round_trips). Run only as postgres:... tests
// (tag [postgres]).
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "postgres/pg_catalog.h"
#include "postgres/pg_connection.h"
#include "store/store_impl.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::loads_as;

namespace {

colikv::detail::PgConnection& connection_of(Store& s) {
  return static_cast<colikv::detail::PgCatalog&>(colikv::detail::StoreAccess::catalog(s)).connection();
}

// The round trips one call of f makes on the store's connection.
template <class F>
int64_t round_trips_of(Store& s, F&& f) {
  const int64_t before = connection_of(s).round_trips();
  f();
  return connection_of(s).round_trips() - before;
}

// Chunks of the real shape's widths (wide_model) whose payloads are each
// larger than what the old cursor fetched in one batch (1 MiB): 256 positions.
struct WideStore : colikv_test::StoreFixture {
  WideStore() : StoreFixture(colikv_test::wide_model(), 256) {}
};

}  // namespace

TEST_CASE_METHOD(WideStore, "postgres: a load's round trips do not grow with its chunks", "[postgres]") {
  const EngineBuffers h = history(16 * 256 + 100, 7);  // 16 full chunks and a tail
  write("short", h, 2 * 256);
  write("long", h, 16 * 256 + 100);
  Store& s = store();
  REQUIRE(read("short", h, 2 * 256) == "");  // statements prepared, recency rows warm
  REQUIRE(read("long", h, 16 * 256 + 100) == "");
  std::string short_diff, long_diff;
  const int64_t short_trips = round_trips_of(s, [&] { short_diff = read("short", h, 2 * 256); });
  const int64_t long_trips = round_trips_of(s, [&] { long_diff = read("long", h, 16 * 256 + 100); });
  CHECK(short_diff == "");
  CHECK(long_diff == "");
  CHECK(long_trips == short_trips);
  CHECK(long_trips <= 10);  // begin, the conversation, its model, evicted?, the chunks, commit, recency
}

TEST_CASE_METHOD(WideStore, "postgres: a load that loses its connection midway fails clearly, the next reconnects",
                 "[postgres]") {
  const int64_t n = 16 * 256;  // 28 MB: more than the sockets buffer, so most is unsent when the server goes
  const EngineBuffers h = history(n, 8);
  write("c", h, n);
  Store& s = store();
  const int64_t pid = connection_of(s).query("SELECT pg_backend_pid()::bigint", "test").int64(0, 0);
  colikv::detail::PgConnection admin(colikv_test::test_pg_uri(), colikv::detail::PgConnection::Settings());
  int rows = 0;
  colikv::detail::PgRowStream::after_row_for_tests = [&] {
    if (++rows != 1) return;
    colikv::detail::PgParams p;
    p.add(pid);
    // Waits (up to 5 s) until the backend serving the load has exited.
    REQUIRE(admin.query("SELECT pg_terminate_backend($1::int, 5000)", p, "test").int64(0, 0) == 1);
  };
  EngineBuffers out(h.model, n);
  std::string message;
  const ErrorCode code = colikv_test::error_code_of([&] {
    try {
      s.load("c", h.model, out.tokens.data(), n, out.target());
    } catch (const colikv::Error& e) {
      message = e.what();
      throw;
    }
  });
  colikv::detail::PgRowStream::after_row_for_tests = nullptr;
  CHECK(rows >= 1);
  CHECK(code == ErrorCode::kIO);
  INFO(message);
  CHECK(message.find("conversation 'c'") != std::string::npos);
  CHECK(message.find("reading a chunk list") != std::string::npos);
  CHECK(message.find("the connection to the server was lost") != std::string::npos);
  // The same Store reconnects on its next call and loads it whole.
  CHECK(read("c", h, n) == "");
  CHECK(s.verify().ok());
}

TEST_CASE("postgres: a load that stops at a bad chunk midway leaves the connection usable", "[postgres]") {
  colikv_test::StoreFixture f(colikv_test::tiny_model(), 4);
  const EngineBuffers h = f.history(64, 9);
  f.write("bad", h, 64);
  f.write("good", h, 40);  // shares its first 10 chunks with "bad"
  const EngineBuffers other = f.history(64, 10);
  f.write("other", other, 64);
  // Chunk 12 of "bad" (positions 48-51), used by no other conversation, holds other token ids now.
  colikv_test::store_exec(f.path,
                          "UPDATE chunks SET tokens = '[1,2,3,4]' WHERE chunk_id = (SELECT cc.chunk_id FROM "
                          "conversation_chunks cc JOIN conversations c ON c.conversation_id = cc.conversation_id "
                          "WHERE c.name = 'bad' AND cc.seq = 12)");
  Store& s = f.store();
  EngineBuffers out(h.model, 64);
  CHECK(colikv_test::error_code_of([&] { s.load("bad", h.model, out.tokens.data(), 64, out.target()); }) ==
        ErrorCode::kCorrupt);
  // The rows after the bad one were read and dropped: the connection runs the next statements.
  CHECK(f.read("other", other, 64) == "");
  CHECK(f.read("good", h, 40) == "");
  CHECK(s.count("bad") == 64);
}

namespace {

// A store of tiny_model() in 4-token chunks: "target", written first (so
// the least recently used), and `others` conversations that share none of
// its tokens, written after it.
struct MatchStore : colikv_test::StoreFixture {
  explicit MatchStore(int others) : target(history(200, 21)) {
    write("target", target, 200);
    for (int i = 0; i < others; ++i) write("o" + std::to_string(i), history(40, 100 + static_cast<uint32_t>(i)), 40);
  }
  EngineBuffers target;
};

struct Trips {
  int64_t match = 0, loadable = 0;
};

// The round trips of match and match_loadable for the first `len` tokens of
// target and one token no conversation holds after them; both must find
// target holding `len` tokens.
Trips match_trips(MatchStore& f, int64_t len) {
  Store& s = f.store();
  std::vector<int32_t> prompt(f.target.tokens.begin(), f.target.tokens.begin() + len);
  prompt.push_back(999);  // inside the vocabulary, after the held prefix: no chunk continues with it
  colikv::PrefixMatch m, l;
  s.match(f.model, prompt.data(), static_cast<int64_t>(prompt.size()));  // statements prepared
  Trips t;
  t.match = round_trips_of(s, [&] { m = s.match(f.model, prompt.data(), static_cast<int64_t>(prompt.size())); });
  t.loadable =
      round_trips_of(s, [&] { l = s.match_loadable(f.model, prompt.data(), static_cast<int64_t>(prompt.size())); });
  INFO("prompt of " << prompt.size() << " tokens; match: " << t.match << " round trips, match_loadable: " << t.loadable);
  CHECK(m.id == "target");
  CHECK(m.tokens == len);
  CHECK(l.id == "target");
  CHECK(l.loadable == len);
  return t;
}

}  // namespace

TEST_CASE("postgres: match's round trips grow with neither the prompt nor the conversations", "[postgres]") {
  MatchStore few(2), many(600);
  // 2 and 45 whole chunks, and a tail of 2 and 3 tokens: the walk's length.
  const Trips short_few = match_trips(few, 2 * 4 + 2), long_few = match_trips(few, 45 * 4 + 3);
  const Trips short_many = match_trips(many, 2 * 4 + 2), long_many = match_trips(many, 45 * 4 + 3);
  // A prompt of whole chunks only: the tail step holds none of its tokens.
  const Trips whole_many = match_trips(many, 45 * 4);
  CHECK(long_few.match == short_few.match);
  CHECK(short_many.match == short_few.match);
  CHECK(long_many.match == short_few.match);
  CHECK(long_few.loadable == short_few.loadable);
  CHECK(short_many.loadable == short_few.loadable);
  CHECK(long_many.loadable == short_few.loadable);
  // One statement for the model and its precisions, one for the walks and
  // the holder: the snapshot is each statement's own.
  CHECK(short_few.match <= 2);
  CHECK(short_few.loadable <= 2);
  CHECK(whole_many.match <= 2);
  CHECK(whole_many.loadable <= 2);
}

namespace {

// The same random store on two backends: conversations that fork from a
// few histories at random points, appended in two turns (so tails held in
// pieces), some truncated, some forked; last_used_ms set from the
// conversation's id on both (wall-clock ties would differ); then a gc that
// evicts the least recently used. Two tenants, each its own Store.
struct TwinStores {
  explicit TwinStores(uint32_t seed) : rng(seed) {
    locations = {colikv_test::store_at(dir, "twin"), dir.file("twin.db")};
    const colikv::ModelSignature m = colikv_test::tiny_model();
    for (const std::string& location : locations)
      for (const std::string tenant : {"a", "b"})
        stores.push_back(std::make_unique<Store>(location, colikv_test::tenant_options(m, tenant)));
    for (uint32_t b = 0; b < 3; ++b) bases.push_back(colikv_test::history(m, 120, 1 + b));
    for (int i = 0; i < 24; ++i) add("c" + std::to_string(i));
    for (const std::string& location : locations)
      colikv_test::store_exec(location, "UPDATE conversations SET last_used_ms = 1000 + conversation_id");
    for (size_t t = 0; t < 2; ++t) {
      const int64_t budget = stores[2 + t]->stats().total.stored_bytes / 2;  // SQLite's figure, for both
      for (size_t b = 0; b < 2; ++b) stores[b * 2 + t]->gc(budget);
    }
  }

  // A conversation of a random tenant on both stores.
  void add(const std::string& id) {
    const size_t tenant = pick(2);
    EngineBuffers h = bases[pick(bases.size())];
    const int64_t fork_at = static_cast<int64_t>(pick(100));
    for (int64_t i = fork_at; i < 120; ++i) h.tokens[static_cast<size_t>(i)] = static_cast<int32_t>(pick(50));
    const int64_t first = 1 + static_cast<int64_t>(pick(60)), second = first + static_cast<int64_t>(pick(60));
    const int64_t cut = pick(4) == 0 ? static_cast<int64_t>(pick(static_cast<size_t>(second))) : -1;
    const bool fork = pick(4) == 0;
    for (size_t b = 0; b < 2; ++b) {
      Store& s = *stores[b * 2 + tenant];
      s.append(id, h.model, h.tokens.data(), first, h.source());
      s.append(id, h.model, h.tokens.data(), second, h.source());
      if (cut >= 0) s.truncate(id, cut);
      if (fork) s.fork(id, id + "f");
    }
    histories.push_back(h);
  }

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

  colikv_test::TempDir dir;
  std::mt19937 rng;
  std::vector<std::string> locations;                // PostgreSQL, SQLite
  std::vector<std::unique_ptr<Store>> stores;        // [backend * 2 + tenant]
  std::vector<EngineBuffers> bases, histories;
};

std::string answer(const colikv::PrefixMatch& m) {
  return m.id + " " + std::to_string(m.tokens) + " " + std::to_string(m.loadable);
}

}  // namespace

TEST_CASE("postgres: match and match_loadable answer as on SQLite on a random store", "[postgres]") {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    TwinStores twins(seed);
    for (int probe = 0; probe < 60; ++probe) {
      // A prefix of a written history, maybe with a token changed.
      std::vector<int32_t> prompt = twins.histories[twins.pick(twins.histories.size())].tokens;
      prompt.resize(1 + twins.pick(120));
      if (twins.pick(2) == 0) prompt[twins.pick(prompt.size())] = static_cast<int32_t>(twins.pick(50));
      const auto len = static_cast<int64_t>(prompt.size());
      for (size_t tenant = 0; tenant < 2; ++tenant) {
        Store& pg = *twins.stores[tenant];
        Store& lite = *twins.stores[2 + tenant];
        const colikv::ModelSignature& m = twins.bases[0].model;
        INFO("seed " << seed << ", probe " << probe << ", tenant " << tenant << ", " << len << " tokens");
        CHECK(answer(pg.match(m, prompt.data(), len)) == answer(lite.match(m, prompt.data(), len)));
        CHECK(answer(pg.match_loadable(m, prompt.data(), len)) == answer(lite.match_loadable(m, prompt.data(), len)));
      }
    }
  }
}
