// copy_conversation takes both stores' calls (issue 33, defect 8): their
// gates and locks in one order whichever way it copies, so that copies in
// opposite directions on two threads cannot deadlock, and destroying either
// store waits for a copy that is running.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "colikv/copy.h"
#include "colikv/error.h"
#include "colikv/model.h"
#include "colikv/options.h"
#include "colikv/store.h"
#include "chunk_pause.h"
#include "test_support.h"
#include "watchdog.h"

using colikv::ErrorCode;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::Outcome;
using colikv_test::TempDir;
using colikv_test::append;
using colikv_test::history;
using colikv_test::loads_as;
using colikv_test::Watchdog;
using colikv_test::outcome_of;

TEST_CASE("copy: copies in opposite directions between two stores on two threads all finish", "[copy][tsan][sync]") {
  TempDir dir;
  const colikv::ModelSignature m = colikv_test::tiny_model();
  const colikv::Options o = colikv_test::chunked_options(m, 4);
  Store a(dir.file("a.db"), o), b(dir.file("b.db"), o);
  const EngineBuffers h = history(m, 10, 1);
  const int rounds = 60;
  for (int i = 0; i < rounds; ++i) {
    append(a, "from-a-" + std::to_string(i), h, 10);
    append(b, "from-b-" + std::to_string(i), h, 10);
  }
  Outcome ab, ba;  // the first failure of each direction
  {
    Watchdog watchdog(std::chrono::seconds(60), "copies A->B and B->A");
    // Each round's two copies start together (both threads spin until both
    // arrived): each takes its source's lock at about the moment the other
    // takes its own, so that locks taken in opposite orders meet every few
    // rounds rather than by luck.
    std::atomic<int> arrived{0};
    const auto copies = [&](Store& src, Store& dst, const std::string& prefix, Outcome& first_failure) {
      for (int i = 0; i < rounds; ++i) {
        arrived.fetch_add(1);
        while (arrived.load() < 2 * (i + 1)) std::this_thread::yield();
        const Outcome r = outcome_of([&] { colikv::copy_conversation(src, dst, prefix + std::to_string(i)); });
        if (r.code != ErrorCode::kOk && first_failure.code == ErrorCode::kOk) first_failure = r;
      }
    };
    std::thread t1([&] { copies(a, b, "from-a-", ab); });
    std::thread t2([&] { copies(b, a, "from-b-", ba); });
    t1.join();
    t2.join();
    watchdog.done();
  }
  INFO(ab.message << " / " << ba.message);
  CHECK(ab.code == ErrorCode::kOk);
  CHECK(ba.code == ErrorCode::kOk);

  // Made rather than hoped for: a third thread's append into B stops inside
  // its transaction (B's lock held) while the two copies start, so that each
  // waits for B's lock; the copy A->B waiting there must not hold A's, or
  // whichever copy B's lock goes to next could wait for the other forever.
  const int held_rounds = 12;
  {
    Watchdog watchdog(std::chrono::seconds(60), "copies A->B and B->A behind a held append into B");
    for (int i = 0; i < held_rounds; ++i) {
      const std::string held = "held-" + std::to_string(i), from_a = "from-a-held-" + std::to_string(i),
                        from_b = "from-b-held-" + std::to_string(i);
      append(a, from_a, h, 10);
      append(b, from_b, h, 10);
      colikv_test::ChunkPause pause(held, 0);
      std::thread holder([&] { append(b, held, h, 10); });
      pause.wait_reached();
      Outcome r1, r2;
      std::thread t1([&] { r1 = outcome_of([&] { colikv::copy_conversation(a, b, from_a); }); });
      std::thread t2([&] { r2 = outcome_of([&] { colikv::copy_conversation(b, a, from_b); }); });
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // both copies reach B's lock
      pause.release();
      holder.join();
      t1.join();
      t2.join();
      INFO("round " << i << ": " << r1.message << " / " << r2.message);
      REQUIRE(r1.code == ErrorCode::kOk);
      REQUIRE(r2.code == ErrorCode::kOk);
    }
    watchdog.done();
  }
  CHECK(b.list(colikv::ListOptions{1000, 0}).size() == static_cast<size_t>(2 * (rounds + held_rounds) + held_rounds));
  CHECK(a.list(colikv::ListOptions{1000, 0}).size() == static_cast<size_t>(2 * (rounds + held_rounds)));
  CHECK(loads_as(b, "from-a-" + std::to_string(rounds - 1), h, 10) == "");
  CHECK(loads_as(a, "from-b-" + std::to_string(rounds - 1), h, 10) == "");
}

TEST_CASE("copy: destroying the destination store waits for the copy running into it", "[copy]") {
  TempDir dir;
  const colikv::ModelSignature m = colikv_test::tiny_model();
  const colikv::Options o = colikv_test::chunked_options(m, 4);
  Store a(dir.file("a.db"), o);
  auto b = std::make_unique<Store>(dir.file("b.db"), o);
  const EngineBuffers h = history(m, 64, 1);
  append(a, "c", h, 64);

  std::mutex mu;
  std::condition_variable cv;
  bool copying = false, destroying = false;
  std::atomic<bool> copied{false};
  colikv::CopyOptions co;
  co.progress = [&](int64_t done, int64_t) {
    if (done > 4) return;  // the first chunk only
    std::unique_lock<std::mutex> lock(mu);
    copying = true;
    cv.notify_all();
    cv.wait(lock, [&] { return destroying; });
    lock.unlock();
    // The destructor has started: one that does not wait for the copy has
    // time to return (and free what the copy uses) before the copy goes on.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  };
  Outcome r;
  std::thread t([&] {
    r = outcome_of([&] { colikv::copy_conversation(a, *b, "c", co); });
    copied = true;
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return copying; });
    destroying = true;
    cv.notify_all();
  }
  b.reset();
  const bool copy_ended_first = copied.load();
  t.join();
  CHECK(copy_ended_first);
  INFO(r.message);
  CHECK(r.code == ErrorCode::kOk);
  Store again(dir.file("b.db"), o);
  CHECK(loads_as(again, "c", h, 64) == "");
}

// The copy gives a conversation new to the destination its source's precision
// and chunk size. It used to do so by changing the destination's Options for
// the copy's call: Store::options() (any thread, no lock) then read the
// source's layout, and another thread reading it raced with the copy.
TEST_CASE("copy: the destination's options stay as opened while a copy runs into it", "[copy]") {
  TempDir dir;
  const colikv::ModelSignature m = colikv_test::tiny_model();
  colikv::Options so = colikv_test::chunked_options(m, 4);
  so.new_conversation_precision = colikv::Precision::kBf16;
  const colikv::Options dopts = colikv_test::chunked_options(m, 8);
  Store a(dir.file("a.db"), so), b(dir.file("b.db"), dopts);
  const EngineBuffers h = history(m, 16, 1);
  append(a, "c", h, 16);

  int calls = 0, changed = 0;
  colikv::CopyOptions co;
  co.progress = [&](int64_t, int64_t) {
    ++calls;
    if (b.options().new_conversation_precision != colikv::Precision::kF32 ||
        b.options().chunk_target_bytes != dopts.chunk_target_bytes)
      ++changed;
  };
  colikv::copy_conversation(a, b, "c", co);
  REQUIRE(calls > 0);
  CHECK(changed == 0);
  // The copy keeps its source's precision; what the destination creates next takes its own.
  CHECK(b.info("c").precision == "bf16");
  append(b, "after", h, 16);
  CHECK(b.info("after").precision == "f32");
  CHECK(loads_as(b, "after", h, 16) == "");
}
