// Writers side by side on a server store (docs/postgres.md, "Concurrent
// writers"): writers of different conversations never wait for each other;
// writers of one conversation, of one content, or of a chunk another writer
// frees or evicts, stay correct under row locks. Each race is made, not
// hoped for: an append is held mid-turn, inside its write transaction, by
// the test sync point between chunks ("append:chunk"), and the other
// writer's wait for a lock is observed on the server (pg_stat_activity).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

#include "backend.h"
#include "chunk_pause.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "pg_test_roles.h"
#include "append_hook.h"
#include "proc_util.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv_test::EngineBuffers;
using colikv_test::loads_as;

namespace {

// tiny_model(), 4-token chunks (colikv_store_child's).
colikv::Options options(int busy_timeout_ms = 30000) {
  colikv::Options o;
  o.chunk_target_bytes = 4 * colikv_test::tiny_model().record_bytes();
  o.busy_timeout_ms = busy_timeout_ms;
  return o;
}

using colikv_test::Outcome;
using colikv_test::outcome_of;

int64_t chunk_rows(const std::string& uri) { return colikv_test::store_int(uri, "SELECT count(*) FROM chunks"); }

// tools/postgres.sh pg_ctl on the test server.
void pg_ctl(const std::string& args) {
  const char* dir = std::getenv("COLIKV_TEST_PG_DIR");
  REQUIRE(dir != nullptr);
  const std::string cmd = std::string(COLIKV_SOURCE_DIR) + "/tools/postgres.sh pg_ctl " + dir + " " + args + " > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
}

}  // namespace

TEST_CASE("postgres: a writer of another conversation commits turns while a turn is open", "[postgres][sync]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers a = colikv_test::history(colikv_test::tiny_model(), 64, 1);
  const EngineBuffers b = colikv_test::history(colikv_test::tiny_model(), 40, 2);
  colikv::Store host_a(uri, options());
  // B waits at most a second for any lock: a store-wide writer lock would
  // keep it behind A's open turn past that (kBusy), which no row lock does.
  colikv::Store host_b(uri, options(1000));
  host_a.append("a", a.model, a.tokens.data(), 8, a.source());
  host_b.append("b", b.model, b.tokens.data(), 4, b.source());

  colikv_test::ChunkPause held("a", 3);
  Outcome ra;
  std::thread writer([&] { ra = outcome_of([&] { host_a.append("a", a.model, a.tokens.data(), 64, a.source()); }); });
  held.wait_reached();
  // A's turn is open: it stored entries 2 and 3 and holds its conversation's row.
  Outcome rb;
  for (int64_t n = 8; n <= 40 && rb.code == ErrorCode::kOk; n += 4)
    rb = outcome_of([&] { host_b.append("b", b.model, b.tokens.data(), n, b.source()); });
  const Outcome rb_new = outcome_of([&] { host_b.append("b2", b.model, b.tokens.data(), 12, b.source()); });
  INFO(rb.message << " / " << rb_new.message);
  CHECK(rb.code == ErrorCode::kOk);
  CHECK(rb_new.code == ErrorCode::kOk);
  CHECK(host_b.count("b") == 40);
  CHECK(host_b.count("a") == 8);  // A's turn is not committed yet
  held.release();
  writer.join();
  INFO(ra.message);
  REQUIRE(ra.code == ErrorCode::kOk);
  CHECK(loads_as(host_b, "a", a, 64) == "");
  CHECK(loads_as(host_a, "b", b, 40) == "");
  CHECK(loads_as(host_a, "b2", b, 12) == "");
  CHECK(host_a.verify().ok());
}

TEST_CASE("postgres: a writer process commits while another process holds a turn open", "[postgres][sync]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers b = colikv_test::history(colikv_test::tiny_model(), 24, 2);
  colikv::Store host_b(uri, options(1000));
  host_b.append("b", b.model, b.tokens.data(), 4, b.source());
  // The child appends 64 tokens of history 5 to "a", says "mid-turn" after
  // entry 3 inside its transaction and goes on when told (its stdin).
  colikv_test::ChildProcess child({COLIKV_STORE_CHILD_PATH, "hold", uri, "a", "5", "64", "3"}, true);
  std::string line;
  REQUIRE(child.read_line(line));
  REQUIRE(line == "mid-turn");
  Outcome rb;
  for (int64_t n = 8; n <= 24 && rb.code == ErrorCode::kOk; n += 4)
    rb = outcome_of([&] { host_b.append("b", b.model, b.tokens.data(), n, b.source()); });
  INFO(rb.message);
  CHECK(rb.code == ErrorCode::kOk);
  CHECK(!host_b.exists("a"));
  child.write_stdin("go\n");
  REQUIRE(child.read_line(line));
  CHECK(line == "committed 64");
  CHECK(child.wait() == 0);
  CHECK(loads_as(host_b, "a", colikv_test::history(colikv_test::tiny_model(), 64, 5), 64) == "");
  CHECK(loads_as(host_b, "b", b, 24) == "");
  CHECK(host_b.verify().ok());
}

TEST_CASE("postgres: racing writers of one conversation: one wins, the other kConflict", "[postgres][sync]") {
  const bool existing = GENERATE(true, false);
  INFO((existing ? "an existing conversation" : "a new conversation"));
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers one = colikv_test::history(colikv_test::tiny_model(), 32, 1);
  const EngineBuffers two = colikv_test::history(colikv_test::tiny_model(), 32, 2);
  colikv::Store host1(uri, options()), host2(uri, options());
  host1.append("seed", one.model, one.tokens.data(), 4, one.source());  // the model row, and r's chunk 0
  if (existing) host1.append("r", one.model, one.tokens.data(), 8, one.source());
  const int64_t chunks_before = chunk_rows(uri);

  colikv_test::ChunkPause held("r", existing ? 3 : 1);
  Outcome r1, r2;
  std::thread t1([&] { r1 = outcome_of([&] { host1.append("r", one.model, one.tokens.data(), 32, one.source()); }); });
  held.wait_reached();
  // The second writer's turn waits for the first's row (or, new, its name).
  const EngineBuffers& second = existing ? one : two;
  std::thread t2([&] { r2 = outcome_of([&] { host2.append("r", second.model, second.tokens.data(), 20, second.source()); }); });
  colikv_test::wait_for_pg_lock_waiters(1);
  held.release();
  t1.join();
  t2.join();
  INFO(r1.message << " / " << r2.message);
  CHECK(r1.code == ErrorCode::kOk);
  CHECK(r2.code == ErrorCode::kConflict);
  CHECK(r2.message.find("'r'") != std::string::npos);
  CHECK(r2.message.find("duplicate key") == std::string::npos);
  CHECK(loads_as(host2, "r", one, 32) == "");
  CHECK(chunk_rows(uri) == chunks_before + (existing ? 6 : 7));  // the loser left nothing
  CHECK(host2.verify().ok());
}

TEST_CASE("postgres: two writers storing the same content at once store it once", "[postgres][sync]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), 32, 3);
  colikv::Store host1(uri, options()), host2(uri, options());
  host1.append("seed", h.model, h.tokens.data(), 4, h.source());  // shares chunk 0 too
  colikv_test::ChunkPause held("x", 2);
  Outcome r1, r2;
  std::thread t1([&] { r1 = outcome_of([&] { host1.append("x", h.model, h.tokens.data(), 32, h.source()); }); });
  held.wait_reached();
  // The second stores entry 1 (A's, uncommitted) and waits on its key.
  std::thread t2([&] { r2 = outcome_of([&] { host2.append("y", h.model, h.tokens.data(), 32, h.source()); }); });
  colikv_test::wait_for_pg_lock_waiters(1);
  held.release();
  t1.join();
  t2.join();
  INFO(r1.message << " / " << r2.message);
  REQUIRE(r1.code == ErrorCode::kOk);
  REQUIRE(r2.code == ErrorCode::kOk);
  CHECK(chunk_rows(uri) == 8);  // one row per chunk, linked by x, y (and seed's first)
  CHECK(colikv_test::store_int(uri, "SELECT count(*) FROM conversation_chunks") == 17);
  CHECK(loads_as(host1, "y", h, 32) == "");
  CHECK(loads_as(host2, "x", h, 32) == "");
  CHECK(host1.verify().ok());
}

// A freer never waits for a writer that holds one of its chunks (it might
// wait for the freer in turn: a cycle the server breaks by failing one of
// them). It skips the chunk and queues it (chunks_to_free), and whoever frees
// the queue next (its own commit, gc, a writable open) keeps it while a chunk
// list names it.
TEST_CASE("postgres: a chunk being linked is neither freed nor evicted under its linker, and its freer does not wait",
          "[postgres][sync]") {
  const std::string how = GENERATE(std::string("rm"), std::string("truncate"), std::string("gc"));
  INFO(how);
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), 16, 4);
  // The freer gives up on a lock after a second: a wait for the held linker
  // would fail it (kBusy) before the linker is released.
  colikv::Store linker(uri, options()), other(uri, options(1000));
  other.append("src", h.model, h.tokens.data(), 16, h.source());
  // The linker's "dup" finds src's chunks by key and links them; it is held
  // after linking entry 1, which it holds FOR SHARE.
  colikv_test::ChunkPause held("dup", 1);
  Outcome rl;
  std::thread t([&] { rl = outcome_of([&] { linker.append("dup", h.model, h.tokens.data(), 16, h.source()); }); });
  held.wait_reached();
  const Outcome ro = outcome_of([&] {
    if (how == "rm") other.remove("src");
    if (how == "truncate") other.truncate("src", 0);
    if (how == "gc") other.gc(0);  // evicts all it can, never waiting for the linker's chunks
  });
  INFO(ro.message);
  CHECK(ro.code == ErrorCode::kOk);  // done while the linker's turn is open
  // Entries 0 and 1 wait in the queue; 2 and 3 were freed, and the linker stores them anew.
  if (how != "gc") CHECK(colikv_test::store_int(uri, "SELECT count(*) FROM chunks_to_free") == 2);
  held.release();
  t.join();
  INFO(rl.message);
  REQUIRE(rl.code == ErrorCode::kOk);
  // The linker's acknowledged turn has every value it linked: no dangling
  // link, no evicted chunk it meant to share.
  CHECK(loads_as(other, "dup", h, 16) == "");
  CHECK(other.verify().ok());
  other.gc(std::numeric_limits<int64_t>::max());  // frees the queue: both are linked, and stay
  CHECK(colikv_test::store_int(uri, "SELECT count(*) FROM chunks_to_free") == 0);
  CHECK(loads_as(other, "dup", h, 16) == "");
  CHECK(colikv_test::store_int(uri, "SELECT count(*) FROM conversation_chunks cc LEFT JOIN chunks ch "
                                    "ON ch.chunk_id = cc.chunk_id WHERE ch.chunk_id IS NULL") == 0);
  CHECK(colikv_test::orphan_chunks(uri, false) == 0);
}

TEST_CASE("postgres: chunks queued to free whose linker gave up are freed by the next writable open, never before",
          "[postgres][sync]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), 16, 4);
  colikv::Store other(uri, options(1000));
  other.append("src", h.model, h.tokens.data(), 16, h.source());
  Outcome rl;
  {
    colikv::Store linker(uri, options());
    // The linker holds entries 0 and 1 of src's (FOR SHARE), then fails its turn.
    colikv_test::ChunkPause held("dup", 1);
    std::thread t([&] { rl = outcome_of([&] { linker.append("dup", h.model, h.tokens.data(), 16, h.source()); }); });
    held.wait_reached();
    other.remove("src");  // queues entries 0 and 1
    // Set over the pause's, whose call goes on with its own callback.
    const colikv_test::AppendHook give_up([](const std::string&, int64_t) {
      throw colikv::Error(ErrorCode::kIO, "the linker gave up");
    });
    held.release();
    t.join();
  }
  CHECK(rl.code == ErrorCode::kIO);
  // Two chunks no chunk list names, queued: not a problem for verify, not freed by a read.
  CHECK(chunk_rows(uri) == 2);
  CHECK(colikv_test::store_int(uri, "SELECT count(*) FROM chunks_to_free") == 2);
  CHECK(other.verify().ok());
  {
    colikv::Options ro = options();
    ro.read_only = true;
    colikv::Store reader(uri, ro);
    CHECK(reader.verify().ok());
  }
  CHECK(chunk_rows(uri) == 2);
  colikv::Store reopened(uri, options());
  CHECK(chunk_rows(uri) == 0);
  CHECK(colikv_test::store_int(uri, "SELECT count(*) FROM chunks_to_free") == 0);
  CHECK(reopened.verify().ok());
  reopened.append("src", h.model, h.tokens.data(), 16, h.source());
  CHECK(loads_as(other, "src", h, 16) == "");
  // A queue naming every chunk, linked ones too (a hand edit): only the
  // unlinked would go; these stay, and their rows leave the queue.
  colikv_test::store_exec(uri, "INSERT INTO chunks_to_free SELECT chunk_id, tenant_id FROM chunks");
  colikv::Store again(uri, options());
  CHECK(colikv_test::store_int(uri, "SELECT count(*) FROM chunks_to_free") == 0);
  CHECK(chunk_rows(uri) == 4);
  CHECK(loads_as(again, "src", h, 16) == "");
}

// Both find the chunk evicted and restore its values: as soon as both held
// it shared and then asked for it alone, each waited for the other (a
// deadlock the server broke with kBusy). A third connection holds the chunk
// until both wait for it, so that they reach it together.
TEST_CASE("postgres: two writers re-saving the same evicted chunk at once both commit it", "[postgres]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), 8, 9);
  colikv::Store w1(uri, options()), w2(uri, options());
  w1.append("src", h.model, h.tokens.data(), 8, h.source());
  REQUIRE(w1.gc(0).chunks == 2);  // both of src's chunks evicted
  const auto [r1, r2] = colikv_test::released_together(
      uri, "SELECT chunk_id FROM chunks WHERE first_pos = 0 FOR UPDATE",
      [&] { w1.append("x", h.model, h.tokens.data(), 8, h.source()); },
      [&] { w2.append("y", h.model, h.tokens.data(), 8, h.source()); });
  INFO(r1.message << " / " << r2.message);
  CHECK(r1.code == ErrorCode::kOk);
  CHECK(r2.code == ErrorCode::kOk);
  CHECK(chunk_rows(uri) == 2);  // restored, not stored again
  CHECK(loads_as(w1, "y", h, 8) == "");
  CHECK(loads_as(w2, "x", h, 8) == "");
  CHECK(loads_as(w2, "src", h, 8) == "");  // its values are back for src too
  CHECK(w1.verify().ok());
}

TEST_CASE("postgres: a server stopped between a turn's chunks fails it naming the store and leaves nothing of it",
          "[postgres][sync]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), 64, 6);
  colikv::Store s(uri, options());
  s.append("t", h.model, h.tokens.data(), 8, h.source());
  const int64_t chunks_before = chunk_rows(uri);
  Outcome r;
  {
    const colikv_test::AppendHook stop([](const std::string&, int64_t seq) {
      if (seq == 4) pg_ctl("stop -m immediate -w");
    });
    r = outcome_of([&] { s.append("t", h.model, h.tokens.data(), 64, h.source()); });
  }
  pg_ctl("start -w -t 60");
  INFO(r.message);
  CHECK(r.code == ErrorCode::kIO);
  CHECK(r.message.find("127.0.0.1") != std::string::npos);  // the server
  CHECK(r.message.find("'t'") != std::string::npos);         // the conversation
  CHECK(s.count("t") == 8);
  CHECK(chunk_rows(uri) == chunks_before);  // the server rolled the chunks back with the turn
  CHECK(loads_as(s, "t", h, 8) == "");
  CHECK(s.verify().ok());
  s.append("t", h.model, h.tokens.data(), 64, h.source());
  CHECK(loads_as(s, "t", h, 64) == "");
}
