// Bad stores and bad files: stores someone else crafted or damaged (a
// schema altered by hand, counts that disagree with the chunk list, sizes no
// colikv writes, flipped bytes of chunk payloads or of the file, FIFOs,
// directories and unreadable files) and hostile .coli_kv files. Every case is
// a clear colikv::Error naming the store or file (and the conversation, the
// range or the schema object), or data that is bit for bit right; no crash,
// no hang, memory bounded by what the library itself writes, and the store
// unchanged. Store::verify and `colikv verify` report the conversation and the
// range; other conversations stay readable. The sections below are ordered by
// what they attack.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../fuzz/fuzz_targets.h"
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
using colikv_test::EngineBuffers;
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

std::string coli_kv_header(std::vector<int32_t> h) {
  std::string out("COLIKV1\0", 8);
  out.append(reinterpret_cast<const char*>(h.data()), h.size() * 4);
  return out;
}

// c0 and c1: 40 tokens each, 5 chunks of 8; c2: 21 tokens; synchronous FULL.
void make_store_of_three(const std::string& path) { wl::write_store(path, {{"c0", 40}, {"c1", 40}, {"c2", 21}}, true); }

int64_t chunk_id_of(SQLite::Database& db, const std::string& conv, int seq) {
  SQLite::Statement q(db,
                      "SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c USING (conversation_id) "
                      "WHERE c.name = ? AND cc.seq = ?");
  q.bind(1, conv);
  q.bind(2, seq);
  REQUIRE(q.executeStep());
  return q.getColumn(0).getInt64();
}

const uint32_t kPoison = 0x7fc0dead;

bool poisoned(const EngineBuffers& b, int64_t from, int64_t to) {
  for (int l = 0; l < b.model.n_layers; ++l) {
    for (int64_t i = from * b.model.kv_lora; i < to * b.model.kv_lora; ++i) {
      uint32_t u;
      std::memcpy(&u, &b.lc[l][static_cast<size_t>(i)], 4);
      if (u != kPoison) return false;
    }
  }
  return true;
}

struct Outcome {
  bool corrupt = false;
  std::string message;
};

// Loads `name`: either kCorrupt (positions [bad_from, bad_to) untouched in the
// buffers, the message naming the conversation) or bit-exact data.
Outcome load_checked(Store& s, const std::string& name, int64_t expect, int64_t bad_from, int64_t bad_to,
                     const std::string& ctx) {
  EngineBuffers got(wl::model(), wl::kCapacity);
  got.poison();
  Outcome o;
  try {
    const int64_t n = s.load(name, wl::model(), got.tokens.data(), wl::kCapacity, got.target());
    const std::string d = got.compare(wl::history_of(name).buffers, n);
    if (!d.empty()) FAIL(ctx << ": load returned wrong data: " << d);
    if (n != expect && n > expect) FAIL(ctx << ": load returned " << n << " tokens, more than the " << expect << " stored");
  } catch (const Error& e) {
    o.corrupt = true;
    o.message = e.what();
    if (e.code() != ErrorCode::kCorrupt) FAIL(ctx << ": error " << colikv::error_code_name(e.code()) << ": " << e.what());
    if (o.message.find("'" + name + "'") == std::string::npos) FAIL(ctx << ": message does not name " << name << ": " << o.message);
    if (bad_from >= 0 && !poisoned(got, bad_from, bad_to))
      FAIL(ctx << ": bytes of the corrupt chunk reached the caller's buffers");
  }
  return o;
}

bool verify_names(Store& s, const std::string& name, int64_t from, int64_t to) {
  for (const auto& p : s.verify().problems)
    if (p.conversation == name && p.first_pos <= from && p.end_pos >= to) return true;
  return false;
}

}  // namespace

// -------------------------------------------------------------------------
// Settings and schema edits: a store whose schema is not colikv's (triggers,
// a view in place of a table, an index, a generated column, CASCADE) is
// refused naming the object; colikv's own schema and SQLite's statistics are
// not.

TEST_CASE("untrusted: defensive settings are on by default", "[untrusted][bad_stores]") {
  CHECK(colikv::Options().defensive);
}

TEST_CASE("untrusted: a store with planted triggers is refused, and they never run", "[untrusted][bad_stores]") {
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

TEST_CASE("untrusted: a view in place of a table is refused with a clear error", "[untrusted][bad_stores]") {
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

TEST_CASE("hostile store: a schema that differs from colikv's is refused naming the object", "[hostile][bad_stores]") {
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

TEST_CASE("hostile store: the schema check accepts colikv's own schema and SQLite's statistics", "[hostile][bad_stores]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("analyzed.db");
  make_store(path);
  tamper(path, {"ANALYZE"});
  Store s(path, wl::options(false));
  CHECK(wl::check_content(s, "c0", 40) == "");
}

// -------------------------------------------------------------------------
// Counts and ranges: a conversation's count, its chunk list and the
// positions, sizes and seqs of its chunks disagree, are negative, are not
// integers or sit at the 64-bit limits: kCorrupt naming the conversation,
// never a read past the list, a wrapped range or a change.

TEST_CASE("hostile store: a count larger than the chunk list is corrupt, never read past the list", "[hostile][bad_stores]") {
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

TEST_CASE("hostile store: a chunk-list row deleted is reported naming the conversation and chunk", "[hostile][bad_stores]") {
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

TEST_CASE("hostile store: a chunk_meta row left for a chunk id not used yet is overwritten by the chunk that gets it",
          "[hostile][bad_stores]") {
  TempDir dir;
  const std::string path = dir.file("stale-meta.db");
  wl::write_store(path, {{"c0", 40}}, false);
  // A hand edit with foreign keys off leaves an index row for the id SQLite
  // gives the next chunk: other tokens, size and hashes than that chunk's.
  tamper(path, {"PRAGMA foreign_keys=OFF",
                "INSERT INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, chain_hash, "
                "digest) SELECT max(chunk_id) + 1, (SELECT min(model_id) FROM models), 'f32', X'', '[1,2,3]', 999, "
                "zeroblob(32), zeroblob(32) FROM chunks"});
  const int64_t next_id = [&] {
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    return db.execAndGet("SELECT max(chunk_id) + 1 FROM chunks").getInt64();
  }();
  {
    Store s(path, wl::options(false));
    const auto& b = wl::history_of("c1").buffers;
    s.append("c1", wl::model(), b.tokens.data(), 5, b.source());  // one chunk: it gets next_id
    CHECK(wl::check_content(s, "c1", 5).empty());
    const colikv::VerifyReport r = s.verify();
    for (const auto& p : r.problems) UNSCOPED_INFO(p.what);
    CHECK(r.ok());
  }
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  SQLite::Statement q(db,
                      "SELECT m.tokens = ch.tokens, m.payload_bytes = length(ch.payload), "
                      "m.chain_hash <> zeroblob(32) AND m.digest <> zeroblob(32) "
                      "FROM chunk_meta m JOIN chunks ch USING (chunk_id) WHERE chunk_id = ?");
  q.bind(1, next_id);
  REQUIRE(q.executeStep());
  CHECK(q.getColumn(0).getInt() == 1);
  CHECK(q.getColumn(1).getInt() == 1);
  CHECK(q.getColumn(2).getInt() == 1);
  CHECK(db.execAndGet("SELECT count(*) FROM conversation_chunks cc JOIN conversations c USING (conversation_id) "
                      "WHERE c.name = 'c1' AND cc.chunk_id = " + std::to_string(next_id)).getInt64() == 1);
}

TEST_CASE("hostile store: a negative count is corrupt for every reader and writer", "[hostile][bad_stores]") {
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

TEST_CASE("hostile store: text, a real or a blob where an integer is stored is corrupt, never read as a number",
          "[hostile][bad_stores]") {
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

TEST_CASE("hostile store: a count whose size overflows 64 bits is corrupt, never shown wrapped", "[hostile][bad_stores]") {
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
          "[hostile][bad_stores]") {
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

TEST_CASE("corruption: altered token ids, sizes, checksums, counts and chunk lists are reported", "[corruption][bad_stores]") {
  struct Case {
    const char* what;
    std::string sql;  // ?1 = chunk id of c0 seq 1 (positions [8, 16)), ?2 = conversation id of c0
    int64_t bad_from, bad_to;  // positions load must leave untouched (-1: none)
    bool load_may_succeed;     // a consistent shorter conversation
  };
  const std::vector<Case> cases = {
      {"a token id changed", "UPDATE chunks SET tokens = json_set(tokens, '$[3]', (json_extract(tokens, '$[3]') + 1) % 1000) WHERE chunk_id = ?1", 8, 16, false},
      {"token list malformed", "UPDATE chunks SET tokens = '[1,2,' WHERE chunk_id = ?1", 8, 16, false},
      {"token list one short", "UPDATE chunks SET tokens = json_remove(tokens, '$[7]') WHERE chunk_id = ?1", 8, 16, false},
      {"token id out of the vocabulary", "UPDATE chunks SET tokens = json_set(tokens, '$[0]', 5000) WHERE chunk_id = ?1", 8, 16, false},
      {"chunk n_tokens changed", "UPDATE chunks SET n_tokens = 7 WHERE chunk_id = ?1", 8, 16, false},
      {"raw_size changed", "UPDATE chunks SET raw_size = raw_size + 4 WHERE chunk_id = ?1", 8, 16, false},
      {"raw_size huge", "UPDATE chunks SET raw_size = 1099511627776 WHERE chunk_id = ?1", 8, 16, false},
      {"checksum changed", "UPDATE chunks SET checksum = (checksum + 1) % 4294967296 WHERE chunk_id = ?1", 8, 16, false},
      {"compression flag flipped", "UPDATE chunks SET compression = CASE compression WHEN 'zstd' THEN 'none' ELSE 'zstd' END WHERE chunk_id = ?1", 8, 16, false},
      {"payload truncated", "UPDATE chunks SET payload = substr(payload, 1, length(payload) / 2) WHERE chunk_id = ?1", 8, 16, false},
      {"payload empty", "UPDATE chunks SET payload = x'' WHERE chunk_id = ?1", 8, 16, false},
      {"first_pos changed", "UPDATE chunks SET first_pos = 9 WHERE chunk_id = ?1", 8, 16, false},
      {"count larger than the chunks", "UPDATE conversations SET token_count = 47 WHERE conversation_id = ?2", -1, -1, false},
      {"count smaller than the chunks", "UPDATE conversations SET token_count = 30 WHERE conversation_id = ?2", -1, -1, true},
      {"chunk list row deleted", "DELETE FROM conversation_chunks WHERE conversation_id = ?2 AND seq = 1", 8, 16, false},
      {"chunk list seq moved", "UPDATE conversation_chunks SET seq = 9 WHERE conversation_id = ?2 AND seq = 1", 8, 16, false},
      {"chunk list points at another conversation's chunk", "UPDATE conversation_chunks SET chunk_id = (SELECT chunk_id FROM conversation_chunks cc JOIN conversations c USING (conversation_id) WHERE c.name = 'c1' AND cc.seq = 1) WHERE conversation_id = ?2 AND seq = 1", 8, 16, false},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      colikv_test::RamTmpdir ram;
  TempDir dir;
      const std::string path = dir.file("alter.db");
      make_store_of_three(path);
      {
        SQLite::Database db(path, SQLite::OPEN_READWRITE);
        db.exec("PRAGMA foreign_keys = OFF");
        const int64_t chunk = chunk_id_of(db, "c0", 1);
        const int64_t conv = db.execAndGet("SELECT conversation_id FROM conversations WHERE name = 'c0'").getInt64();
        SQLite::Statement u(db, c.sql);
        u.bind(1, chunk);
        if (c.sql.find("?2") != std::string::npos) u.bind(2, conv);
        REQUIRE(u.exec() >= 1);
      }
      Store s(path, wl::options(true));
      Outcome o = load_checked(s, "c0", 40, c.bad_from, c.bad_to, c.what);
      if (!c.load_may_succeed) {
        CHECK(o.corrupt);
        if (c.bad_from >= 0)
          CHECK(o.message.find("[" + std::to_string(c.bad_from) + ", ") != std::string::npos);
      }
      // verify names c0 and a range of positions.
      const auto report = s.verify();
      bool named = false;
      for (const auto& p : report.problems)
        if (p.conversation == "c0" && p.first_pos >= 0 && p.end_pos > p.first_pos) named = true;
      CHECK(named);
      // The others are untouched and load bit for bit.
      load_checked(s, "c2", 21, -1, -1, std::string(c.what) + ": c2");
      if (c.sql.find("'c1'") == std::string::npos) load_checked(s, "c1", 40, -1, -1, std::string(c.what) + ": c1");
    }
  }
}

// -------------------------------------------------------------------------
// Sizes and memory: chunks, titles and zstd frames larger than colikv
// writes, or claiming to be: refused before anything is allocated for them.

TEST_CASE("hostile store: sizes no colikv writes are corrupt before anything is allocated for them", "[hostile][bad_stores]") {
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

TEST_CASE("hostile store: the chunk sizes colikv writes stay within what it accepts on reading", "[hostile][bad_stores]") {
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

TEST_CASE("untrusted: oversized blobs and hostile zstd frames are corrupt, memory stays bounded", "[untrusted][bad_stores]") {
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

// -------------------------------------------------------------------------
// Chunk payloads: flipped bits, an unknown compression, values that are not
// their key's, chain hashes that are not the chunk's: caught, or harmless
// (bit-exact), and never linked or matched.

TEST_CASE("corruption: every single-bit flip of a chunk payload is caught or harmless", "[corruption][bad_stores]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("flip.db");
  make_store_of_three(path);
  std::string original;
  int64_t id;
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    id = chunk_id_of(db, "c0", 2);
    SQLite::Statement q(db, "SELECT payload FROM chunks WHERE chunk_id = ?");
    q.bind(1, id);
    REQUIRE(q.executeStep());
    original.assign(static_cast<const char*>(q.getColumn(0).getBlob()), static_cast<size_t>(q.getColumn(0).getBytes()));
  }
  REQUIRE(original.size() > 16);
  int caught = 0, harmless = 0;
  Store s(path, wl::options(true));
  for (size_t i = 0; i < original.size(); ++i) {
    std::string bad = original;
    bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
    {
      SQLite::Database db(path, SQLite::OPEN_READWRITE);
      SQLite::Statement u(db, "UPDATE chunks SET payload = ? WHERE chunk_id = ?");
      u.bind(1, bad.data(), static_cast<int>(bad.size()));
      u.bind(2, id);
      u.exec();
    }
    Outcome o = load_checked(s, "c0", 40, 16, 24, "payload byte " + std::to_string(i));
    if (o.corrupt) {
      ++caught;
      if (o.message.find("[16, 24)") == std::string::npos) FAIL("byte " << i << ": message has no range: " << o.message);
    } else {
      ++harmless;
    }
  }
  CHECK(verify_names(s, "c0", 16, 24));
  load_checked(s, "c1", 40, -1, -1, "c1 beside the corrupt chunk");
  load_checked(s, "c2", 21, -1, -1, "c2 beside the corrupt chunk");
  std::printf("corruption: %zu payload bit flips: %d caught, %d decoded to the right bytes anyway\n", original.size(),
              caught, harmless);
  CHECK(caught > 0);

  // colikv verify names the conversation and exits 1.
  const std::string out = dir.file("verify.out");
  const int status = std::system((std::string(COLIKV_TOOL_PATH) + " verify " + path + " > " + out + " 2>&1").c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  const std::string text = colikv_test::read_file(out);
  CHECK(text.find("'c0'") != std::string::npos);
}

TEST_CASE("hostile store: a compression name load refuses is refused by fork and truncate too", "[hostile][bad_stores]") {
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
          "[hostile][bad_stores]") {
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
          "[hostile][bad_stores]") {
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

// -------------------------------------------------------------------------
// File kinds and raw bytes: what is at the store's path is not a store file
// (a FIFO, a directory, an empty or unreadable file), or its bytes are
// flipped at random: an error, never a hang, a crash or wrong floats.

TEST_CASE("hostile store: FIFOs, directories, empty and unreadable files get a clear error, never a hang",
          "[hostile][bad_stores]") {
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

TEST_CASE("corruption: random bytes of the database file flipped never crash or return wrong floats",
          "[corruption][bad_stores]") {
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("pages.db");
  make_store_of_three(path);
  const std::string pristine = colikv_test::read_file(path);
  std::mt19937 rng(7);
  const int rounds = std::getenv("COLIKV_LONG_TESTS") ? 2000 : 200;
  int open_failed = 0, load_failed = 0, loads_exact = 0, verify_threw = 0, verify_flagged = 0;
  for (int r = 0; r < rounds; ++r) {
    std::string bytes = pristine;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % bytes.size();
      bytes[at] = static_cast<char>(bytes[at] ^ (1 + rng() % 255));
    }
    colikv_test::write_file(path, bytes);
    try {
      Store s(path, wl::options(true));
      for (auto [name, len] : std::vector<std::pair<std::string, int64_t>>{{"c0", 40}, {"c1", 40}, {"c2", 21}}) {
        EngineBuffers got(wl::model(), wl::kCapacity);
        got.poison();
        try {
          const int64_t n = s.load(name, wl::model(), got.tokens.data(), wl::kCapacity, got.target());
          const std::string d = got.compare(wl::history_of(name).buffers, n);
          if (!d.empty()) FAIL("round " << r << ": " << name << " loaded wrong data: " << d);
          if (n > len) FAIL("round " << r << ": " << name << " loaded " << n << " tokens");
          ++loads_exact;
        } catch (const Error&) {
          ++load_failed;
        }
      }
      try {
        if (!s.verify().ok()) ++verify_flagged;
      } catch (const Error&) {
        ++verify_threw;
      }
    } catch (const Error&) {
      ++open_failed;
    }
  }
  std::printf("corruption: %d rounds of random byte flips: %d opens refused, %d loads refused, %d loads exact, "
              "verify flagged %d, threw %d\n",
              rounds, open_failed, load_failed, loads_exact, verify_flagged, verify_threw);
  CHECK(open_failed + load_failed + verify_flagged > 0);
}

// -------------------------------------------------------------------------
// .coli_kv files: hostile headers and records, and a file cut while it is
// read: kInvalidArgument (or kIO) naming the file, nothing stored, memory
// bounded.

TEST_CASE("untrusted: hostile .coli_kv files are refused naming the file and the problem", "[untrusted][bad_stores]") {
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

TEST_CASE("untrusted: a .coli_kv file cut while it is inspected is an error, not a clean report", "[untrusted][bad_stores]") {
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

// Found by the mutation run below (under clang's order of its draws): an
// import of a new model refused at a record it read after the model's row
// was recorded rolled that row back, but the Store kept the row it had read,
// and SQLite gave its id to the next model recorded. The next import, of
// another model, was accepted, and every read of it then checked its chain
// hashes against the first model's signature: kCorrupt "chunk hash does not
// match" on export, for a file the import had taken.
TEST_CASE("untrusted: an import of another model after a refused import of a new model reads back exactly",
          "[untrusted][bad_stores]") {
  TempDir dir;
  colikv::Options o;
  o.threads = 1;
  Store s(dir.file("s.db"), o);
  colikv::ModelSignature first = colikv_test::tiny_model(), second = colikv_test::tiny_model();
  first.kv_lora = 6;
  second.vocab = 1023;
  colikv_test::EngineBuffers bad(first, 12), good(second, 12);
  bad.fill(0, 12, 5);
  bad.tokens = colikv_test::make_tokens(12, first.vocab, 5);
  bad.tokens[1] = first.vocab + 7;
  good.fill(0, 12, 6);
  good.tokens = colikv_test::make_tokens(12, second.vocab, 6);
  colikv_test::write_coli_kv(dir.file("bad.coli_kv"), bad, 12);
  colikv_test::write_coli_kv(dir.file("good.coli_kv"), good, 12);

  colikv::ImportOptions io;
  io.id = "bad";
  const colikv_test::Outcome refused =
      colikv_test::outcome_of([&] { colikv::import_coli_kv(s, dir.file("bad.coli_kv"), io); });
  CHECK(refused.code == ErrorCode::kInvalidArgument);
  CHECK(refused.message.find(dir.file("bad.coli_kv") + ": record 1: token id 1007 is outside [0, 1000)") !=
        std::string::npos);
  CHECK_FALSE(s.exists("bad"));

  io.id = "good";
  REQUIRE_NOTHROW(colikv::import_coli_kv(s, dir.file("good.coli_kv"), io));
  colikv::ExportOptions eo;
  const colikv_test::Outcome exported =
      colikv_test::outcome_of([&] { colikv::export_coli_kv(s, "good", dir.file("back.coli_kv"), eo); });
  INFO(exported.message);
  REQUIRE(exported.code == ErrorCode::kOk);
  CHECK(colikv_test::read_file(dir.file("back.coli_kv")) == colikv_test::read_file(dir.file("good.coli_kv")));
  CHECK(colikv_test::loads_as(s, "good", good, 12) == "");
  CHECK(s.verify().ok());
}

// -------------------------------------------------------------------------
// Fuzz targets: a short deterministic mutation run of the fuzz target bodies
// (fuzz/fuzz_targets.h); the long runs are libFuzzer's (.ci/fuzz.sh).

TEST_CASE("untrusted: a short mutation run of the fuzz targets", "[untrusted][fuzz][bad_stores]") {
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
  // What each mutant gave, beside the target body's own checks: an import is
  // refused with an error naming the file, or takes in exactly the records
  // the file holds (as an export gives them back).
  colikv::Options co;
  co.threads = 1;
  co.synchronous = colikv::Synchronous::kNormal;
  Store checked(dir.file("checked.db"), co);
  const std::string mutant = dir.file("mutant.coli_kv"), back = dir.file("back.coli_kv");
  const auto H = static_cast<size_t>(colikv::kColiKvHeaderBytes);
  int refused = 0, taken = 0;
  const auto check_import = [&](int i, const std::string& m) {
    colikv_test::write_file(mutant, m);
    colikv::ImportOptions io;
    io.id = "m";
    const colikv_test::Outcome r = colikv_test::outcome_of([&] { colikv::import_coli_kv(checked, mutant, io); });
    if (r.code != ErrorCode::kOk) {
      ++refused;
      if (r.message.find(mutant) == std::string::npos)
        FAIL("mutant " << i << ": the refusal does not name the file: " << r.message);
      return;
    }
    ++taken;
    colikv::ExportOptions eo;
    eo.force = true;
    colikv::export_coli_kv(checked, "m", back, eo);
    const std::string out = colikv_test::read_file(back);
    if (out.size() < H || m.size() < out.size() || m.compare(H, out.size() - H, out, H, std::string::npos) != 0)
      FAIL("mutant " << i << ": imported, but reads back other records than the file holds");
    checked.remove("m");
  };
  for (int i = 0; i < runs; ++i) {
    std::string m = seed;
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      const unsigned kind = rng() % 4;
      const size_t at = rng() % m.size();
      if (kind == 0) m[at] = static_cast<char>(rng());
      if (kind == 1) m.resize(at);
      if (kind == 2 && at < 40) m[at & ~size_t{3}] = static_cast<char>(rng() % 3 ? rng() % 8 : 0xff);
      if (kind == 3) {
        // One draw after the other: as two arguments of one call their order
        // would be the compiler's, and the mutants another compiler's.
        const size_t length = rng() % 64;
        const char fill = static_cast<char>(rng());
        m.insert(at, std::string(length, fill));
      }
      if (m.empty()) m = seed;
    }
    colikv_fuzz::coli_kv_one(reinterpret_cast<const uint8_t*>(m.data()), m.size());
    check_import(i, m);
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
  // The unmutated input decodes to the values encoded: what a mutant of the
  // same shape must give when it decodes at all.
  const colikv_fuzz::ChunkDecodeResult original =
      colikv_fuzz::chunk_decode_one(reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size());
  REQUIRE(original.decoded);
  REQUIRE(original.values.size() == vals.size());
  REQUIRE(std::memcmp(original.values.data(), vals.data(), vals.size() * sizeof(float)) == 0);
  int corrupt = 0, decoded = 0, reshaped = 0;
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
    const colikv_fuzz::ChunkDecodeResult r =
        colikv_fuzz::chunk_decode_one(reinterpret_cast<const uint8_t*>(m.data()), m.size());
    if (!r.decoded) {
      // Only a cut below the 11 bytes that name a shape is no input at all.
      if (m.size() < 11) continue;
      ++corrupt;
      if (r.code != ErrorCode::kCorrupt || r.message.empty())
        FAIL("chunk mutant " << i << ": error " << colikv::error_code_name(r.code) << ": " << r.message);
      continue;
    }
    ++decoded;
    // The checksum covers the token ids (derived from n_tokens) and the raw
    // bytes: a decode passes only for the same count and size. The planes'
    // split is the caller's word (the chunk row's model), not the payload's:
    // the same bytes under another split are no error the payload can show.
    if (r.n_tokens != original.n_tokens || r.raw_size != original.raw_size ||
        r.planes * r.width != original.planes * original.width)
      FAIL("chunk mutant " << i << ": decoded under another count or size (" << r.n_tokens << " tokens, "
                           << r.raw_size << " bytes)");
    if (r.planes != original.planes) {
      ++reshaped;
      continue;
    }
    if (r.values.size() != original.values.size() ||
        std::memcmp(r.values.data(), original.values.data(), r.values.size() * sizeof(float)) != 0)
      FAIL("chunk mutant " << i << ": decoded to other values than the chunk's");
  }
  std::printf("untrusted: %d mutated .coli_kv files (%d refused, %d imported exactly) and %d mutated chunks "
              "(%d corrupt, %d decoded to the original values, %d under another planes' split) ran through the "
              "fuzz targets\n",
              runs, refused, taken, runs * 4, corrupt, decoded - reshaped, reshaped);
  CHECK(refused > 0);
  CHECK(taken > 0);
  CHECK(corrupt > 0);
}

TEST_CASE("untrusted: a short mutation run of the store fuzz target", "[untrusted][fuzz][bad_stores]") {
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
    colikv::Options to = o;
    to.tenant = "t";  // the tenant rows and another tenant's chain for the mutants
    Store t(path, to);
    t.append("c0", wl::model(), b.tokens.data(), 11, b.source());
    t.set_tenant_limits({int64_t{1} << 20, int64_t{30} * 86400000});  // limit columns for the mutants to change
  }
  const std::string seed = colikv_test::read_file(path);
  std::mt19937 rng(7);
  const int runs = colikv_test::long_tests() ? 3000 : 300;
  // What each mutant gave, beside the target body's own checks: every
  // conversation of both tenants, read-only, loads a clean error, or a prefix
  // of the one history all of the seed's conversations are cut from.
  const auto& original = wl::history_of("c0").buffers;
  const std::string copy = dir.file("mutant.db");
  int errors = 0, exact = 0;
  const auto check_loads = [&](int i, const std::string& m) {
    for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((copy + suffix).c_str());
    colikv_test::write_file(copy, m);
    for (const char* tenant : {"", "t"}) {
      colikv::Options ro;
      ro.threads = 1;
      ro.read_only = true;
      ro.busy_timeout_ms = 0;
      ro.create_if_missing = false;
      ro.create_tenant_if_missing = false;
      ro.tenant = tenant;
      std::vector<colikv::ConversationInfo> listed;
      std::unique_ptr<Store> r;
      const colikv_test::Outcome opened = colikv_test::outcome_of([&] {
        r = std::make_unique<Store>(copy, ro);
        listed = r->list(colikv::ListOptions{1000, 0});
      });
      if (opened.code != ErrorCode::kOk) {
        ++errors;
        if (opened.message.empty()) FAIL("store mutant " << i << ": an error without a message");
        continue;
      }
      for (const colikv::ConversationInfo& c : listed) {
        EngineBuffers got(wl::model(), wl::kCapacity);
        got.poison();
        int64_t n = 0;
        const colikv_test::Outcome loaded = colikv_test::outcome_of(
            [&] { n = r->load(c.id, wl::model(), got.tokens.data(), wl::kCapacity, got.target()); });
        if (loaded.code != ErrorCode::kOk) {
          ++errors;
          if (loaded.message.empty()) FAIL("store mutant " << i << ": an error without a message");
          continue;
        }
        ++exact;
        if (n > 19) FAIL("store mutant " << i << ": '" << c.id << "' loaded " << n << " tokens; the seed has 19");
        const std::string d = got.compare(original, n);
        if (!d.empty()) FAIL("store mutant " << i << ": '" << c.id << "' loaded other data: " << d);
      }
    }
  };
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
    check_loads(i, m);
    colikv_fuzz::store_one(reinterpret_cast<const uint8_t*>(m.data()), m.size());
  }
  std::printf("untrusted: %d mutated store files ran through the store fuzz target (%d loads bit-exact, %d clean "
              "errors)\n",
              runs, exact, errors);
  CHECK(exact > 0);
  CHECK(errors > 0);
}
