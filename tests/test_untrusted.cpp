// Untrusted inputs: a store someone else crafted (hostile triggers, a view in
// place of a table, oversized blobs, bad zstd frame headers) and hostile
// .coli_kv files. Every case ends in a colikv::Error with a clear message, no
// crash, nothing allocated by a header's word, and the store unchanged.
// Ends with a short deterministic mutation run of the two fuzz target
// bodies (fuzz/fuzz_targets.h); the long runs are libFuzzer's (.ci/fuzz.sh).
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include "../fuzz/fuzz_targets.h"
#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "crash_workload.h"
#include "proc_util.h"
#include "fault_vfs.h"
#include "test_support.h"

namespace wl = colikv_test::workload;
using colikv::Error;
using colikv::ErrorCode;
using colikv::Store;
using colikv_test::TempDir;

namespace {

void make_store(const std::string& path) { wl::write_store(path, {{"c0", 40}, {"c1", 17}}, false); }

int64_t max_rss_kb() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

std::string coli_kv_header(std::vector<int32_t> h) {
  std::string out("COLIKV1\0", 8);
  out.append(reinterpret_cast<const char*>(h.data()), h.size() * 4);
  return out;
}

}  // namespace

TEST_CASE("untrusted: defensive settings are on by default", "[untrusted]") {
  CHECK(colikv::Options().defensive);
}

TEST_CASE("untrusted: a store with planted triggers is refused, and they never run", "[untrusted]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("triggers.db");
  make_store(path);
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("CREATE TABLE pwned (what TEXT)");
    db.exec("CREATE TRIGGER t1 AFTER UPDATE ON conversations BEGIN DELETE FROM conversation_chunks; "
            "INSERT INTO pwned VALUES ('update'); END");
    db.exec("CREATE TRIGGER t2 BEFORE DELETE ON conversations BEGIN SELECT RAISE(ABORT, 'no'); END");
  }
  colikv::Options ro = wl::options(false);
  ro.read_only = true;
  for (const auto& o : {wl::options(false), ro}) {
    try {
      Store s(path, o);
      s.remove("c1");
      FAIL("a store with planted triggers was opened");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.code() == ErrorCode::kCorrupt);
      CHECK(std::string(e.what()).find("trigger 't1' is not colikv's") != std::string::npos);
    }
  }
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  CHECK(db.execAndGet("SELECT count(*) FROM pwned").getInt() == 0);
  CHECK(db.execAndGet("SELECT count(*) FROM conversations").getInt() == 2);
}

TEST_CASE("untrusted: a view in place of a table is refused with a clear error", "[untrusted]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("view.db");
  make_store(path);
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA foreign_keys = OFF");
    db.exec("ALTER TABLE conversations RENAME TO conversations_real");
    db.exec("CREATE VIEW conversations AS SELECT * FROM conversations_real");
  }
  try {
    Store s(path, wl::options(false));
    s.count("c0");
    FAIL("a store whose conversations table is a view was read");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(path) != std::string::npos);
    CHECK(std::string(e.what()).find("view") != std::string::npos);
  }
}

TEST_CASE("untrusted: oversized blobs and hostile zstd frames are corrupt, memory stays bounded", "[untrusted]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("blobs.db");
  make_store(path);
  // A zstd frame header declaring 1 TiB of content, then garbage.
  const std::string frame_1tib("\x28\xb5\x2f\xfd\xa4\x00\x00\x00\x00\x00\x01\x00\x00\x01\x02\x03", 16);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a 64 MB payload", "UPDATE chunks SET payload = zeroblob(64 << 20) WHERE chunk_id = ?1"},
      {"a 64 MB raw payload", "UPDATE chunks SET payload = zeroblob(64 << 20), compression = 'none' WHERE chunk_id = ?1"},
      {"a frame declaring 1 TiB", "UPDATE chunks SET payload = ?2, compression = 'zstd' WHERE chunk_id = ?1"},
      {"a frame without a content size", "UPDATE chunks SET payload = x'28b52ffd0000010000', compression = 'zstd' WHERE chunk_id = ?1"},
      {"raw_size of 2^40", "UPDATE chunks SET raw_size = 1099511627776 WHERE chunk_id = ?1"},
      {"a 64 MB token list", "UPDATE chunks SET tokens = '[' || replace(zeroblob(16 << 20), x'00', '1,') || '1]' WHERE chunk_id = ?1"},
  };
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    // Kept in a database beside it: a table of its own would make the store not colikv's.
    SQLite::Database(dir.file("original.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("ATTACH '" + dir.file("original.db") + "' AS keep");
    db.exec("CREATE TABLE keep.original AS SELECT chunk_id, payload, compression, raw_size, tokens FROM chunks");
  }
  const int64_t rss_before = max_rss_kb();
  for (const auto& [what, sql] : cases) {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    const int64_t id = db.execAndGet(
                           "SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c USING (conversation_id) "
                           "WHERE c.name = 'c0' AND cc.seq = 1")
                           .getInt64();
    db.exec("SAVEPOINT s");
    SQLite::Statement u(db, sql);
    u.bind(1, id);
    if (sql.find("?2") != std::string::npos) u.bind(2, frame_1tib.data(), static_cast<int>(frame_1tib.size()));
    u.exec();
    db.exec("RELEASE s");
    {
      Store s(path, wl::options(false));
      colikv_test::EngineBuffers got(wl::model(), wl::kCapacity);
      try {
        s.load("c0", wl::model(), got.tokens.data(), wl::kCapacity, got.target());
        FAIL(what << ": loaded");
      } catch (const Error& e) {
        INFO(what << ": " << e.what());
        CHECK(e.code() == ErrorCode::kCorrupt);
        CHECK(std::string(e.what()).find("'c0'") != std::string::npos);
      }
      CHECK(wl::check_content(s, "c1", 17) == "");
    }
    db.exec("ATTACH '" + dir.file("original.db") + "' AS keep");
    db.exec("UPDATE chunks SET payload = o.payload, compression = o.compression, raw_size = o.raw_size, "
            "tokens = o.tokens FROM keep.original o WHERE chunks.chunk_id = o.chunk_id");
  }
  const int64_t grown_mb = (max_rss_kb() - rss_before) / 1024;
  std::printf("untrusted: peak memory grew %lld MB over hostile blobs of up to 64 MB (and frames declaring 1 TiB)\n",
              static_cast<long long>(grown_mb));
  CHECK(grown_mb < 1024);  // a blob may be held a few times over, never what a header claims
}

TEST_CASE("untrusted: hostile .coli_kv files are refused naming the file and the problem", "[untrusted]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("import.db");
  make_store(path);
  Store s(path, wl::options(false));
  std::string ok_body(4 + 4 * 3 * 24, '\0');  // one record of the tiny model, token 0
  const std::vector<std::pair<std::string, std::string>> files = {
      {"empty", ""},
      {"short magic", "COLI"},
      {"wrong magic", std::string("COLIKV2\0", 8) + std::string(32, '\0')},
      {"header cut", coli_kv_header({3, 16, 8, 0})},
      {"layers huge", coli_kv_header({1 << 30, 1 << 30, 8, 0, 0, 1000, 1, 0})},
      {"negative width", coli_kv_header({3, -16, 8, 0, 0, 1000, 1, 0})},
      {"vocab zero", coli_kv_header({3, 16, 8, 0, 0, 0, 1, 0}) + ok_body},
      {"indexed without width", coli_kv_header({3, 16, 8, 0, 2, 1000, 1, 0}) + ok_body},
      {"count 2^31-1 over one record", coli_kv_header({3, 16, 8, 0, 0, 1000, 0x7fffffff, 0}) + ok_body},
      {"negative count", coli_kv_header({3, 16, 8, 0, 0, 1000, -5, 0}) + ok_body},
      {"reserved field set", coli_kv_header({3, 16, 8, 0, 0, 1000, 1, 7}) + ok_body},
      {"token out of range", coli_kv_header({3, 16, 8, 0, 0, 1000, 1, 0}) + std::string("\xff\xff\xff\x7f", 4) +
                                 ok_body.substr(4)},
      {"record 900 MB claimed, 1 byte present", coli_kv_header({1, 100000000, 100000000, 0, 0, 1000, 1, 0}) + "x"},
  };
  const int64_t rss_before = max_rss_kb();
  for (const auto& [what, bytes] : files) {
    const std::string f = dir.file("hostile.coli_kv");
    colikv_test::write_file(f, bytes);
    colikv::ImportOptions io;
    io.id = "hostile";
    try {
      colikv::import_coli_kv(s, f, io);
      FAIL(what << ": imported");
    } catch (const Error& e) {
      INFO(what << ": " << e.what());
      CHECK(e.code() == ErrorCode::kInvalidArgument);
      CHECK(std::string(e.what()).find(f) != std::string::npos);
    }
    CHECK_FALSE(colikv::inspect_coli_kv(f).ok());
    CHECK_FALSE(s.exists("hostile"));
  }
  CHECK(s.conversation_count() == 2);
  CHECK((max_rss_kb() - rss_before) / 1024 < 256);
}

TEST_CASE("untrusted: a .coli_kv file cut while it is inspected is an error, not a clean report", "[untrusted]") {
  TempDir dir;
  const std::string f = dir.file("shrinking.coli_kv");
  // Ten million one-layer records (a sparse file): the scan of their token
  // ids outlasts the moment the file is cut.
  const int32_t records = 10000000;
  colikv_test::write_file(f, coli_kv_header({1, 1, 1, 0, 0, 1000, records, 0}));
  REQUIRE(::truncate(f.c_str(), colikv::kColiKvHeaderBytes + int64_t{12} * records) == 0);
  std::string outcome;
  std::thread inspecting([&] {
    try {
      const colikv::ColiKvInspection r = colikv::inspect_coli_kv(f);
      outcome = r.ok() ? "no problems" : r.problems.front();  // the old scan read past the end: "no problems"
    } catch (const Error& e) {
      outcome = std::to_string(static_cast<int>(e.code())) + " " + e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(::truncate(f.c_str(), 1 << 20) == 0);
  inspecting.join();
  INFO(outcome);
  CHECK(outcome.rfind(std::to_string(static_cast<int>(ErrorCode::kIO)) + " " + f +
                          ": the file shrank while it was inspected (record ", 0) == 0);
}

TEST_CASE("untrusted: a short mutation run of the fuzz targets", "[untrusted][fuzz]") {
  colikv_test::RamTmpdir ram;
  std::mt19937 rng(99);
  // Seeds: a well-formed file of the tiny model, then mutants of it.
  colikv_test::EngineBuffers b(wl::model(), 12);
  b.fill(0, 12, 5);
  b.tokens = colikv_test::make_tokens(12, wl::model().vocab, 5);
  TempDir dir;
  colikv_test::write_coli_kv(dir.file("seed.coli_kv"), b, 12);
  const std::string seed = colikv_test::read_file(dir.file("seed.coli_kv"));
  const int runs = colikv_test::long_tests() ? 20000 : 1500;
  for (int i = 0; i < runs; ++i) {
    std::string m = seed;
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      const unsigned kind = rng() % 4;
      const size_t at = rng() % m.size();
      if (kind == 0) m[at] = static_cast<char>(rng());
      if (kind == 1) m.resize(at);
      if (kind == 2 && at < 40) m[at & ~size_t{3}] = static_cast<char>(rng() % 3 ? rng() % 8 : 0xff);
      if (kind == 3) m.insert(at, std::string(rng() % 64, static_cast<char>(rng())));
      if (m.empty()) m = seed;
    }
    colikv_fuzz::coli_kv_one(reinterpret_cast<const uint8_t*>(m.data()), m.size());
  }
  // Chunks: a real encoded chunk in the decoder target's input layout, mutated.
  std::vector<float> vals(2 * 3 * 5);
  for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<float>(i) * 0.37f;
  colikv::detail::PlaneList planes{{vals.data(), 3, 3}, {vals.data() + 15, 3, 3}};
  std::vector<int32_t> toks{0, 7, 14, 21, 28};
  const auto enc = colikv::detail::encode_chunk(5, toks.data(), planes, 1);
  std::string chunk;
  chunk.push_back(static_cast<char>(enc.compressed ? 1 : 0));
  chunk.push_back(4);
  chunk.push_back(static_cast<char>(1 | (2 << 2)));
  chunk.append(reinterpret_cast<const char*>(&enc.checksum), 4);
  chunk.append(4, '\0');
  chunk.append(reinterpret_cast<const char*>(enc.payload.data()), enc.payload.size());
  const auto zstd_chunk = colikv::detail::encode_chunk(5, toks.data(), planes, 1);
  for (int i = 0; i < runs * 4; ++i) {
    std::string m = chunk;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % m.size();
      if (rng() % 5 == 0)
        m.resize(std::max<size_t>(at, 11));
      else
        m[at] = static_cast<char>(m[at] ^ (1 << (rng() % 8)));
    }
    if (i % 2) m[0] = static_cast<char>(m[0] | 1);  // try every payload as a zstd frame too
    colikv_fuzz::chunk_decode_one(reinterpret_cast<const uint8_t*>(m.data()), m.size());
  }
  (void)zstd_chunk;
  std::printf("untrusted: %d mutated .coli_kv files and %d mutated chunks ran through the fuzz targets\n", runs,
              runs * 4);
  SUCCEED();
}

TEST_CASE("untrusted: a short mutation run of the store fuzz target", "[untrusted][fuzz]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("seed.db");
  {
    colikv::Options o = wl::options(false);
    o.page_size = 512;  // a small file, as the fuzzer's seeds
    Store s(path, o);
    const auto& b = wl::history_of("c0").buffers;
    s.append("c0", wl::model(), b.tokens.data(), 19, b.source());
    s.fork("c0", "f", 11);
  }
  const std::string seed = colikv_test::read_file(path);
  std::mt19937 rng(7);
  const int runs = colikv_test::long_tests() ? 3000 : 300;
  for (int i = 0; i < runs; ++i) {
    std::string m = seed;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % m.size();
      if (rng() % 3 == 0)
        m[at] = static_cast<char>(rng());
      else
        m[at] = static_cast<char>(m[at] ^ (1 << (rng() % 8)));
    }
    colikv_fuzz::store_one(reinterpret_cast<const uint8_t*>(m.data()), m.size());
  }
  std::printf("untrusted: %d mutated store files ran through the store fuzz target\n", runs);
  SUCCEED();
}
