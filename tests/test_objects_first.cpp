// Objects first on SQLite (docs/design.md, "Objects first"): an append of
// several chunks stores each in a write transaction of its own, held by its
// writer, then links them in one more. Each race is made, not hoped for: a
// writer is stopped between its chunks, or between its last chunk and its
// link, by the test hook (the sync point "append:chunk", passed after each chunk
// transaction has committed), and another writer, reader or process acts
// meanwhile. The size from which an append stores its chunks first is
// lowered to 0 here (tiny chunks), as the default keeps small turns in one
// transaction.
#include <catch2/catch.hpp>

#include <signal.h>
#include <stdlib.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <atomic>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "append_hook.h"
#include "backend.h"
#include "chunk_pause.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "proc_util.h"
#include "store/write/append.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::append;
using colikv_test::loads_as;
using colikv_test::Outcome;
using colikv_test::outcome_of;
using colikv_test::TempDir;

namespace {

const colikv::ModelSignature kModel = colikv_test::tiny_model();

// 4-token chunks (colikv_store_child's), and a short busy timeout: a writer
// that had to wait for a whole turn of another fails instead of passing late.
colikv::Options options(int busy_timeout_ms = 2000) {
  colikv::Options o;
  o.chunk_target_bytes = 4 * kModel.record_bytes();
  o.busy_timeout_ms = busy_timeout_ms;
  return o;
}

// Every append of several chunks stores them first, for the test case's lifetime.
struct ObjectsFirst {
  int64_t saved = colikv::detail::objects_first_min_bytes();
  ObjectsFirst() { colikv::detail::objects_first_min_bytes() = 0; }
  ~ObjectsFirst() { colikv::detail::objects_first_min_bytes() = saved; }
};

int64_t rows(const std::string& path, const std::string& table) {
  return colikv_test::store_int(path, "SELECT count(*) FROM " + table);
}

}  // namespace

TEST_CASE("objects first: a writer commits a turn while another is between the chunks of its turn",
          "[objects][sync]") {
  ObjectsFirst on;
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers a = colikv_test::history(kModel, 64, 1), b = colikv_test::history(kModel, 24, 2);
  Store host_a(path, options()), host_b(path, options());
  append(host_a, "a", a, 8);
  append(host_b, "b", b, 4);
  colikv_test::ChunkPause paused("a", 5);  // a's turn 8 -> 64: chunks 2..15, stopped after chunk 5
  Outcome ra;
  std::thread ta([&] { ra = outcome_of([&] { append(host_a, "a", a, 64); }); });
  paused.wait_reached();
  // B's turns each take the lock between two of A's chunks.
  Outcome rb;
  for (int64_t n = 8; n <= 24 && rb.code == ErrorCode::kOk; n += 4)
    rb = outcome_of([&] { append(host_b, "b", b, n); });
  INFO(rb.message);
  CHECK(rb.code == ErrorCode::kOk);
  CHECK(host_b.count("a") == 8);  // A's turn is not there yet
  paused.release();
  ta.join();
  INFO(ra.message);
  CHECK(ra.code == ErrorCode::kOk);
  CHECK(loads_as(host_b, "a", a, 64) == "");
  CHECK(loads_as(host_a, "b", b, 24) == "");
  CHECK(host_a.verify().ok());
  CHECK(colikv_test::orphan_chunks(path, false) == 0);
}

// Not stopped this time: A streams its chunk transactions back to back, and
// B, arriving in the middle, must find an opening between two of them. With
// SQLite's own busy handler B slept up to 100 ms between tries and took the
// lock only when it happened to try in the microseconds between two of A's
// transactions: it mostly waited for A's whole turn.
TEST_CASE("objects first: a writer arriving while another streams its chunks commits between two of them",
          "[objects][sync]") {
  const colikv::ModelSignature wide = colikv_test::wide_model();
  for (colikv::Synchronous sync : {colikv::Synchronous::kNormal, colikv::Synchronous::kFull}) {
    ObjectsFirst on;
    TempDir dir;
    const std::string path = dir.file("s.db");
    colikv::Options o;
    o.chunk_target_bytes = 24 * wide.record_bytes();
    o.busy_timeout_ms = 60000;  // a B that waits for A's whole turn is seen below, not as kBusy
    o.synchronous = sync;
    const int64_t a_len = 24 * 160, b_len = 8;
    const EngineBuffers a = colikv_test::history(wide, a_len, 1), b = colikv_test::history(wide, b_len, 2);
    Store host_a(path, o), host_b(path, o);
    append(host_a, "a", a, 24);
    std::mutex mu;
    std::condition_variable cv;
    bool b_may_start = false;
    const colikv_test::AppendHook hook([&](const std::string& id, int64_t seq) {
      if (id != "a" || seq != 3) return;  // A goes on streaming: only B is told
      std::lock_guard<std::mutex> lock(mu);
      b_may_start = true;
      cv.notify_all();
    });
    std::atomic<bool> a_done{false};
    Outcome ra;
    std::thread ta([&] {
      ra = outcome_of([&] { append(host_a, "a", a, a_len); });
      a_done = true;
    });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return b_may_start; });
    }
    const Outcome rb = outcome_of([&] { append(host_b, "b", b, b_len); });
    const bool b_first = !a_done;
    ta.join();
    INFO("synchronous " << (sync == colikv::Synchronous::kFull ? "FULL" : "NORMAL") << ": " << rb.message << " "
                        << ra.message);
    CHECK(rb.code == ErrorCode::kOk);
    CHECK(ra.code == ErrorCode::kOk);
    CHECK(b_first);  // B committed while A's turn was still storing its chunks
    CHECK(loads_as(host_b, "a", a, a_len) == "");
    CHECK(loads_as(host_a, "b", b, b_len) == "");
    CHECK(colikv_test::orphan_chunks(path, false) == 0);
  }
}

TEST_CASE("objects first: chunks held between a turn's chunks and its link are invisible to every read",
          "[objects][sync]") {
  ObjectsFirst on;
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers a = colikv_test::history(kModel, 32, 1), c = colikv_test::history(kModel, 16, 3);
  Store writer(path, options());
  append(writer, "a", a, 4);
  append(writer, "c", c, 16);
  Store reader(path, options());
  const colikv::StoreStats stats_before = reader.stats();
  const std::vector<colikv::ConversationInfo> list_before = reader.list();
  const colikv::ConversationInfo info_before = reader.info("a");
  colikv_test::ChunkPause paused("a", 7);  // after its last chunk: every chunk of the turn held, none linked
  Outcome ra;
  std::thread ta([&] { ra = outcome_of([&] { append(writer, "a", a, 32); }); });
  paused.wait_reached();
  CHECK(rows(path, "held_chunks") == 7);  // chunks 1..7 (chunk 0 stays)

  CHECK(reader.count("a") == 4);
  CHECK(reader.exists("a"));
  CHECK(!reader.exists("b"));
  CHECK(reader.conversation_count() == 2);
  CHECK(loads_as(reader, "a", a, 4) == "");
  EngineBuffers out(kModel, 32);
  CHECK(reader.load("a", kModel, out.tokens.data(), 32, out.target()) == 4);
  const colikv::PrefixMatch m = reader.match(kModel, a.tokens.data(), 32);
  CHECK(m.id == "a");
  CHECK(m.tokens == 4);
  const colikv::PrefixMatch ml = reader.match_loadable(kModel, a.tokens.data(), 32);
  CHECK(ml.tokens == 4);
  CHECK(ml.loadable == 4);
  const std::vector<colikv::ConversationInfo> list_now = reader.list();
  REQUIRE(list_now.size() == list_before.size());
  const colikv::ConversationInfo info_now = reader.info("a");
  CHECK(info_now.tokens == info_before.tokens);
  CHECK(info_now.stored_bytes == info_before.stored_bytes);
  const colikv::StoreStats stats_now = reader.stats();
  CHECK(stats_now.total.chunks == stats_before.total.chunks);
  CHECK(stats_now.total.stored_bytes == stats_before.total.stored_bytes);
  CHECK(stats_now.total.tokens == stats_before.total.tokens);
  const colikv::VerifyReport r = reader.verify();
  INFO((r.problems.empty() ? "" : r.problems.front().what));
  CHECK(r.ok());  // no "unused chunk"
  CHECK(r.chunks == 5);  // a's 1, c's 4
  // The byte budget counts linked chunks only: a budget the linked bytes
  // fit, the held ones not, evicts nothing of c on another writer's append.
  {
    colikv::Options budget = options();
    budget.max_store_bytes = stats_before.total.stored_bytes + 4096;
    Store third(path, budget);
    const EngineBuffers d = colikv_test::history(kModel, 2, 4);
    append(third, "d", d, 2);
    CHECK(!third.info("c").evicted);
    CHECK(loads_as(third, "c", c, 16) == "");
  }
  paused.release();
  ta.join();
  INFO(ra.message);
  CHECK(ra.code == ErrorCode::kOk);
  CHECK(loads_as(reader, "a", a, 32) == "");
  CHECK(rows(path, "held_chunks") == 0);
  CHECK(reader.verify().ok());
  CHECK(colikv_test::orphan_chunks(path, false) == 0);
}

TEST_CASE("objects first: racing writers of one conversation: one wins, the other kConflict, nothing lost",
          "[objects][sync]") {
  ObjectsFirst on;
  const bool existing = GENERATE(true, false);
  INFO((existing ? "an existing conversation" : "a new conversation"));
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers one = colikv_test::history(kModel, 32, 1), two = colikv_test::history(kModel, 32, 2);
  Store host1(path, options()), host2(path, options());
  append(host1, "seed", two, 4);
  if (existing) append(host1, "r", one, 8);
  colikv_test::ChunkPause paused("r", 5);
  Outcome r1, r2;
  std::thread t1([&] { r1 = outcome_of([&] { append(host1, "r", one, 32); }); });
  paused.wait_reached();
  const EngineBuffers& second = existing ? one : two;
  r2 = outcome_of([&] { append(host2, "r", second, 20); });
  paused.release();
  t1.join();
  INFO(r1.message << " / " << r2.message);
  CHECK(r2.code == ErrorCode::kOk);  // it took the lock between two of the first's chunks
  CHECK(r1.code == ErrorCode::kConflict);
  CHECK(loads_as(host1, "r", second, 20) == "");
  CHECK(rows(path, "held_chunks") == 0);  // the loser dropped what it held
  CHECK(colikv_test::orphan_chunks(path, false) == 0);
  CHECK(host1.verify().ok());
  // The loser's retry from what is stored succeeds.
  if (existing) {
    append(host1, "r", one, 32);
    CHECK(loads_as(host2, "r", one, 32) == "");
  }
}

TEST_CASE("objects first: two writers storing the same content at once make one row, both linked, both exact",
          "[objects][sync]") {
  ObjectsFirst on;
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers h = colikv_test::history(kModel, 32, 7);
  Store host_a(path, options()), host_b(path, options());
  append(host_a, "seed", colikv_test::history(kModel, 4, 9), 4);
  const int64_t before = rows(path, "chunks");
  colikv_test::ChunkPause paused("a", 3);  // a's chunks 0..3 stored and held, 4..7 not yet
  Outcome ra;
  std::thread ta([&] { ra = outcome_of([&] { append(host_a, "a", h, 32); }); });
  paused.wait_reached();
  // b finds a's held chunks 0..3 (checked by content), stores 4..7, links all.
  append(host_b, "b", h, 32);
  CHECK(rows(path, "chunks") == before + 8);
  paused.release();
  ta.join();
  INFO(ra.message);
  CHECK(ra.code == ErrorCode::kOk);
  CHECK(rows(path, "chunks") == before + 8);  // a found b's 4..7: one row each
  CHECK(colikv_test::store_int(path, "SELECT count(*) FROM conversation_chunks cc JOIN conversations c "
                                     "ON c.conversation_id = cc.conversation_id WHERE c.name IN ('a', 'b')") == 16);
  CHECK(colikv_test::store_int(path, "SELECT count(DISTINCT chunk_id) FROM conversation_chunks cc JOIN conversations c "
                                     "ON c.conversation_id = cc.conversation_id WHERE c.name IN ('a', 'b')") == 8);
  CHECK(loads_as(host_a, "b", h, 32) == "");
  CHECK(loads_as(host_b, "a", h, 32) == "");
  CHECK(rows(path, "held_chunks") == 0);
  CHECK(host_a.verify().ok());
  CHECK(colikv_test::orphan_chunks(path, false) == 0);
}

TEST_CASE("objects first: a stored chunk a writer found to share is not freed or evicted before its link",
          "[objects][sync]") {
  ObjectsFirst on;
  const std::string how = GENERATE(as<std::string>{}, "remove", "truncate", "gc");
  INFO(how);
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers h = colikv_test::history(kModel, 32, 11);
  Store host_a(path, options()), host_b(path, options());
  append(host_b, "x", h, 16);  // chunks 0..3, the only conversation linking them
  colikv_test::ChunkPause paused("a", 7);  // a found x's 0..3, stored 4..7: all held, none linked
  Outcome ra;
  std::thread ta([&] { ra = outcome_of([&] { append(host_a, "a", h, 32); }); });
  paused.wait_reached();
  CHECK(rows(path, "held_chunks") == 8);
  if (how == "remove") host_b.remove("x");
  if (how == "truncate") host_b.truncate("x", 0);
  if (how == "gc") CHECK(host_b.gc(0).chunks == 0);  // x's chunks are all held: kept
  paused.release();
  ta.join();
  INFO(ra.message);
  CHECK(ra.code == ErrorCode::kOk);
  CHECK(loads_as(host_b, "a", h, 32) == "");
  if (how == "gc") CHECK(loads_as(host_b, "x", h, 16) == "");
  CHECK(rows(path, "held_chunks") == 0);
  CHECK(host_b.verify().ok());
  CHECK(colikv_test::orphan_chunks(path, false) == 0);
}

TEST_CASE("objects first: the chunks of a writer killed between its chunks and its link are reclaimed, "
          "a live writer's kept",
          "[objects][sync]") {
  ObjectsFirst on;
  const std::string how = GENERATE(as<std::string>{}, "open", "gc", "vacuum");
  INFO(how);
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers b = colikv_test::history(kModel, 32, 2);
  {
    Store s(path, options());
    append(s, "b", b, 4);
  }
  // The child appends 64 tokens of history 5 to "a", says "mid-turn" after
  // its chunk 3 (chunks 0..3 held, its lock free) and waits for its stdin.
  ::setenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES", "0", 1);
  colikv_test::ChildProcess child({COLIKV_STORE_CHILD_PATH, "hold", path, "a", "5", "64", "3"}, true);
  ::unsetenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES");
  std::string line;
  REQUIRE(child.read_line(line));
  REQUIRE(line == "mid-turn");
  const int64_t child_held = rows(path, "held_chunks");
  CHECK(child_held == 4);
  // A live writer's turn in flight, stopped between its chunks.
  Store host_b(path, options());
  Store other(path, options());  // opened while the child lives: reclaims nothing yet
  CHECK(rows(path, "held_chunks") == child_held);
  colikv_test::ChunkPause paused("b", 5);
  Outcome rb;
  std::thread tb([&] { rb = outcome_of([&] { append(host_b, "b", b, 32); }); });
  paused.wait_reached();
  const int64_t b_held = rows(path, "held_chunks") - child_held;
  CHECK(b_held == 5);  // chunks 1..5
  ::kill(child.pid(), SIGKILL);
  child.wait();
  if (how == "open") {
    Store reopened(path, options());
  } else if (how == "gc") {
    other.gc(std::numeric_limits<int64_t>::max());
  } else {
    other.vacuum();
  }
  CHECK(rows(path, "held_chunks") == b_held);  // the dead writer's are gone, the live one's stay
  CHECK(colikv_test::store_int(path, "SELECT count(*) FROM chunks ch WHERE NOT EXISTS (SELECT 1 FROM "
                                     "conversation_chunks cc WHERE cc.chunk_id = ch.chunk_id)") == b_held);
  CHECK(colikv_test::orphan_chunks(path, true) == 0);
  CHECK(other.verify().ok());
  CHECK(!other.exists("a"));
  paused.release();
  tb.join();
  INFO(rb.message);
  CHECK(rb.code == ErrorCode::kOk);
  CHECK(loads_as(other, "b", b, 32) == "");
  const colikv::VerifyReport r = other.verify();
  CHECK(r.ok());
  CHECK(colikv_test::orphan_chunks(path, false) == 0);
  CHECK(rows(path, "held_chunks") == 0);
}

TEST_CASE("objects first: a turn that fails after its chunks drops them, and a closed Store leaves no writer row",
          "[objects][sync]") {
  ObjectsFirst on;
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers h = colikv_test::history(kModel, 32, 3), other = colikv_test::history(kModel, 32, 4);
  {
    Store s(path, options()), t(path, options());
    append(s, "a", h, 4);
    colikv_test::ChunkPause paused("a", 4);
    Outcome r;
    std::thread ta([&] { r = outcome_of([&] { append(s, "a", h, 32); }); });
    paused.wait_reached();
    t.remove("a");  // the turn's link finds the conversation gone
    paused.release();
    ta.join();
    CHECK(r.code == ErrorCode::kConflict);
    CHECK(rows(path, "held_chunks") == 0);
    CHECK(colikv_test::orphan_chunks(path, false) == 0);
    append(s, "b", other, 32);
    CHECK(rows(path, "writers") >= 1);
  }
  CHECK(rows(path, "writers") == 0);
  CHECK(rows(path, "held_chunks") == 0);
}

TEST_CASE("objects first: an append inside an open transaction (write) keeps one transaction and holds nothing",
          "[objects][sync]") {
  ObjectsFirst on;
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers h = colikv_test::history(kModel, 32, 5), b = colikv_test::history(kModel, 8, 6);
  Store host_a(path, options()), host_b(path, options(200));
  append(host_b, "b", b, 4);
  colikv_test::ChunkPause paused("w", 3);  // inside write()'s transaction: truncate and append are one
  Outcome ra;
  std::thread ta([&] { ra = outcome_of([&] { host_a.write("w", kModel, h.tokens.data(), 0, 32, h.source()); }); });
  paused.wait_reached();
  CHECK(rows(path, "held_chunks") == 0);
  const Outcome rb = outcome_of([&] { append(host_b, "b", b, 8); });
  CHECK(rb.code == ErrorCode::kBusy);  // the write lock is held through the whole write
  paused.release();
  ta.join();
  INFO(ra.message);
  CHECK(ra.code == ErrorCode::kOk);
  CHECK(loads_as(host_b, "w", h, 32) == "");
  CHECK(host_b.verify().ok());
}

namespace {

// Windows of 48 bytes from the payloads of the chunks held now.
std::vector<std::string> held_payload_windows(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  SQLite::Statement q(db, "SELECT payload FROM chunks WHERE chunk_id IN (SELECT chunk_id FROM held_chunks)");
  std::vector<std::string> out;
  while (q.executeStep()) {
    const SQLite::Column c = q.getColumn(0);
    const std::string payload(static_cast<const char*>(c.getBlob()), static_cast<size_t>(c.getBytes()));
    for (size_t k = 0; k < 4 && payload.size() >= 48; ++k) out.push_back(payload.substr((payload.size() - 48) * k / 3, 48));
  }
  return out;
}

}  // namespace

TEST_CASE("objects first: the reclaim of a dead writer's chunks erases their bytes from the store's files",
          "[objects][erase][sync]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  {
    Store s(path, options());
    append(s, "b", colikv_test::history(kModel, 4, 2), 4);
  }
  ::setenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES", "0", 1);
  colikv_test::ChildProcess child({COLIKV_STORE_CHILD_PATH, "hold", path, "a", "5", "64", "3"}, true);
  ::unsetenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES");
  std::string line;
  REQUIRE(child.read_line(line));
  REQUIRE(line == "mid-turn");
  const std::vector<std::string> windows = held_payload_windows(path);
  REQUIRE(windows.size() == 16);
  REQUIRE(colikv_test::found_in_store_files(path, windows) >= 16);
  ::kill(child.pid(), SIGKILL);
  child.wait();
  {
    Store reopened(path, options());  // reclaims, and erases what it deleted
    CHECK(rows(path, "held_chunks") == 0);
    CHECK(colikv_test::found_in_store_files(path, windows) == 0);
    CHECK(reopened.verify().ok());
  }
  CHECK(colikv_test::found_in_store_files(path, windows) == 0);
}

// The hook a case sets by hand is process-global: it must be gone when the
// case ends by an exception (a failed REQUIRE), or the next case's appends
// would call it with its captures destroyed.
TEST_CASE("objects first: the append hook a case sets is cleared when the case throws", "[objects][sync]") {
  REQUIRE_FALSE(colikv_test::AppendHook::set());
  bool called = false;
  try {
    const colikv_test::AppendHook hook([&](const std::string&, int64_t) { called = true; });
    REQUIRE(colikv_test::AppendHook::set());
    throw std::runtime_error("as a failed REQUIRE throws");
  } catch (const std::runtime_error&) {
  }
  CHECK_FALSE(colikv_test::AppendHook::set());
  CHECK_FALSE(called);
}
