// Store::append_async and Store::wait: queued turns read back bit-exact, every
// other call reads its own writes, an error in a queued turn surfaces from
// wait and leaves the last good turn, the bound blocks and resumes, and
// closing commits what is queued. Deterministic: the writer thread is held
// with its pause hook and blocked calls are observed through its counters,
// never by sleeping.
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "colikv/coli_kv.h"
#include "colikv/copy.h"
#include "colikv/store.h"
#include "fault_vfs.h"
#include "store/write/async_writer.h"
#include "store/store_impl.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::error_code_of;
using colikv_test::TempDir;

namespace {

constexpr int64_t kChunk = 8;  // turns of 5 tokens end inside chunks and across them

struct AsyncFixture {
  TempDir dir;
  colikv::ModelSignature m = colikv_test::tiny_model();
  EngineBuffers engine{m, 64};
  std::string path = dir.file("s.db");

  AsyncFixture() {
    engine.tokens = colikv_test::make_tokens(64, m.vocab, 7);
    engine.fill(0, 64, 11);
  }
  colikv::Options options() const { return colikv_test::chunked_options(m, kChunk); }
  colikv::detail::AsyncWriter& writer(Store& s) { return *colikv::detail::StoreAccess::impl(s).async(); }
  void queue(Store& s, const std::string& id, int64_t len) {
    s.append_async(id, m, engine.tokens.data(), len, engine.source());
  }
  // "" when id holds exactly positions [0, n) of the engine's buffers.
  std::string holds(Store& s, const std::string& id, int64_t n) {
    EngineBuffers got(m, 64);
    got.poison();
    const int64_t loaded = s.load(id, m, got.tokens.data(), got.capacity, got.target());
    if (loaded != n) return "holds " + std::to_string(loaded) + " tokens, not " + std::to_string(n);
    for (int64_t p = 0; p < n; ++p)
      if (got.tokens[p] != engine.tokens[p]) return "token " + std::to_string(p) + " differs";
    return got.compare(engine, n);
  }
};

// Runs f on a thread and returns once it has finished or is blocked where
// `blocked` says; the caller checks which, then releases it and joins.
class Blocker {
 public:
  Blocker(std::function<void()> f, std::function<bool()> blocked) : thread_([this, f] {
      f();
      done_ = true;
    }) {
    while (!done_ && !blocked()) std::this_thread::yield();
  }
  ~Blocker() {
    if (thread_.joinable()) thread_.join();
  }
  bool done() const { return done_; }
  void join() { thread_.join(); }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE_METHOD(AsyncFixture, "async: queued turns commit in order and read back bit-exact", "[async]") {
  Store s(path, options());
  writer(s).pause(true);  // nothing commits until every turn is queued
  for (int64_t len = 5; len <= 40; len += 5) {
    queue(s, "c", len);
    // The engine overwrites its buffers at once: the queued rows are a copy.
    engine.poison();
    engine.tokens = colikv_test::make_tokens(64, m.vocab, 7);
    engine.fill(0, 64, 11);
  }
  CHECK(writer(s).queued_jobs() == 8);
  writer(s).pause(false);
  s.wait("c");
  CHECK(writer(s).queued_jobs() == 0);
  CHECK(holds(s, "c", 40) == "");
  CHECK(s.verify("c").ok());
}

TEST_CASE_METHOD(AsyncFixture, "async: a turn after the tail chunk's values were evicted saves them again from the engine",
                 "[async]") {
  // The writer re-encodes the chunk the turn starts in; with the stored rows
  // of that chunk evicted, they must come from the engine's buffers as a
  // synchronous append takes them, not from before the staged rows.
  Store s(path, options());
  s.append("c", m, engine.tokens.data(), 5, engine.source());
  CHECK(s.gc(0).chunks > 0);
  queue(s, "c", 12);
  queue(s, "c", 19);
  s.wait("c");
  CHECK(holds(s, "c", 19) == "");
  CHECK(s.verify("c").ok());
}

TEST_CASE_METHOD(AsyncFixture, "async: wait() of every conversation, and a no-op turn", "[async]") {
  Store s(path, options());
  queue(s, "a", 13);
  queue(s, "b", 8);
  queue(s, "b", 8);  // nothing new: nothing queued
  s.wait();
  CHECK(writer(s).queued_jobs() == 0);
  CHECK(holds(s, "a", 13) == "");
  CHECK(holds(s, "b", 8) == "");
}

TEST_CASE_METHOD(AsyncFixture, "async: errors found before queueing are returned at once and queue nothing",
                 "[async]") {
  {
    Store s(path, options());
    s.append("c", m, engine.tokens.data(), 10, engine.source());
    writer(s).pause(true);
    colikv::ModelSignature other = m;
    other.kv_lora = 32;
    CHECK(error_code_of([&] { s.append_async("c", other, engine.tokens.data(), 20, engine.source()); }) ==
          ErrorCode::kModelMismatch);
    std::vector<int32_t> t = engine.tokens;
    t[3] ^= 1;  // differs from the stored tokens
    CHECK(error_code_of([&] { s.append_async("c", m, t.data(), 20, engine.source()); }) == ErrorCode::kDiverged);
    queue(s, "c", 20);
    t = engine.tokens;
    t[15] ^= 1;  // differs from the queued tokens only
    try {
      s.append_async("c", m, t.data(), 25, engine.source());
      FAIL("no error");
    } catch (const colikv::Error& e) {
      CHECK(e.code() == ErrorCode::kDiverged);
      CHECK(e.position() == 15);
    }
    CHECK(error_code_of([&] { queue(s, "c", 15); }) == ErrorCode::kInvalidArgument);  // shorter than queued
    t = engine.tokens;
    t[22] = m.vocab;
    CHECK(error_code_of([&] { s.append_async("c", m, t.data(), 25, engine.source()); }) ==
          ErrorCode::kInvalidArgument);
    CHECK(error_code_of([&] { s.append_async("c", m, engine.tokens.data(), 25, colikv::KvSource{}); }) ==
          ErrorCode::kInvalidArgument);
    CHECK(error_code_of([&] { s.append_async("", m, engine.tokens.data(), 25, engine.source()); }) ==
          ErrorCode::kInvalidArgument);
    CHECK(writer(s).queued_jobs() == 1);
    writer(s).pause(false);
    s.wait("c");
    CHECK(holds(s, "c", 20) == "");
  }
  colikv::Options ro = options();
  ro.read_only = true;
  Store r(path, ro);
  CHECK(error_code_of([&] { queue(r, "c", 25); }) == ErrorCode::kReadOnly);
  CHECK_NOTHROW(r.wait());
}

TEST_CASE_METHOD(AsyncFixture, "async: every other call first waits for the conversation's queued turns",
                 "[async]") {
  struct Call {
    const char* name;
    std::function<void(Store&)> run;  // checks that it saw the queued turn (positions [0, 21))
  };
  const std::string export_path = dir.file("c.coli_kv");
  const std::vector<Call> calls = {
      {"count", [&](Store& s) { CHECK(s.count("c") == 21); }},
      {"exists", [&](Store& s) { CHECK(s.exists("n")); }},
      {"load", [&](Store& s) { CHECK(holds(s, "c", 21) == ""); }},
      {"load_range",
       [&](Store& s) {
         EngineBuffers got(m, 64);
         CHECK(s.load_range("c", m, 13, 21, got.tokens.data(), got.target()) == 8);
       }},
      {"tokens", [&](Store& s) { CHECK(s.tokens("c").size() == 21); }},
      {"info", [&](Store& s) { CHECK(s.info("c").tokens == 21); }},
      {"truncate", [&](Store& s) { CHECK_NOTHROW(s.truncate("c", 21)); }},  // 21 > the 13 committed before
      {"write",
       [&](Store& s) {
         s.write("c", m, engine.tokens.data(), 21, 30, engine.source());
         CHECK(holds(s, "c", 30) == "");
       }},
      {"append",
       [&](Store& s) {
         s.append("c", m, engine.tokens.data(), 30, engine.source());
         CHECK(holds(s, "c", 30) == "");
       }},
      {"fork",
       [&](Store& s) {
         s.fork("c", "f");
         CHECK(s.count("f") == 21);
       }},
      {"remove",
       [&](Store& s) {
         s.remove("n");
         CHECK_FALSE(s.exists("n"));
       }},
      {"set_title", [&](Store& s) { CHECK_NOTHROW(s.set_title("n", "t")); }},
      {"list", [&](Store& s) { CHECK(s.list().size() == 2); }},
      {"conversation_count", [&](Store& s) { CHECK(s.conversation_count() == 2); }},
      {"stats", [&](Store& s) { CHECK(s.stats().total.tokens == 21 + 21); }},
      {"match",
       [&](Store& s) { CHECK(s.match(m, engine.tokens.data(), 21).tokens == 21); }},
      {"export", [&](Store& s) { CHECK(colikv::export_coli_kv(s, "c", export_path) == 40 + 21 * m.record_bytes()); }},
      {"verify", [&](Store& s) { CHECK(s.verify("c").conversations == 1); }},
      {"copy_conversation",
       [&](Store& s) {
         Store other(dir.file("other.db"), options());
         colikv::copy_conversation(s, other, "c");
         CHECK(other.count("c") == 21);
       }},
  };
  for (const Call& call : calls) {
    DYNAMIC_SECTION(call.name) {
      Store s(path, options());
      s.append("c", m, engine.tokens.data(), 13, engine.source());
      writer(s).pause(true);
      queue(s, "c", 21);  // "n" is new: a call on it waits for its queue
      queue(s, "n", 21);
      // The call must block until the queued turns are committed: it runs
      // while the writer is held, and the writer is let go once it blocks.
      Blocker b([&] { call.run(s); }, [&] { return writer(s).blocked_waits() > 0; });
      CHECK_FALSE(b.done());
      writer(s).pause(false);
      b.join();
    }
  }
}

TEST_CASE_METHOD(AsyncFixture, "async: a racing writer fails the queued turn with kConflict and drops the later ones",
                 "[async]") {
  Store s(path, options());
  queue(s, "c", 10);
  s.wait("c");
  writer(s).pause(true);
  queue(s, "c", 15);
  queue(s, "c", 20);
  {
    Store other(path, options());  // another process, as far as s knows
    other.append("c", m, engine.tokens.data(), 12, engine.source());
  }
  // Until the error is reported, the conversation takes no new turn.
  writer(s).pause(false);
  while (writer(s).queued_jobs() > 0) std::this_thread::yield();
  CHECK(error_code_of([&] { queue(s, "c", 25); }) == ErrorCode::kConflict);
  CHECK(error_code_of([&] { s.wait("c"); }) == ErrorCode::kConflict);
  CHECK_NOTHROW(s.wait("c"));  // reported once
  CHECK(holds(s, "c", 12) == "");  // the other writer's turn, the last good one
  queue(s, "c", 25);  // validated against the store again
  s.wait("c");
  CHECK(holds(s, "c", 25) == "");
}

TEST_CASE_METHOD(AsyncFixture, "async: wait() of every conversation reports the earliest failure", "[async]") {
  Store s(path, options());
  queue(s, "a", 5);
  queue(s, "b", 5);
  s.wait();
  writer(s).pause(true);
  queue(s, "b", 10);  // fails first
  queue(s, "a", 10);  // fails second
  {
    Store other(path, options());
    other.truncate("a", 3);
    other.truncate("b", 3);
  }
  writer(s).pause(false);
  try {
    s.wait();
    FAIL("no error");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kConflict);
    CHECK(std::string(e.what()).find("'b'") != std::string::npos);
  }
  CHECK_NOTHROW(s.wait());  // both reported by that one wait
}

TEST_CASE_METHOD(AsyncFixture, "async: a full disk fails the queued turn and the store keeps the last good turn",
                 "[async][faults]") {
  colikv_test::RamTmpdir ram;
  TempDir ram_dir;
  colikv_test::FaultVfs& vfs = colikv_test::FaultVfs::get();
  vfs.reset();
  colikv::Options o = options();
  o.vfs_name = colikv_test::FaultVfs::kName;
  Store s(ram_dir.file("s.db"), o);
  queue(s, "c", 10);
  s.wait();
  writer(s).pause(true);
  queue(s, "c", 30);
  queue(s, "c", 40);
  vfs.fail_nth(colikv_test::FaultVfs::kWrite, 1, SQLITE_FULL, /*persistent=*/true);
  writer(s).pause(false);
  CHECK(error_code_of([&] { s.wait(); }) == ErrorCode::kDiskFull);
  vfs.clear_faults();
  CHECK(holds(s, "c", 10) == "");
  queue(s, "c", 40);
  CHECK_NOTHROW(s.wait("c"));
  CHECK(holds(s, "c", 40) == "");
  vfs.reset();
}

TEST_CASE_METHOD(AsyncFixture, "async: past the bound append_async blocks until the writer frees room", "[async]") {
  colikv::Options o = options();
  o.max_queued_bytes = 10 * m.floats_per_token() * 4;  // ten positions
  Store s(path, o);
  writer(s).pause(true);
  queue(s, "c", 8);  // 8 positions: fits
  Blocker b([&] { queue(s, "c", 16); }, [&] { return writer(s).blocked_enqueues() > 0; });
  CHECK_FALSE(b.done());  // 8 + 8 > 10
  CHECK(writer(s).queued_jobs() == 1);
  writer(s).pause(false);
  b.join();
  s.wait("c");
  CHECK(holds(s, "c", 16) == "");
  // A turn larger than the bound alone goes once the queue is empty.
  queue(s, "c", 40);
  s.wait("c");
  CHECK(holds(s, "c", 40) == "");
}

TEST_CASE_METHOD(AsyncFixture, "async: a burst of turns leaves two staging buffers behind, not one per turn",
                 "[async]") {
  Store s(path, options());
  writer(s).pause(true);
  for (int64_t len = 8; len <= 48; len += 8) queue(s, "c", len);  // six buffers in use at once
  writer(s).pause(false);
  s.wait("c");
  CHECK(writer(s).spare_buffers() == 2);
  writer(s).pause(true);  // else the writer may commit the turn and give its buffer back before the check
  queue(s, "c", 56);  // takes a recycled one
  CHECK(writer(s).spare_buffers() == 1);
  writer(s).pause(false);
  s.wait("c");
  CHECK(holds(s, "c", 56) == "");
}

TEST_CASE_METHOD(AsyncFixture,
                 "async: with prefault_async_staging, the writer reserves a staging buffer when the Store opens, so "
                 "that the first turn of a conversation never loaded is staged in it, and later turns reuse it",
                 "[async]") {
  {
    Store before(path, options());
    before.append("c", m, engine.tokens.data(), 5, engine.source());
  }
  {  // Not asked for: neither opening nor a load reserves anything (a frontend reading conversations holds no staging memory).
    Store reader(path, options());
    CHECK(writer(reader).spare_memory().empty());
    CHECK(holds(reader, "c", 5) == "");
    CHECK(writer(reader).spare_memory().empty());
  }
  colikv::Options engine_options = options();
  engine_options.prefault_async_staging = true;  // as the engine adapter opens its store
  Store s(path, engine_options);  // as after an engine restart whose slot has nothing stored: no load
  const auto reserved = writer(s).spare_memory();  // faulted in by the writer thread, before any call
  REQUIRE(reserved.size() == 1);
  CHECK(reserved[0].second <= static_cast<size_t>(options().max_queued_bytes));
  writer(s).pause(true);
  queue(s, "new", 12);  // a conversation this Store never loaded
  CHECK(writer(s).queued_rows_of("new") == reserved[0].first);
  CHECK(writer(s).spare_buffers() == 0);
  writer(s).pause(false);
  s.wait("new");
  CHECK(holds(s, "new", 12) == "");
  CHECK(writer(s).spare_memory() == reserved);  // back, not freed
  CHECK(holds(s, "c", 5) == "");  // a load reserves nothing more
  CHECK(writer(s).spare_memory() == reserved);
  writer(s).pause(true);
  queue(s, "c", 17);
  CHECK(writer(s).queued_rows_of("c") == reserved[0].first);
  writer(s).pause(false);
  s.wait("c");
  CHECK(holds(s, "c", 17) == "");
}

TEST_CASE_METHOD(AsyncFixture,
                 "async: a first turn far smaller than the staging buffer still being reserved neither waits for the "
                 "reservation nor is committed after it, and the reserved buffer is kept for the next turns",
                 "[async]") {
  colikv::Options o = options();
  o.prefault_async_staging = true;  // as the engine adapter opens its store
  // A slow reservation (a loaded machine) stopped after a huge page; opened again if it was done before the hold.
  std::unique_ptr<Store> s;
  for (int tries = 0; tries < 20 && !(s && writer(*s).reserve_stopped()); ++tries) {
    s.reset();
    s = std::make_unique<Store>(path, o);
    writer(*s).hold_reserve(true);
    for (int i = 0; i < 2000 && !writer(*s).reserve_stopped() && writer(*s).spare_buffers() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(writer(*s).reserve_stopped());
  // An engine reads its next request only once a turn is saved: held for the reservation, that request waits too.
  auto saved = std::async(std::launch::async, [&] {
    queue(*s, "c", 12);
    s->wait("c");
  });
  const bool in_time = saved.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  writer(*s).hold_reserve(false);
  saved.get();
  CHECK(in_time);
  CHECK(holds(*s, "c", 12) == "");
  const auto reserved = writer(*s).spare_memory();  // the reservation, done, is a spare before the turn's own
  REQUIRE(!reserved.empty());
  CHECK(reserved[0].second >= (size_t{2} << 20));
  CHECK(reserved[0].second <= static_cast<size_t>(o.max_queued_bytes));
  writer(*s).pause(true);
  queue(*s, "c", 17);
  CHECK(writer(*s).queued_rows_of("c") == reserved[0].first);
  writer(*s).pause(false);
  s->wait("c");
  CHECK(holds(*s, "c", 17) == "");
}

TEST_CASE_METHOD(AsyncFixture, "async: the staging buffer reserved at open stays within max_queued_bytes",
                 "[async]") {
  {
    Store before(path, options());
    before.append("c", m, engine.tokens.data(), 5, engine.source());
  }
  colikv::Options o = options();
  o.prefault_async_staging = true;
  o.max_queued_bytes = (int64_t{5} << 20) / 2;  // one huge page fits, two do not
  {
    Store s(path, o);
    CHECK(holds(s, "c", 5) == "");
    const auto reserved = writer(s).spare_memory();
    REQUIRE(reserved.size() == 1);
    CHECK(reserved[0].second <= static_cast<size_t>(o.max_queued_bytes));
    queue(s, "c", 9);
    s.wait("c");
    CHECK(holds(s, "c", 9) == "");
  }
  o.max_queued_bytes = int64_t{1} << 20;  // smaller than a staging buffer's least size: nothing reserved
  Store s(path, o);
  CHECK(holds(s, "c", 9) == "");
  CHECK(writer(s).spare_memory().empty());
  queue(s, "c", 17);
  s.wait("c");
  CHECK(holds(s, "c", 17) == "");
}

TEST_CASE_METHOD(AsyncFixture, "async: closing the store commits every queued turn", "[async]") {
  {
    Store s(path, options());
    writer(s).pause(true);
    queue(s, "a", 5);
    queue(s, "a", 17);
    queue(s, "b", 9);
    CHECK(writer(s).queued_jobs() == 3);
  }
  Store s(path, options());
  CHECK(holds(s, "a", 17) == "");
  CHECK(holds(s, "b", 9) == "");
}

TEST_CASE_METHOD(AsyncFixture,
                 "async: destroying the store while another thread is blocked at the bound waits for its turn",
                 "[async][tsan]") {
  colikv::Options o = options();
  o.max_queued_bytes = 10 * m.floats_per_token() * 4;  // ten positions
  auto s = std::make_unique<Store>(path, o);
  writer(*s).pause(true);
  queue(*s, "c", 8);
  Blocker b([&] { queue(*s, "c", 16); }, [&] { return writer(*s).blocked_enqueues() > 0; });
  REQUIRE_FALSE(b.done());  // blocked at the bound: 8 + 8 > 10
  s.reset();  // waits for the blocked call, then commits both turns
  CHECK(b.done());
  b.join();
  Store again(path, options());
  CHECK(holds(again, "c", 16) == "");
}

TEST_CASE_METHOD(AsyncFixture, "async: threads queueing and reading conversations of one store", "[async][tsan]") {
  Store s(path, options());
  std::atomic<int> wrong_counts{0};  // Catch's CHECK is not for other threads
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      const std::string id = "t" + std::to_string(t);
      for (int64_t len = 3; len <= 30; len += 3) {
        queue(s, id, len);
        if (len % 9 == 0 && s.count(id) != len) ++wrong_counts;
      }
      s.wait(id);
    });
  for (auto& th : threads) th.join();
  CHECK(wrong_counts == 0);
  for (int t = 0; t < 3; ++t) CHECK(holds(s, "t" + std::to_string(t), 30) == "");
}

TEST_CASE_METHOD(AsyncFixture, "async: threads queueing turns of one conversation keep their order", "[async][tsan]") {
  Store s(path, options());
  std::atomic<int64_t> next{0}, longest{0};
  std::atomic<int> other_errors{0};  // Catch's CHECK is not for other threads
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        const int64_t len = std::min<int64_t>(64, ++next);
        try {
          queue(s, "c", len);
        } catch (const colikv::Error& e) {
          // Only kInvalidArgument: another thread queued a longer turn first.
          if (e.code() != ErrorCode::kInvalidArgument) ++other_errors;
          continue;
        }
        for (int64_t seen = longest; len > seen && !longest.compare_exchange_weak(seen, len);) {
        }
      }
    });
  for (auto& th : threads) th.join();
  CHECK(other_errors == 0);
  CHECK_NOTHROW(s.wait());  // no turn committed out of order (that would be a kConflict)
  CHECK(holds(s, "c", longest) == "");
}
