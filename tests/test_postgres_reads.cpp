// The PostgreSQL read path (issue 20): a load is one streamed statement
// whatever the number of its chunks, a load that loses its connection midway
// fails clearly and the next call reconnects, a load abandoned midway leaves
// the connection usable. Round trips are counted on the store's own
// connection (PgConnection::round_trips). Run only as postgres:... tests
// (tag [postgres]).
#include <catch2/catch.hpp>

#include <string>

#include "backend.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "postgres/pg_catalog.h"
#include "postgres/pg_connection.h"
#include "store_impl.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::loads_as;

namespace {

colikv::detail::PgConnection& connection_of(Store& s) {
  return static_cast<colikv::detail::PgCatalog&>(*colikv::detail::StoreAccess::impl(s).catalog).connection();
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
  MatchStore few(2), many(60);
  // 2 and 45 whole chunks, and a tail of 2 and 3 tokens: the walk's length.
  const Trips short_few = match_trips(few, 2 * 4 + 2), long_few = match_trips(few, 45 * 4 + 3);
  const Trips short_many = match_trips(many, 2 * 4 + 2), long_many = match_trips(many, 45 * 4 + 3);
  CHECK(long_few.match == short_few.match);
  CHECK(short_many.match == short_few.match);
  CHECK(long_many.match == short_few.match);
  CHECK(long_few.loadable == short_few.loadable);
  CHECK(short_many.loadable == short_few.loadable);
  CHECK(long_many.loadable == short_few.loadable);
}
