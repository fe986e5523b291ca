// The background checkpointer (store.cpp): a store copies its WAL back into
// the database file on its own thread while it stays open, and the WAL stays
// about one append long instead of growing until a commit has to stall.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "colikv/store.h"
#include "test_support.h"

using colikv::ModelSignature;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;
using colikv_test::file_size;

namespace {

// A store on 4 KiB pages (the checkpointer wakes at 1,000 WAL pages: 4 MB
// here) saved turn after turn by save(k) (positions [0, k turns)), recording
// the WAL's size after the first turn and its largest.
struct WalFixture {
  static constexpr int64_t kTurn = 1024, kTurns = 8;
  TempDir dir;
  const std::string path = dir.file("s.db");
  const ModelSignature m = colikv_test::wide_model();
  EngineBuffers b{m, kTurn * kTurns};
  int64_t first_wal = 0, max_wal = 0;

  WalFixture() { b.fill(0, kTurn * kTurns, 5); }
  colikv::Options options() const {
    colikv::Options o = colikv_test::chunked_options(m, 256);
    o.page_size = 4096;
    o.wal_checkpoint_bytes = 1000 * 4096;  // checkpoints at 1000 pages, as these figures assume
    return o;
  }
  void save_turns(const std::function<void(int64_t k)>& save) {
    for (int64_t k = 1; k <= kTurns; ++k) {
      save(k);
      const int64_t wal = file_size(path + "-wal");
      if (k == 1) first_wal = wal;
      max_wal = std::max(max_wal, wal);
    }
  }
  // Each turn began on a checkpointed WAL, which SQLite then rewrote from its
  // start rather than growing it. One turn writes more than the
  // checkpointer's threshold: in one transaction the WAL grows past it; a
  // turn stored objects first (its chunks in transactions of their own,
  // docs/design.md) lets the checkpointer copy the WAL back between them,
  // SQLite starts it over, and it stays at the threshold (the size limit
  // truncates it to that), so a WAL at the threshold is the turn's too.
  void check_wal_started_over() {
    REQUIRE(first_wal >= 1000 * 4096);
    INFO("WAL after the first turn " << first_wal << ", largest WAL " << max_wal);
    CHECK(max_wal < first_wal * 2);
  }
};

}  // namespace

TEST_CASE_METHOD(WalFixture, "the WAL is checkpointed in the background and stays about one append long",
                 "[store][checkpoint]") {
  Store s(path, options());
  save_turns([&](int64_t k) { s.append("c", m, b.tokens.data(), k * kTurn, b.source()); });
  const int64_t stored = s.stats().total.stored_bytes;
  check_wal_started_over();

  // While the store stays open, the data reaches the database file, all but
  // what the WAL holds below the checkpointer's threshold: a turn stored
  // objects first ends with its last chunks and link in a WAL the
  // checkpointer started over between its chunks, which stays there until
  // the WAL reaches the threshold again (in one transaction, the turn alone
  // passed it and was copied back whole).
  const int64_t below_threshold = 1000 * 4096;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (file_size(path) + below_threshold < stored && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  INFO("stored " << stored << " bytes; database file " << file_size(path));
  CHECK(file_size(path) + below_threshold >= stored);
}

TEST_CASE_METHOD(WalFixture, "a write from the committed count starts the WAL over after a checkpoint as an append does",
                 "[store][checkpoint]") {
  Store s(path, options());
  // What an engine adapter calls after every turn (colikv_write).
  save_turns([&](int64_t k) { s.write("c", m, b.tokens.data(), (k - 1) * kTurn, k * kTurn, b.source()); });
  check_wal_started_over();
}

TEST_CASE_METHOD(WalFixture, "a queued append_async turn starts the WAL over after a checkpoint as an append does",
                 "[store][checkpoint][async]") {
  Store s(path, options());
  save_turns([&](int64_t k) {
    s.append_async("c", m, b.tokens.data(), k * kTurn, b.source());
    s.wait("c");
  });
  check_wal_started_over();
}

// The checkpoint size is in bytes (Options::wal_checkpoint_bytes), not pages:
// with 16 KiB pages a WAL of a few tens of MB is not yet copied back, as with
// 64 KiB pages, so smaller pages do not checkpoint large turns more often.
TEST_CASE("a store with 16 KiB pages checkpoints at the same WAL bytes as with 64 KiB", "[checkpoint][pages]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  const ModelSignature m = colikv_test::wide_model();
  const int64_t n = 4000;
  EngineBuffers b(m, n + 1);
  b.fill(0, n + 1, 9);
  colikv::Options o;
  o.page_size = 16384;
  o.synchronous = colikv::Synchronous::kNormal;
  Store s(path, o);
  s.append("a", m, b.tokens.data(), n, b.source());
  const int64_t wal = file_size(path + "-wal");
  REQUIRE(wal > 1000 * 16384);  // past 1,000 pages
  REQUIRE(wal < o.wal_checkpoint_bytes);
  s.append("a", m, b.tokens.data(), n + 1, b.source());  // waits for a checkpoint if one was started
  CHECK(file_size(path) < wal / 4);                       // the WAL was not copied back
}
