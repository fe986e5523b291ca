// Hostile or damaged store files: counts that disagree with the chunk list,
// a schema altered by hand, sizes no colikv writes, FIFOs, directories and
// unreadable files. Every case is a clear colikv::Error naming the store
// (and the conversation or the schema object), no crash, no hang, memory
// bounded by what the library itself writes, and the store unchanged.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <zstd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "core/chunk_codec.h"
#include "core/crc32c.h"
#include "crash_workload.h"
#include "fault_vfs.h"
#include "proc_util.h"
#include "test_support.h"

namespace wl = colikv_test::workload;
using colikv::Error;
using colikv::ErrorCode;
using colikv::Store;
using colikv_test::TempDir;

namespace {

// c0: 40 tokens (5 chunks of 8), c1: 17 tokens (3 chunks, the last partial).
void make_store(const std::string& path) { wl::write_store(path, {{"c0", 40}, {"c1", 17}}, false); }

// Runs SQL on the store as someone else would, without colikv's checks.
void tamper(const std::string& path, const std::vector<std::string>& sql) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  for (const auto& s : sql) db.exec(s);
}

// The same in the sqlite3 shell: a large value built there does not count
// toward this process's peak memory.
void tamper_in_shell(const std::string& path, const std::vector<std::string>& sql) {
  std::vector<std::string> argv = {COLIKV_SQLITE3_SHELL, "-bail", path};
  argv.insert(argv.end(), sql.begin(), sql.end());
  colikv_test::ChildProcess shell(argv);
  REQUIRE(shell.wait() == 0);
}

// The chunk at `seq` of conversation `name`, its payload decompressed.
struct RawChunk {
  int64_t id = 0;
  std::string raw;
  std::vector<int32_t> tokens;
};

RawChunk raw_chunk(SQLite::Database& db, const std::string& name, int seq) {
  SQLite::Statement q(db,
                      "SELECT ch.chunk_id, ch.payload, ch.compression, ch.raw_size, ch.tokens FROM chunks ch "
                      "JOIN conversation_chunks cc USING (chunk_id) JOIN conversations c USING (conversation_id) "
                      "WHERE c.name = ? AND cc.seq = ?");
  q.bind(1, name);
  q.bind(2, seq);
  REQUIRE(q.executeStep());
  RawChunk c;
  c.id = q.getColumn(0).getInt64();
  c.raw.assign(static_cast<size_t>(q.getColumn(3).getInt64()), '\0');
  const std::string stored = q.getColumn(1).getString();
  if (q.getColumn(2).getString() == "zstd")
    REQUIRE(ZSTD_decompress(c.raw.data(), c.raw.size(), stored.data(), stored.size()) == c.raw.size());
  else
    c.raw = stored;
  REQUIRE(colikv::detail::parse_tokens_json(q.getColumn(4).getText(), static_cast<size_t>(q.getColumn(4).getBytes()), c.tokens));
  return c;
}

// Stores c's raw payload uncompressed under `compression`, with the
// checksum a load checks (CRC-32C of the token ids, then the raw payload).
void store_raw(SQLite::Database& db, const RawChunk& c, const std::string& compression) {
  uint32_t crc = colikv::detail::crc32c(0, c.tokens.data(), c.tokens.size() * 4);
  crc = colikv::detail::crc32c(crc, c.raw.data(), c.raw.size());
  db.exec("PRAGMA ignore_check_constraints = ON");
  SQLite::Statement u(db, "UPDATE chunks SET payload = ?, compression = ?, checksum = ? WHERE chunk_id = ?");
  u.bind(1, c.raw.data(), static_cast<int>(c.raw.size()));
  u.bind(2, compression);
  u.bind(3, static_cast<int64_t>(crc));
  u.bind(4, c.id);
  REQUIRE(u.exec() == 1);
}

std::string dump(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  SQLite::Statement q(db,
                      "SELECT group_concat(name || ':' || token_count || ':' || coalesce(parent_id, '-'), ',') "
                      "FROM conversations");
  q.executeStep();
  return q.getColumn(0).getString() + " links " +
         std::to_string(db.execAndGet("SELECT count(*) FROM conversation_chunks").getInt64());
}

int64_t max_rss_kb() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

// Runs f, which must throw colikv::Error with `code` and a message holding every one of `words`.
template <class F>
void expect_error(F&& f, ErrorCode code, const std::vector<std::string>& words) {
  try {
    f();
    FAIL("no error; expected one mentioning " << words.front());
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    for (const auto& w : words) CHECK(std::string(e.what()).find(w) != std::string::npos);
  }
}

// Runs the colikv tool; returns its exit status, or -1 if it did not end
// within 20 s (it is killed). stderr goes to `err`.
int run_tool(const std::vector<std::string>& argv, const std::string& err) {
  colikv_test::ChildProcess child(argv, false, err);
  for (int i = 0; i < 2000; ++i) {
    int status = 0;
    if (::waitpid(child.pid(), &status, WNOHANG) == child.pid()) {
      // Reaped here: keep ChildProcess from waiting on it again.
      child.kill_now();
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  child.kill_now();
  return -1;
}

}  // namespace

TEST_CASE("hostile store: a count larger than the chunk list is corrupt, never read past the list", "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("count.db");
  make_store(path);
  tamper(path, {"UPDATE conversations SET token_count = 10000000000 WHERE name = 'c1'"});
  const std::string before = dump(path);
  Store s(path, wl::options(false));
  expect_error([&] { s.truncate("c1", 9000000001); }, ErrorCode::kCorrupt, {path, "'c1'", "(seq 2, positions [16, 17)) holds 1 tokens before position"});
  expect_error([&] { s.fork("c1", "f", 9000000001); }, ErrorCode::kCorrupt, {path, "'c1'", "(seq 2, positions [16, 17)) holds 1 tokens before position"});
  expect_error([&] { s.fork("c1", "f", -1); }, ErrorCode::kCorrupt, {"'c1'"});
  const auto& b = wl::history_of("c1").buffers;
  expect_error([&] { s.append("c1", wl::model(), b.tokens.data(), 20, b.source()); }, ErrorCode::kCorrupt, {"'c1'"});
  CHECK(wl::check_content(s, "c0", 40) == "");
  CHECK(dump(path) == before);
}

TEST_CASE("hostile store: a chunk-list row deleted is reported naming the conversation and chunk", "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("gap.db");
  make_store(path);
  tamper(path, {"DELETE FROM conversation_chunks WHERE seq = 4 AND conversation_id = "
                "(SELECT conversation_id FROM conversations WHERE name = 'c0')"});
  const std::string before = dump(path);
  Store s(path, wl::options(false));
  // The last chunk is gone: the list is one short of what the count needs.
  expect_error([&] { s.truncate("c0", 37); }, ErrorCode::kCorrupt, {"'c0'", "its chunks cover positions [0, 32) but its count is 40"});
  expect_error([&] { s.fork("c0", "f", 35); }, ErrorCode::kCorrupt, {"'c0'", "cover positions [0, 32)"});
  // c1's list skips seq 1: as many rows as its count needs, but a gap.
  tamper(path, {"UPDATE conversation_chunks SET seq = 3 WHERE seq = 1 AND conversation_id = "
                "(SELECT conversation_id FROM conversations WHERE name = 'c1')"});
  expect_error([&] { s.truncate("c1", 12); }, ErrorCode::kCorrupt, {"'c1'", "(seq 2, ", "leaves positions [8, 16) uncovered"});
  CHECK(dump(path) == before);
  CHECK(s.exists("c1"));
}

TEST_CASE("hostile store: a negative count is corrupt for every reader and writer", "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("negative.db");
  make_store(path);
  // The CHECK on token_count is bypassed, not removed: the schema stays colikv's.
  tamper(path, {"PRAGMA ignore_check_constraints = ON", "UPDATE conversations SET token_count = -5 WHERE name = 'c1'"});
  Store s(path, wl::options(false));
  const std::string out = dir.file("c1.coli_kv");
  expect_error([&] { colikv::export_coli_kv(s, "c1", out, {}); }, ErrorCode::kCorrupt, {"'c1'", "negative"});
  CHECK(colikv_test::file_size(out) == 0);
  expect_error([&] { s.fork("c1", "f", -1); }, ErrorCode::kCorrupt, {"'c1'", "negative"});
  expect_error([&] { s.truncate("c1", 0); }, ErrorCode::kCorrupt, {"'c1'", "negative"});
  expect_error([&] { s.tokens("c1"); }, ErrorCode::kCorrupt, {"'c1'", "negative"});
  CHECK_FALSE(s.exists("f"));
  // The command-line tool says so and exits 1.
  const std::string err = dir.file("err.txt");
  CHECK(run_tool({COLIKV_TOOL_PATH, "export", path, "c1", out}, err) == 1);
  CHECK(colikv_test::read_file(err).find("negative") != std::string::npos);
  CHECK(colikv_test::file_size(out) == 0);
}

TEST_CASE("hostile store: a schema that differs from colikv's is refused naming the object", "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("schema.db");
  struct Case {
    const char* what;
    std::vector<std::string> sql;
    std::string names;
  };
  const std::vector<Case> cases = {
      {"ON DELETE CASCADE on parent_id",
       {"PRAGMA writable_schema = ON",
        "UPDATE sqlite_schema SET sql = replace(sql, 'ON DELETE SET NULL', 'ON DELETE CASCADE') "
        "WHERE name = 'conversations'"},
       "table 'conversations' differs"},
      {"UNIQUE(seq) on conversation_chunks",
       {"DELETE FROM conversation_chunks WHERE conversation_id = (SELECT conversation_id FROM conversations WHERE name = 'c1')",
        "CREATE UNIQUE INDEX hostile_seq ON conversation_chunks(seq)"},
       "index 'hostile_seq' is not colikv's"},
      {"a generated title column",
       {"ALTER TABLE conversations RENAME COLUMN title TO old_title",
        "ALTER TABLE conversations ADD COLUMN title TEXT AS (hex(zeroblob(300000000)))"},
       "table 'conversations' differs"},
      {"a trigger", {"CREATE TRIGGER t AFTER DELETE ON conversations BEGIN DELETE FROM chunks; END"},
       "trigger 't' is not colikv's"},
      {"an index dropped", {"DROP INDEX conversation_chunks_by_chunk"}, "index 'conversation_chunks_by_chunk' is missing"},
      {"a view altered",
       {"DROP VIEW model_summary", "CREATE VIEW model_summary AS SELECT 1"}, "view 'model_summary' differs"},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      make_store(path);
      tamper(path, c.sql);
      const std::string before = dump(path);
      colikv::Options ro = wl::options(false);
      ro.read_only = true;
      for (const auto& o : {wl::options(false), ro}) {
        const int64_t rss = max_rss_kb();
        expect_error([&] { Store s(path, o); s.remove("c0"); s.list(); }, ErrorCode::kCorrupt,
                     {path, "not colikv's schema version", c.names});
        CHECK((max_rss_kb() - rss) / 1024 < 32);
      }
      CHECK(dump(path) == before);
    }
  }
}

TEST_CASE("hostile store: the schema check accepts colikv's own schema and SQLite's statistics", "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("analyzed.db");
  make_store(path);
  tamper(path, {"ANALYZE"});
  Store s(path, wl::options(false));
  CHECK(wl::check_content(s, "c0", 40) == "");
}

TEST_CASE("hostile store: sizes no colikv writes are corrupt before anything is allocated for them", "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("sizes.db");
  make_store(path);
  // One chunk of 2^20 tokens for c1: the model, the count and the chunk all say so.
  tamper_in_shell(path, {"UPDATE models SET chunk_tokens = 1048576",
                "DELETE FROM conversation_chunks WHERE seq > 0 AND conversation_id = "
                "(SELECT conversation_id FROM conversations WHERE name = 'c1')",
                "UPDATE conversations SET token_count = 1048576 WHERE name = 'c1'",
                "UPDATE chunks SET n_tokens = 1048576, raw_size = 1048576 * 96, "
                "tokens = '[' || replace(zeroblob(1048575), x'00', '1,') || '1]' WHERE chunk_id = "
                "(SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c USING (conversation_id) "
                " WHERE c.name = 'c1' AND cc.seq = 0)"});
  const int64_t rss = max_rss_kb();
  {
    Store s(path, wl::options(false));
    const colikv::VerifyReport r = s.verify("c1");
    REQUIRE_FALSE(r.ok());
    CHECK(r.problems.front().what.find("chunk_tokens 1048576") != std::string::npos);
    expect_error([&] { s.truncate("c1", 1000000); }, ErrorCode::kCorrupt, {"chunk_tokens 1048576"});
    expect_error([&] { colikv::export_coli_kv(s, "c1", dir.file("out.coli_kv"), {}); }, ErrorCode::kCorrupt,
                 {"chunk_tokens 1048576"});
  }
  // A 24 MB title, more than any value colikv writes: not loaded.
  tamper_in_shell(path, {"UPDATE models SET chunk_tokens = 8",
                "UPDATE conversations SET title = hex(zeroblob(12 << 20)) WHERE name = 'c0'"});
  {
    Store s(path, wl::options(false));
    expect_error([&] { s.info("c0"); }, ErrorCode::kCorrupt, {path, "larger than any colikv writes"});
    expect_error([&] { s.list(); }, ErrorCode::kCorrupt, {path, "larger than any colikv writes"});
  }
  const int64_t grown_mb = (max_rss_kb() - rss) / 1024;
  std::printf("hostile store: peak memory grew %lld MB over a 2^20-token chunk and a 24 MB title\n",
              static_cast<long long>(grown_mb));
  CHECK(grown_mb < 48);
}

TEST_CASE("hostile store: FIFOs, directories, empty and unreadable files get a clear error, never a hang",
          "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  colikv::Options ro = wl::options(false);
  ro.read_only = true;
  const std::string fifo = dir.file("f.db");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const std::string err = dir.file("err.txt");
  // In a child process, so that a hang fails the test instead of stalling it.
  CHECK(run_tool({COLIKV_TOOL_PATH, "ls", fifo}, err) == 1);
  CHECK(colikv_test::read_file(err).find("a FIFO, not a store file") != std::string::npos);
  expect_error([&] { Store s(fifo, wl::options(false)); }, ErrorCode::kInvalidArgument, {fifo, "FIFO"});

  expect_error([&] { Store s(dir.path(), ro); }, ErrorCode::kInvalidArgument, {"a directory, not a store file"});
  expect_error([&] { Store s(dir.file("none/s.db"), wl::options(false)); }, ErrorCode::kNotFound,
               {"directory " + dir.file("none"), "No such file"});

  const std::string empty = dir.file("empty.db");
  colikv_test::write_file(empty, "");
  expect_error([&] { Store s(empty, ro); }, ErrorCode::kCorrupt, {"not a colikv store (an empty file)"});

  // Unreadable: root reads any file, so the tool runs as nobody (setpriv).
  const std::string locked = dir.file("locked.db");
  make_store(locked);
  ::chmod(dir.path().c_str(), 0755);
  ::chmod(locked.c_str(), 0600);
  std::vector<std::string> argv = {COLIKV_TOOL_PATH, "ls", locked};
  if (::geteuid() == 0) argv.insert(argv.begin(), {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
  else ::chmod(locked.c_str(), 0);
  CHECK(run_tool(argv, err) == 1);
  INFO(colikv_test::read_file(err));
  CHECK(colikv_test::read_file(err).find("Permission denied") != std::string::npos);
}

TEST_CASE("hostile store: the chunk sizes colikv writes stay within what it accepts on reading", "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  // 131,072 bytes a token: a 1 GiB target would give 1024-token chunks of 128 MiB.
  colikv::ModelSignature wide = colikv_test::tiny_model();
  wide.n_layers = 8;
  wide.kv_lora = 4000;
  wide.qk_rope = 96;
  colikv::Options o = wl::options(false);
  o.chunk_target_bytes = int64_t{1} << 30;
  Store s(dir.file("wide.db"), o);
  colikv_test::EngineBuffers b(wide, 1);
  b.fill(0, 1, 3);
  b.tokens = {7};
  s.append("w", wide, b.tokens.data(), 1, b.source());
  CHECK(s.stats().models.at(0).chunk_tokens == 128);  // 16 MiB
  // One record over 16 MiB is refused on write, as it would be on reading.
  colikv::ModelSignature huge = colikv_test::tiny_model();
  huge.n_layers = 1;
  huge.kv_lora = 4 << 20;
  expect_error([&] { s.create("h", huge); }, ErrorCode::kInvalidArgument, {"'h'", "more than the 16 MiB"});
  CHECK_FALSE(s.exists("h"));
}

TEST_CASE("hostile store: text, a real or a blob where an integer is stored is corrupt, never read as a number",
          "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("types.db");
  // SQLite keeps what INTEGER affinity cannot convert, and CHECK (n >= 0)
  // holds for text: plain UPDATEs, the schema stays colikv's. c1's chunk at
  // seq 1 holds positions [8, 16).
  const std::string c1_chunk1 =
      "(SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c USING (conversation_id) "
      "WHERE c.name = 'c1' AND cc.seq = 1)";
  struct Case {
    const char* what;
    std::string sql;
    std::string column;
  };
  const std::vector<Case> cases = {
      {"a text count", "UPDATE conversations SET token_count = 'abc' WHERE name = 'c1'", "conversations.token_count holds text"},
      {"a blob count spelling 17", "UPDATE conversations SET token_count = x'3137' WHERE name = 'c1'",
       "conversations.token_count holds a blob"},
      {"a real n_tokens", "UPDATE chunks SET n_tokens = 8.5 WHERE chunk_id = " + c1_chunk1, "chunks.n_tokens holds a real"},
      {"a real first_pos", "UPDATE chunks SET first_pos = 8.25 WHERE chunk_id = " + c1_chunk1, "chunks.first_pos holds a real"},
      {"a real seq, still in order",
       "UPDATE conversation_chunks SET seq = 1.5 WHERE seq = 1 AND conversation_id = "
       "(SELECT conversation_id FROM conversations WHERE name = 'c1')",
       "conversation_chunks.seq holds a real"},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      make_store(path);
      tamper(path, {c.sql});
      const std::string before = dump(path);
      Store s(path, wl::options(false));
      CHECK(wl::check_content(s, "c1", 17).find(c.column) != std::string::npos);
      expect_error([&] { colikv::export_coli_kv(s, "c1", dir.file("c1.coli_kv"), {}); }, ErrorCode::kCorrupt,
                   {path, "'c1'", c.column});
      // verify reports it, as it does every problem in the data, and goes on.
      for (const std::string& only : {std::string(), std::string("c1")}) {
        const colikv::VerifyReport r = s.verify(only);
        REQUIRE(r.problems.size() == 1);
        CHECK(r.problems.front().conversation == "c1");
        CHECK(r.problems.front().what.find(c.column) != std::string::npos);
        CHECK(r.conversations == (only.empty() ? 2 : 1));
      }
      expect_error([&] { s.truncate("c1", 12); }, ErrorCode::kCorrupt, {path, "'c1'", c.column});
      CHECK(wl::check_content(s, "c0", 40) == "");
      CHECK(dump(path) == before);
    }
  }
  SECTION("a model dimension past 32 bits whose low bits the signature matches") {
    make_store(path);
    tamper(path, {"UPDATE models SET n_layers = n_layers + 4294967296"});
    Store s(path, wl::options(false));
    expect_error([&] { s.info("c0"); }, ErrorCode::kCorrupt, {path, "models.n_layers holds 42949672"});
    CHECK(wl::check_content(s, "c0", 40).find("models.n_layers") != std::string::npos);
  }
}

TEST_CASE("hostile store: a count whose size overflows 64 bits is corrupt, never shown wrapped", "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("overflow.db");
  make_store(path);
  const int64_t record = wl::model().record_bytes();
  {
    // The stored record_bytes column is nobody's check: stats uses the model's.
    tamper(path, {"UPDATE models SET record_bytes = 9223372036854775807"});
    Store s(path, wl::options(false));
    const colikv::StoreStats st = s.stats();
    CHECK(st.total.logical_bytes == 57 * record);
  }
  tamper(path, {"UPDATE conversations SET token_count = 4611686018427387904 WHERE name = 'c1'"});
  Store s(path, wl::options(false));
  expect_error([&] { s.info("c1"); }, ErrorCode::kCorrupt, {path, "'c1'", "4611686018427387904 tokens", "overflow"});
  expect_error([&] { s.list(); }, ErrorCode::kCorrupt, {path, "'c1'", "overflow"});
  expect_error([&] { s.stats(); }, ErrorCode::kCorrupt, {path, "model row", "overflow"});
  CHECK(s.info("c0").raw_bytes == 40 * record);
  // Counts whose sum overflows in SQL: corrupt too, not an internal error.
  tamper(path, {"UPDATE conversations SET token_count = 6000000000000000000"});
  expect_error([&] { s.stats(); }, ErrorCode::kCorrupt, {path, "add up past 64 bits"});
}

TEST_CASE("hostile store: positions, sizes and seqs at the 64-bit limits are corrupt, never overflowed on the way",
          "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("limits.db");
  const std::string c1 = "(SELECT conversation_id FROM conversations WHERE name = 'c1')";
  const std::string c1_seq2 = "(SELECT chunk_id FROM conversation_chunks WHERE seq = 2 AND conversation_id = " + c1 + ")";
  // Every problem's range is read back as stored, its end saturated: never before its start.
  auto check_ranges = [](const colikv::VerifyReport& r) {
    REQUIRE_FALSE(r.ok());
    for (const auto& p : r.problems) {
      INFO(p.what);
      CHECK(p.end_pos >= p.first_pos);
    }
  };
  make_store(path);
  SECTION("a chunk at position 2^63 - 1") {
    tamper(path, {"UPDATE chunks SET first_pos = 9223372036854775807 WHERE chunk_id = " + c1_seq2});
    Store s(path, wl::options(false));
    expect_error([&] { s.truncate("c1", 4); }, ErrorCode::kCorrupt,
                 {"'c1'", "positions [9223372036854775807, 9223372036854775807)"});
    check_ranges(s.verify());
  }
  SECTION("a tail piece of 2^63 - 1 tokens") {
    tamper(path, {"UPDATE chunks SET n_tokens = 9223372036854775807 WHERE chunk_id = " + c1_seq2});
    Store s(path, wl::options(false));
    expect_error([&] { s.fork("c1", "f", -1); }, ErrorCode::kCorrupt, {"'c1'", "ends at position 9223372036854775807,"});
    check_ranges(s.verify());
  }
  SECTION("an unused chunk at position 2^63 - 1") {
    tamper(path, {"UPDATE chunks SET first_pos = 9223372036854775807 WHERE chunk_id = " + c1_seq2,
                  "DELETE FROM conversation_chunks WHERE seq = 2 AND conversation_id = " + c1});
    Store s(path, wl::options(false));
    check_ranges(s.verify());
  }
  // No message shows these; the sanitizer build sees the overflow.
  SECTION("seq 2^63 - 1 and a count of 2^63 - 1") {
    tamper(path, {"UPDATE conversation_chunks SET seq = 9223372036854775807 WHERE seq = 0 AND conversation_id = " + c1,
                  "UPDATE conversations SET token_count = 9223372036854775807 WHERE name = 'c0'"});
    Store s(path, wl::options(false));
    check_ranges(s.verify());
    expect_error([&] { s.truncate("c1", 4); }, ErrorCode::kCorrupt, {"'c1'", "(seq 1, positions [8, 16)) leaves positions [0, 8) uncovered"});
  }
}

TEST_CASE("hostile store: a compression name load refuses is refused by fork and truncate too", "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("compression.db");
  make_store(path);
  {
    // c1's chunk at seq 1 ([8, 16)) stored raw under the name 'NONE'.
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    store_raw(db, raw_chunk(db, "c1", 1), "NONE");
  }
  const std::string before = dump(path);
  Store s(path, wl::options(false));
  CHECK(wl::check_content(s, "c1", 17).find("unknown compression 'NONE'") != std::string::npos);
  expect_error([&] { s.fork("c1", "f", 12); }, ErrorCode::kCorrupt, {"'c1'", "unknown compression 'NONE'"});
  expect_error([&] { s.truncate("c1", 12); }, ErrorCode::kCorrupt, {"'c1'", "unknown compression 'NONE'"});
  CHECK_FALSE(s.exists("f"));
  CHECK(dump(path) == before);
}

TEST_CASE("hostile store: a chunk whose values are not its key's is never linked for another conversation's content",
          "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("poisoned.db");
  make_store(path);
  {
    // c1's first full chunk holds other values under its key and digest, with
    // a checksum that matches them: a load of c1 cannot tell.
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    RawChunk c = raw_chunk(db, "c1", 0);
    for (size_t i = c.raw.size() * 3 / 4; i < c.raw.size(); ++i) c.raw[i] ^= 0x40;  // the floats' top bytes
    store_raw(db, c, "none");
  }
  const std::string before = dump(path);
  Store s(path, wl::options(false));
  // Another conversation with c1's content: linking that chunk would load
  // the store's values, not the ones appended.
  const auto& b = wl::history_of("c1").buffers;
  expect_error([&] { s.append("v", wl::model(), b.tokens.data(), 17, b.source()); }, ErrorCode::kCorrupt,
               {path, "'v'", "holds other tokens or values"});
  CHECK_FALSE(s.exists("v"));
  CHECK(dump(path) == before);
  const colikv::VerifyReport r = s.verify("c1");
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems.front().what.find("content digest does not match") != std::string::npos);
}

TEST_CASE("hostile store: match trusts no chain hash of the index that the chunk's own key does not confirm",
          "[hostile]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("index.db");
  make_store(path);
  // c1's first two chunks indexed under c0's chain hashes, c1 the most recently used.
  const std::string meta_of = "(SELECT k.chain_hash FROM chunk_meta k JOIN conversation_chunks cc USING (chunk_id) "
                              "JOIN conversations c USING (conversation_id) WHERE c.name = 'c0' AND cc.seq = ";
  const std::string c1_chunk = "(SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c USING (conversation_id) "
                               "WHERE c.name = 'c1' AND cc.seq = ";
  tamper(path, {"UPDATE chunk_meta SET chain_hash = " + meta_of + "0) WHERE chunk_id = " + c1_chunk + "0)",
                "UPDATE chunk_meta SET chain_hash = " + meta_of + "1) WHERE chunk_id = " + c1_chunk + "1)",
                "UPDATE conversations SET last_used_ms = last_used_ms + 100000 WHERE name = 'c1'"});
  Store s(path, wl::options(false));
  const auto& c0 = wl::history_of("c0").buffers;
  const colikv::PrefixMatch m = s.match(wl::model(), c0.tokens.data(), 16);
  CHECK(m.id == "c0");
  CHECK(m.tokens == 16);
  const colikv::VerifyReport r = s.verify("c1");
  REQUIRE(r.problems.size() == 2);
  for (const auto& p : r.problems) CHECK(p.what.find("chunk_meta.chain_hash is not the chain hash") != std::string::npos);
}
