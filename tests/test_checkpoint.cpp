// The background checkpointer (store.cpp): a store copies its WAL back into
// the database file on its own thread while it stays open, and the WAL stays
// about one append long instead of growing until a commit has to stall.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "colikv/store.h"
#include "test_support.h"

using colikv::ModelSignature;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;
using colikv_test::file_size;

TEST_CASE("the WAL is checkpointed in the background and stays about one append long", "[store][checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  const ModelSignature m = colikv_test::wide_model();
  const int64_t turn = 1024, turns = 8;
  EngineBuffers b(m, turn * turns);
  b.fill(0, turn * turns, 5);
  colikv::Options o = colikv_test::chunked_options(m, 256);
  o.page_size = 4096;  // the checkpointer wakes at 1,000 WAL pages: 4 MB here

  Store s(path, o);
  int64_t first_wal = 0, max_wal = 0;
  for (int64_t k = 1; k <= turns; ++k) {
    s.append("c", m, b.tokens.data(), k * turn, b.source());
    const int64_t wal = file_size(path + "-wal");
    if (k == 1) first_wal = wal;
    max_wal = std::max(max_wal, wal);
  }
  const int64_t stored = s.stats().total.stored_bytes;
  REQUIRE(first_wal > 1000 * 4096);  // one append is past the checkpointer's threshold

  // While the store stays open, the data reaches the database file.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (file_size(path) < stored && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  INFO("stored " << stored << " bytes; database file " << file_size(path) << ", WAL after the first append "
                 << first_wal << ", largest WAL " << max_wal);
  CHECK(file_size(path) >= stored);
  // Each append began on a checkpointed WAL, which SQLite then rewrote from
  // its start rather than growing it.
  CHECK(max_wal < first_wal * 2);
}

TEST_CASE("a write from the committed count starts the WAL over after a checkpoint as an append does", "[store][checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  const ModelSignature m = colikv_test::wide_model();
  const int64_t turn = 1024, turns = 8;
  EngineBuffers b(m, turn * turns);
  b.fill(0, turn * turns, 5);
  colikv::Options o = colikv_test::chunked_options(m, 256);
  o.page_size = 4096;  // the checkpointer wakes at 1,000 WAL pages: 4 MB here

  Store s(path, o);
  int64_t first_wal = 0, max_wal = 0;
  for (int64_t k = 1; k <= turns; ++k) {
    // What an engine adapter calls after every turn (colikv_write).
    s.write("c", m, b.tokens.data(), (k - 1) * turn, k * turn, b.source());
    const int64_t wal = file_size(path + "-wal");
    if (k == 1) first_wal = wal;
    max_wal = std::max(max_wal, wal);
  }
  REQUIRE(first_wal > 1000 * 4096);
  INFO("WAL after the first write " << first_wal << ", largest WAL " << max_wal);
  CHECK(max_wal < first_wal * 2);
}

TEST_CASE("a queued append_async turn starts the WAL over after a checkpoint as an append does",
          "[store][checkpoint][async]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  const ModelSignature m = colikv_test::wide_model();
  const int64_t turn = 1024, turns = 8;
  EngineBuffers b(m, turn * turns);
  b.fill(0, turn * turns, 5);
  colikv::Options o = colikv_test::chunked_options(m, 256);
  o.page_size = 4096;  // the checkpointer wakes at 1,000 WAL pages: 4 MB here

  Store s(path, o);
  int64_t first_wal = 0, max_wal = 0;
  for (int64_t k = 1; k <= turns; ++k) {
    s.append_async("c", m, b.tokens.data(), k * turn, b.source());
    s.wait("c");
    const int64_t wal = file_size(path + "-wal");
    if (k == 1) first_wal = wal;
    max_wal = std::max(max_wal, wal);
  }
  REQUIRE(first_wal > 1000 * 4096);
  INFO("WAL after the first turn " << first_wal << ", largest WAL " << max_wal);
  CHECK(max_wal < first_wal * 2);
}
