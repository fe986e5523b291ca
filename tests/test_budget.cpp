// Writers under a byte budget (issue 25): an evicted conversation is saved
// again by append_async as by append, and an eviction by another connection
// makes no later append, truncate or fork of it fail as a conflict.
// Tiny shapes, 4 tokens a chunk.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "append_hook.h"
#include "colikv/copy.h"
#include "colikv/store.h"
#include "store/write/async_writer.h"
#include "backend.h"
#include "cli_run.h"
#include "core/chunk_codec.h"
#include "store/kv_planes.h"
#include "sqlite/sqlite_checkpointer.h"
#include "sqlite/sqlite_connection.h"
#include "store/store_impl.h"
#include "test_support.h"

using colikv::Error;
using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv::Options;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

constexpr int64_t kC = 4;  // tokens a chunk

Options small(const ModelSignature& m) { return colikv_test::chunked_options(m, kC); }

// id loads its n positions bit-exact from b.
void check_loads(Store& s, const std::string& id, const EngineBuffers& b, int64_t n) {
  EngineBuffers got(b.model, b.capacity);
  got.poison();
  REQUIRE(s.load(id, b.model, got.tokens.data(), got.capacity, got.target()) == n);
  CHECK(got.compare(b, n).empty());
  for (int64_t i = 0; i < n; ++i) REQUIRE(got.tokens[static_cast<size_t>(i)] == b.tokens[static_cast<size_t>(i)]);
}

ErrorCode load_code(Store& s, const std::string& id, const EngineBuffers& b) {
  EngineBuffers got(b.model, b.capacity);
  try {
    s.load(id, b.model, got.tokens.data(), got.capacity, got.target());
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kOk;
}

// The store e.db of the tiny model in kC-token chunks, on either backend,
// and the history the budget's cases write (values of seed 11, ids 10, 11, ...).
struct BudgetStore : colikv_test::StoreFixture {
  BudgetStore() : StoreFixture(colikv_test::tiny_model(), kC, "e.db") {}
  EngineBuffers rows(int64_t n) const { return colikv_test::counted_history(model, n, 11, 10); }
};

}  // namespace

TEST_CASE_METHOD(BudgetStore, "append_async re-saves an evicted conversation from the engine's rows",
                 "[backends][eviction][async]") {
  const ModelSignature& m = model;
  const EngineBuffers b = rows(40);
  Store& s = store();
  write("a", b, 10);  // chunks [0, 4), [4, 8), a piece [8, 10)
  s.gc(0);
  REQUIRE(s.info("a").evicted);
  // The turn's chunk starts at 8; the evicted ones before it come from the engine's rows too.
  s.append_async("a", m, b.tokens.data(), 13, b.source());
  s.wait("a");
  CHECK_FALSE(s.info("a").evicted);
  check_loads(s, "a", b, 13);
  // Evicted again, then several turns queued at once: the first re-saves, the others follow it.
  s.gc(0);
  s.append_async("a", m, b.tokens.data(), 15, b.source());
  s.append_async("a", m, b.tokens.data(), 21, b.source());
  s.append_async("a", m, b.tokens.data(), 22, b.source());
  s.wait("a");
  CHECK_FALSE(s.info("a").evicted);
  check_loads(s, "a", b, 22);
  CHECK(s.verify().ok());
}

TEST_CASE_METHOD(BudgetStore, "a queued turn whose conversation is evicted before it commits still commits, and the next re-saves",
          "[eviction][async]") {
  const ModelSignature& m = model;
  const EngineBuffers b = rows(40);
  Store& s = store();
  Store other(path, options);  // another process's gc
  write("a", b, 10);
  colikv::detail::AsyncWriter& writer = *colikv::detail::StoreAccess::impl(s).async();
  writer.pause(true);
  s.append_async("a", m, b.tokens.data(), 13, b.source());  // staged from 8: nothing was evicted yet
  other.gc(0);
  writer.pause(false);
  s.wait("a");  // no kEvicted: the chunks it holds no rows for stay evicted
  CHECK(s.count("a") == 13);
  CHECK(s.tokens("a") == std::vector<int32_t>(b.tokens.begin(), b.tokens.begin() + 13));
  CHECK(load_code(s, "a", b) == ErrorCode::kEvicted);
  CHECK(s.verify().ok());
  // The next turn reads what is stored and re-saves everything from the engine's rows.
  s.append_async("a", m, b.tokens.data(), 14, b.source());
  s.wait("a");
  CHECK_FALSE(s.info("a").evicted);
  check_loads(s, "a", b, 14);
}

TEST_CASE_METHOD(BudgetStore, "an eviction by another connection while an append is prepared is no conflict",
                 "[backends][eviction]") {
  const ModelSignature& m = model;
  const EngineBuffers b = rows(40);
  Store& s = store();
  Store other(path, options);
  write("a", b, 10);
  write("b", b, 6);
  // An append of [10, 13) through the store's own steps; while it encodes
  // (after it read what is committed, before its write lock), the other
  // connection evicts everything.
  const colikv_test::ReadsBeforeWriteLock snapshot_first;
  colikv::detail::AppendRequest req;
  req.id = "a";
  req.model = m;
  req.len = 13;
  req.tokens = b.tokens.data();
  const colikv::KvSource kv = b.source();
  int gcs = 0;
  req.produce = [&](int64_t first, int64_t n, colikv::detail::ProducedChunk& out) {
    if (gcs++ == 0) CHECK(other.gc(0).conversations.size() == 2);
    out.encoded = colikv::detail::encode_chunk(n, out.tokens.data(), colikv::detail::engine_planes(m, kv, first), 1,
                                               out.precision, &out.stored_digests);
  };
  colikv::detail::StoreAccess::append(s, req);  // as one call of s
  CHECK(gcs >= 1);
  CHECK(s.count("a") == 13);
  CHECK(s.tokens("a") == std::vector<int32_t>(b.tokens.begin(), b.tokens.begin() + 13));
  // What the gc evicted stays evicted (the turn's own piece kept its values), and is re-saved by an append.
  CHECK(load_code(s, "a", b) == ErrorCode::kEvicted);
  CHECK(s.verify().ok());
  s.truncate("a", 11);
  s.fork("a", "f", 9);
  write("a", b, 14);
  check_loads(s, "a", b, 14);
  CHECK(s.tokens("f") == std::vector<int32_t>(b.tokens.begin(), b.tokens.begin() + 9));
  CHECK(s.verify().ok());
}

TEST_CASE_METHOD(BudgetStore, "appends, truncates and forks beside a gc loop in another connection never conflict",
                 "[backends][eviction]") {
  const ModelSignature& m = model;
  const EngineBuffers b = rows(200);
  Store& s = store();
  write("x", b, 40);
  std::atomic<bool> stop{false};
  std::atomic<int> gcs{0};
  std::thread gc([&] {
    Store other(path, options);
    while (!stop) {
      other.gc(0);
      ++gcs;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // SQLite's busy wait is not fair: leave a gap
    }
  });
  std::vector<std::string> conflicts;
  int64_t len = 40;
  for (int i = 0; i < 150 && conflicts.size() < 3; ++i) {
    try {
      if (len > 160) {
        s.truncate("x", 0);
        len = 0;
      }
      s.append("x", m, b.tokens.data(), len + 9, b.source());
      s.truncate("x", len + 5);
      len += 5;
      if (i % 10 == 0) {
        s.fork("x", "f", len - 3);
        s.remove("f");
      }
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kConflict) {
        stop = true;
        gc.join();
        throw;
      }
      conflicts.push_back(e.what());
      len = s.count("x");
    }
  }
  stop = true;
  gc.join();
  std::string seen;
  for (const std::string& c : conflicts) seen += c + "\n";
  INFO("gc runs: " << gcs.load() << "; conflicts:\n" << seen);
  CHECK(gcs.load() > 0);
  CHECK(conflicts.empty());
  CHECK(s.count("x") == len);
  CHECK(s.verify().ok());
}

TEST_CASE("under a steady byte budget the file stays near the size of a vacuumed copy of itself", "[eviction]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const EngineBuffers b = colikv_test::counted_history(m, 400, 11, 10);
  const std::string path = dir.file("e.db");
  Options o = small(m);
  o.page_size = 4096;
  o.chunk_target_bytes = 16 * m.record_bytes();  // 16 tokens a chunk: payloads partly inline on the leaf pages
  // A turn a few tokens long, as an engine saves them: tail pieces, re-packed into full chunks.
  auto sizes = [&] {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    const std::string copy = dir.file("vacuumed.db");
    std::remove(copy.c_str());
    db.exec("VACUUM INTO '" + copy + "'");
    return std::make_pair(static_cast<int64_t>(std::filesystem::file_size(path)),
                          static_cast<int64_t>(std::filesystem::file_size(copy)));
  };
  int64_t per_conversation = 0;
  {
    Store probe(dir.file("probe.db"), o);
    probe.append("p", m, b.tokens.data(), 200, b.source());
    per_conversation = probe.stats().total.stored_bytes;
  }
  o.max_store_bytes = 4 * per_conversation;
  Store s(path, o);
  std::vector<std::pair<int64_t, int64_t>> rounds;
  for (int round = 0; round < 24; ++round) {
    // Each round: a new conversation of 200 tokens saved in turns of 5 to 12; the budget evicts older ones.
    std::vector<int32_t> t(b.tokens.begin(), b.tokens.begin() + 200);
    for (auto& x : t) x = (x + 37 * round) % 1000;  // its own token ids: no chunk shared with another round
    const std::string id = "r" + std::to_string(round);
    for (int64_t len = 0; len < 200;) {
      len = std::min<int64_t>(200, len + 5 + (len % 8));
      s.append(id, m, t.data(), len, b.source());
    }
    CHECK(s.stats().total.stored_bytes <= o.max_store_bytes);
    rounds.push_back(sizes());
  }
  std::string seen;
  for (const auto& r : rounds) seen += std::to_string(r.first) + " / " + std::to_string(r.second) + "\n";
  INFO("file / vacuumed copy, by round:\n" << seen);
  for (size_t i = 4; i < rounds.size(); ++i) {
    INFO("round " << i);
    CHECK(rounds[i].first * 10 <= rounds[i].second * 13);  // at most 1.3x a vacuumed copy
  }
  CHECK(s.verify().ok());
}

TEST_CASE("the WAL's checkpoint size follows the free space of its filesystem", "[eviction][checkpoint]") {
  CHECK(colikv::detail::wal_checkpoint_bytes_for(int64_t{64} << 20, -1) == int64_t{64} << 20);
  CHECK(colikv::detail::wal_checkpoint_bytes_for(int64_t{64} << 20, int64_t{8} << 20) == int64_t{512} << 10);
  CHECK(colikv::detail::wal_checkpoint_bytes_for(int64_t{64} << 20, 0) == int64_t{64} << 10);
}

TEST_CASE("on a small filesystem the WAL is checkpointed before it fills the disk", "[eviction][checkpoint][root]") {
  REQUIRE(::geteuid() == 0);  // mounts a tmpfs: ctest runs it as root:..., skipped by name when not root
  TempDir dir;
  colikv_test::SmallFilesystem fs(dir.file("mnt"), "8m");
  REQUIRE(fs.mounted());
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers b = colikv_test::counted_history(m, 2000, 11, 10);
  for (int32_t& t : b.tokens) t %= 1000;  // within the model's vocabulary
  const std::string path = dir.file("mnt/s.db");
  Store s(path, small(m));  // the default wal_checkpoint_bytes, 64 MiB: 8x the filesystem
  int64_t wal_peak = 0;
  // About 3 MB of KV data in all, rewritten: the WAL must be reset as it goes, not grow to the disk's size.
  for (int round = 0; round < 4; ++round)
    for (int i = 0; i < 5; ++i) {
      const std::string id = "c" + std::to_string(i);
      if (round > 0) s.remove(id);
      s.append(id, m, b.tokens.data(), 2000, b.source());
      wal_peak = std::max<int64_t>(wal_peak, colikv::detail::file_size_or_zero(path + "-wal"));
    }
  INFO("WAL peak " << wal_peak);
  // A quarter of the 8 MiB (the hard limit, 4x the checkpoint size) plus one conversation's transaction.
  CHECK(wal_peak <= int64_t{3} << 20);
  CHECK(s.verify().ok());
}

TEST_CASE("copy_conversation carries an evicted conversation as it is, and skip_existing resumes",
          "[backends][eviction][copy]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const EngineBuffers b = colikv_test::counted_history(m, 40, 11, 10);
  Store src(dir.file("src.db"), small(m));
  Store dst(colikv_test::store_at(dir, "dst.db"), small(m));
  src.append("a", m, b.tokens.data(), 10, b.source());
  src.gc(0);
  src.append("p", m, b.tokens.data(), 8, b.source());  // re-saves a's two full chunks, which it shares
  colikv::CopyOptions resume;
  resume.skip_existing = true;
  const colikv::CopyResult r = colikv::copy_conversation(src, dst, "a");
  CHECK_FALSE(r.skipped);
  CHECK(r.tokens == 10);
  CHECK(r.evicted_from == 8);  // the tail piece's values were evicted in the source
  CHECK(dst.tokens("a") == src.tokens("a"));
  CHECK(dst.info("a").evicted);
  CHECK(load_code(dst, "a", b) == ErrorCode::kEvicted);
  EngineBuffers got(m, b.capacity);
  got.poison();
  REQUIRE(dst.load("a", m, got.tokens.data(), got.capacity, got.target(), 8) == 8);
  CHECK(got.compare(b, 8).empty());
  CHECK(dst.verify().ok());
  // Run again: refused without skip_existing, skipped with it, nothing written either way.
  CHECK_THROWS_MATCHES(colikv::copy_conversation(src, dst, "a"), Error,
                       Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::kConflict; }));
  const colikv::CopyResult again = colikv::copy_conversation(src, dst, "a", resume);
  CHECK(again.skipped);
  CHECK(again.evicted_from == 8);
  CHECK(again.records_sha256 == r.records_sha256);
  const colikv::CopyResult p = colikv::copy_conversation(src, dst, "p", resume);
  CHECK_FALSE(p.skipped);
  CHECK(p.evicted_from == -1);
  // Another conversation under the id is no resume: the difference is named and it stays.
  dst.truncate("p", 6);
  try {
    colikv::copy_conversation(src, dst, "p", resume);
    FAIL("a different conversation was taken for the source's");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kConflict);
    CHECK(std::string(e.what()).find("6 tokens rather than 8") != std::string::npos);
  }
  CHECK(dst.count("p") == 6);
}
