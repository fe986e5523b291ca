// A Store's call nesting is its own (issue 34, "a Store owns its state"): a
// call on Store B made from a progress callback of a call on Store A is B's
// outermost call, entering B's gate and waiting for B's queued turns as any
// call of B does; a call on A from A's own callback is nested in A's call
// and waits for nothing.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "store/write/async_writer.h"
#include "colikv/copy.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "store/store_impl.h"
#include "test_support.h"
#include "watchdog.h"

using colikv::ErrorCode;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::Outcome;
using colikv_test::TempDir;
using colikv_test::Watchdog;
using colikv_test::outcome_of;

namespace {

colikv::detail::AsyncWriter& writer_of(Store& s) { return *colikv::detail::StoreAccess::impl(s).async(); }

// Lets a paused writer go on once a call waits for its queue, or once the
// test says so (a call that does not wait): run() from the test's thread.
class ResumeWhenWaited {
 public:
  explicit ResumeWhenWaited(colikv::detail::AsyncWriter& w)
      : w_(w), thread_([this] {
          while (!stop_.load() && w_.blocked_waits() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          waited_ = w_.blocked_waits() > 0;
          w_.pause(false);
        }) {}
  // Returns whether a call waited for the queue before it was resumed.
  bool finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return waited_;
  }
  ~ResumeWhenWaited() { finish(); }

 private:
  colikv::detail::AsyncWriter& w_;
  std::atomic<bool> stop_{false};
  bool waited_ = false;
  std::thread thread_;
};

}  // namespace

TEST_CASE("store call: a call on another store from a progress callback waits for that store's queued turns",
          "[store_call][async]") {
  TempDir dir;
  const colikv::ModelSignature m = colikv_test::tiny_model();
  const colikv::Options o = colikv_test::chunked_options(m, 4);
  Store a(dir.file("a.db"), o), b(dir.file("b.db"), o);
  const EngineBuffers h = colikv_test::history(m, 32, 1);
  colikv_test::append(a, "c", h, 32);
  // B's turn is queued, its writer held: only a call of B that waits for
  // B's queue (and so resumes the writer) reads it.
  writer_of(b).pause(true);
  b.append_async("q", m, h.tokens.data(), 10, h.source());

  Watchdog watchdog(std::chrono::seconds(60), "calls on B from A's progress callback");
  Outcome counted, copied;
  int64_t n = -1;
  bool waited = false, called = false;
  a.verify("c", [&](int64_t, int64_t) {
    if (called) return;
    called = true;
    ResumeWhenWaited resume(writer_of(b));
    counted = outcome_of([&] { n = b.count("q"); });
    waited = resume.finish();
  });
  REQUIRE(called);
  INFO(counted.message);
  CHECK(waited);
  CHECK(counted.code == ErrorCode::kOk);
  CHECK(n == 10);
  b.wait();

  // The same for a copy into B from A's callback (StorePairCall): B's queued
  // turn of the id is committed first, so that the copy finds it there.
  writer_of(b).pause(true);
  b.append_async("c", m, h.tokens.data(), 8, h.source());
  called = false;
  a.verify("c", [&](int64_t, int64_t) {
    if (called) return;
    called = true;
    ResumeWhenWaited resume(writer_of(b));
    copied = outcome_of([&] { colikv::copy_conversation(a, b, "c"); });
    waited = resume.finish();
  });
  REQUIRE(called);
  INFO(copied.message);
  CHECK(waited);
  CHECK(copied.code == ErrorCode::kConflict);  // exists already in B: nothing written
  b.wait();
  CHECK(b.count("c") == 8);
  watchdog.done();
}

TEST_CASE("store call: a call on a store from its own progress callback is nested and does not wait",
          "[store_call][async]") {
  TempDir dir;
  const colikv::ModelSignature m = colikv_test::tiny_model();
  const colikv::Options o = colikv_test::chunked_options(m, 4);
  Store a(dir.file("a.db"), o);
  const EngineBuffers h = colikv_test::history(m, 32, 1);
  colikv_test::append(a, "c", h, 32);
  writer_of(a).pause(true);
  a.append_async("q", m, h.tokens.data(), 10, h.source());

  // Waiting for A's queue inside A's call would hang: the writer commits
  // under A's lock, which this thread holds. The nested call reads what is
  // committed.
  Watchdog watchdog(std::chrono::seconds(60), "a call on A from A's progress callback");
  Outcome nested;
  int64_t n = -1;
  bool called = false;
  a.verify("c", [&](int64_t, int64_t) {
    if (called) return;
    called = true;
    nested = outcome_of([&] { n = a.count("q"); });
  });
  REQUIRE(called);
  INFO(nested.message);
  CHECK(nested.code == ErrorCode::kOk);
  CHECK(n == 0);  // not committed yet: none of it
  writer_of(a).pause(false);
  CHECK(a.count("q") == 10);  // an outermost call waits again
  watchdog.done();
}

TEST_CASE("store call: destroying a store waits for its call made from another store's progress callback",
          "[store_call][async]") {
  TempDir dir;
  const colikv::ModelSignature m = colikv_test::tiny_model();
  const colikv::Options o = colikv_test::chunked_options(m, 4);
  Store a(dir.file("a.db"), o);
  auto b = std::make_unique<Store>(dir.file("b.db"), o);
  const EngineBuffers h = colikv_test::history(m, 32, 1);
  colikv_test::append(a, "c", h, 32);
  colikv_test::append(*b, "d", h, 32);

  std::mutex mu;
  std::condition_variable cv;
  bool in_b = false, destroying = false;
  std::atomic<bool> b_call_ended{false};
  Outcome r;
  std::thread t([&] {
    bool called = false;
    r = outcome_of([&] {
      a.verify("c", [&](int64_t, int64_t) {
        if (called) return;
        called = true;
        bool b_called = false;
        b->verify("d", [&](int64_t, int64_t) {
          if (b_called) return;
          b_called = true;
          std::unique_lock<std::mutex> lock(mu);
          in_b = true;
          cv.notify_all();
          cv.wait(lock, [&] { return destroying; });
          lock.unlock();
          // The destructor has started: one that does not wait for this
          // call has time to return (and free what it uses) meanwhile.
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        });
        b_call_ended = true;
      });
    });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return in_b; });
    destroying = true;
    cv.notify_all();
  }
  b.reset();
  const bool b_call_ended_first = b_call_ended.load();
  t.join();
  CHECK(b_call_ended_first);
  INFO(r.message);
  CHECK(r.code == ErrorCode::kOk);
}
