// What an operation reads from the file, counted page by page through the
// test VFS shim (tests/fault_vfs.h): work that should not depend on how long a
// conversation is must not read its committed KV payloads. A payload is a blob
// spread over overflow pages, and SQLite walks them whenever a statement
// evaluates the column itself (even just for "payload IS NULL").
#include <catch2/catch.hpp>

#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "colikv/store.h"
#include "fault_vfs.h"
#include "store/kv_planes.h"
#include "sqlite/sqlite_catalog.h"
#include "store/store_impl.h"
#include "test_support.h"

using colikv::ModelSignature;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::FaultVfs;
using colikv_test::TempDir;

TEST_CASE("append, info and count read a few pages, not the committed payloads", "[store][io-cost]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  const ModelSignature m = colikv_test::wide_model();
  const int64_t C = 64;  // a chunk holds ~440 KB raw
  const int64_t chunks = 40;
  const int64_t n = chunks * C;  // chunk-aligned: the next append replaces no chunk
  EngineBuffers b(m, n + 1);
  b.fill(0, n + 1, 11);
  colikv::Options o = colikv_test::chunked_options(m, C);
  int64_t payload_pages = 0;
  {
    Store s(path, o);
    s.append("long", m, b.tokens.data(), n, b.source());
    const int64_t page = 65536;
    payload_pages = s.stats().total.stored_bytes / page;
  }
  REQUIRE(payload_pages >= 5 * chunks);  // the payloads span many pages...

  o.vfs_name = FaultVfs::kName;
  FaultVfs& vfs = FaultVfs::get();
  vfs.reset();
  Store s(path, o);
  REQUIRE(s.count("long") == n);  // schema and conversation row read once

  vfs.reset();
  s.append("long", m, b.tokens.data(), n + 1, b.source());
  const int64_t append_reads = vfs.count(FaultVfs::kRead);
  vfs.reset();
  const colikv::ConversationInfo info = s.info("long");
  const int64_t info_reads = vfs.count(FaultVfs::kRead);
  CHECK(info.tokens == n + 1);
  vfs.reset();
  CHECK(s.count("long") == n + 1);
  const int64_t count_reads = vfs.count(FaultVfs::kRead);

  // ...and none of these operations walks them: each reads index and leaf
  // pages (one leaf per chunk row: a row keeps the head of its blob locally).
  INFO("payload pages " << payload_pages << ", append read " << append_reads << ", info " << info_reads
                        << ", count " << count_reads);
  CHECK(append_reads < payload_pages / 2);
  CHECK(info_reads < payload_pages / 2);
  CHECK(count_reads < 8);
}

namespace {

// Appends positions [0, n) of b as conversation id through the store's own
// append steps, recording the thread each chunk is encoded on.
std::set<std::thread::id> encoding_threads(Store& s, const std::string& id, const EngineBuffers& b, int64_t n) {
  std::set<std::thread::id> threads;
  std::mutex mu;
  colikv::detail::AppendRequest req;
  req.id = id;
  req.model = b.model;
  req.len = n;
  req.tokens = b.tokens.data();
  const colikv::KvSource kv = b.source();
  req.produce = [&](int64_t first, int64_t count, colikv::detail::ProducedChunk& out) {
    {
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    }
    out.encoded = colikv::detail::encode_chunk(count, out.tokens.data(), colikv::detail::engine_planes(b.model, kv, first),
                                               1, out.precision, &out.stored_digests);
  };
  colikv::detail::StoreAccess::append(s, req);  // as one call of s
  return threads;
}

}  // namespace

TEST_CASE("a small append is encoded on the calling thread with its statement journal in memory", "[store][io-cost]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();  // 292 bytes a token
  EngineBuffers b(m, 8192);
  b.fill(0, 8192, 3);
  colikv::Options o;
  o.threads = 2;
  Store s(dir.file("s.db"), o);
  // A hand-off to the pool and back cost more than encoding a few kilobytes.
  CHECK(encoding_threads(s, "small", b, 48) == std::set<std::thread::id>{std::this_thread::get_id()});
  // So does one chunk alone (1,024 tokens, 299 KB): the pool gains nothing for it.
  CHECK(encoding_threads(s, "one chunk", b, 1024) == std::set<std::thread::id>{std::this_thread::get_id()});
  // Several large chunks still go to the pool (2.4 MB here).
  CHECK(encoding_threads(s, "large", b, 8192).count(std::this_thread::get_id()) == 0);
  // On disk, SQLite opened and unlinked a temporary file for every append.
  SQLite::Database& db =
      static_cast<colikv::detail::SqliteCatalog&>(colikv::detail::StoreAccess::catalog(s)).database();
  CHECK(db.execAndGet("PRAGMA temp_store").getInt() == 2);
}

namespace {

// How often SQLite has prepared again the statements the store's connection
// holds (sqlite3_stmt_status, SQLITE_STMTSTATUS_REPREPARE), summed.
int64_t reprepares(Store& s) {
  sqlite3* db = static_cast<colikv::detail::SqliteCatalog&>(colikv::detail::StoreAccess::catalog(s))
                    .database()
                    .getHandle();
  int64_t n = 0;
  for (sqlite3_stmt* q = sqlite3_next_stmt(db, nullptr); q; q = sqlite3_next_stmt(db, q))
    n += sqlite3_stmt_status(q, SQLITE_STMTSTATUS_REPREPARE, 0);
  return n;
}

}  // namespace

TEST_CASE("small appends keep their prepared statements: a read transaction expires none", "[store][io-cost]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers b(m, 48);
  b.fill(0, 48, 5);
  Store s(dir.file("s.db"));
  s.append("c0", m, b.tokens.data(), 48, b.source());  // prepares them
  const int64_t before = reprepares(s);
  for (int i = 1; i <= 10; ++i) s.append("c" + std::to_string(i), m, b.tokens.data(), 48, b.source());
  // PRAGMA query_only around each read transaction expired every statement
  // of the connection: each append prepared its dozen statements again.
  CHECK(reprepares(s) - before == 0);
}

TEST_CASE("a read transaction refuses a write through a prepared statement too, and a read-only store stays so",
          "[store][io-cost]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers b(m, 8);
  b.fill(0, 8, 5);
  const std::string path = dir.file("s.db");
  {
    Store s(path);
    s.append("c", m, b.tokens.data(), 8, b.source());
    colikv::detail::Catalog& c = colikv::detail::StoreAccess::catalog(s);
    {
      auto txn = c.begin(colikv::detail::Catalog::Access::kWrite, "test");
      c.free_unused_chunks({999999});  // its DELETE prepared (and cached) outside a read transaction
      txn->commit();
    }
    colikv::ErrorCode code = colikv::ErrorCode::kOk;
    {
      auto snapshot = c.begin(colikv::detail::Catalog::Access::kRead, "test");
      try {
        c.free_unused_chunks({999999});
      } catch (const colikv::Error& e) {
        code = e.code();
      }
    }
    CHECK(code == colikv::ErrorCode::kReadOnly);
    CHECK(s.count("c") == 8);
  }
  colikv::Options ro;
  ro.read_only = true;
  Store r(path, ro);
  CHECK(r.count("c") == 8);
  r.stats();  // in a read transaction
  // Its end turned PRAGMA query_only off: the read-only store's connection took writes.
  SQLite::Database& db =
      static_cast<colikv::detail::SqliteCatalog&>(colikv::detail::StoreAccess::catalog(r)).database();
  CHECK(db.execAndGet("PRAGMA query_only").getInt() == 1);
}

namespace {

// The SQL text of every statement a SQLite Store's connection runs while the
// object lives (sqlite3_trace_v2).
class StatementLog {
 public:
  explicit StatementLog(Store& s)
      : db_(static_cast<colikv::detail::SqliteCatalog&>(colikv::detail::StoreAccess::catalog(s))
                .database()
                .getHandle()) {
    sqlite3_trace_v2(db_, SQLITE_TRACE_STMT, &StatementLog::note, &run_);
  }
  ~StatementLog() { sqlite3_trace_v2(db_, 0, nullptr, nullptr); }
  StatementLog(const StatementLog&) = delete;
  StatementLog& operator=(const StatementLog&) = delete;
  const std::vector<std::string>& run() const { return run_; }
  sqlite3* db() const { return db_; }

 private:
  static int note(unsigned, void* out, void* q, void*) {
    static_cast<std::vector<std::string>*>(out)->push_back(sqlite3_sql(static_cast<sqlite3_stmt*>(q)));
    return 0;
  }
  sqlite3* db_;
  std::vector<std::string> run_;
};

}  // namespace

TEST_CASE("a new conversation's append of a model the store has read looks it up no more", "[store][io-cost]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers b(m, 48);
  b.fill(0, 48, 5);
  Store s(dir.file("s.db"));
  s.append("c0", m, b.tokens.data(), 48, b.source());  // stores the model row
  s.append("c1", m, b.tokens.data(), 48, b.source());  // reads it
  int64_t model_reads = 0;
  {
    const StatementLog log(s);
    s.append("c2", m, b.tokens.data(), 48, b.source());
    for (const std::string& q : log.run()) model_reads += q.find("FROM models") != std::string::npos;
    CHECK(!log.run().empty());  // the log saw the append's statements
  }
  CHECK(s.count("c2") == 48);
  CHECK(model_reads == 0);  // the row the first append read stands: a model row never changes
}

TEST_CASE("a new conversation's append of new content runs a few statements", "[store][io-cost]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers b(m, 48);
  b.fill(0, 48, 5);
  Store s(dir.file("s.db"));
  s.append("c0", m, b.tokens.data(), 48, b.source());  // stores the model row
  b.tokens = colikv_test::make_tokens(48, m.vocab, 6);
  s.append("c1", m, b.tokens.data(), 48, b.source());  // reads it, and prepares the statements
  b.tokens = colikv_test::make_tokens(48, m.vocab, 7);  // other tokens again: a chunk of its own
  std::vector<std::string> run;
  sqlite3* db = nullptr;
  {
    const StatementLog log(s);
    s.append("c2", m, b.tokens.data(), 48, b.source());
    run = log.run();
    db = log.db();
  }
  CHECK(s.count("c2") == 48);
  sqlite3_stmt* g = nullptr;
  sqlite3_prepare_v2(db, "SELECT generation, token_count FROM conversations WHERE name = 'c2'", -1, &g, nullptr);
  REQUIRE(sqlite3_step(g) == SQLITE_ROW);
  CHECK(sqlite3_column_int64(g, 0) == 1);  // one write: created with its count
  CHECK(sqlite3_column_int64(g, 1) == 48);
  sqlite3_finalize(g);
  std::string all;
  for (const std::string& q : run) all += q + "\n";
  INFO(all);
  // The read snapshot (its BEGIN, the conversation, the stored digests, its
  // end) and the write (BEGIN, the conversation inserted with its count, the
  // chunk, its chunk_meta row, the link, the tenant's limits, COMMIT).
  CHECK(run.size() >= 2);  // the log saw the append's statements
  CHECK(run.size() <= 11);
}

TEST_CASE("an expiry runs a few statements per conversation it deletes", "[store][io-cost]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  EngineBuffers b(m, 48);
  b.fill(0, 48, 5);
  Store s(dir.file("s.db"));
  const int first = 1, small = 4, large = 12;
  for (int i = 0; i < first + small + large + 1; ++i) {
    b.tokens = colikv_test::make_tokens(48, m.vocab, 100 + i);  // a chunk of its own each
    s.append("c" + std::to_string(i), m, b.tokens.data(), 48, b.source());
  }
  sqlite3* db = StatementLog(s).db();
  const int64_t day = 86400 * 1000;
  // The first `n` conversations look idle for long; returns how many the
  // expiry deleted and its statements.
  const auto expire_first = [&](int n) {
    for (int i = 0; i < n; ++i) {
      const std::string sql = "UPDATE conversations SET last_used_ms = 0 WHERE name = 'c" + std::to_string(i) + "'";
      REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    }
    const StatementLog log(s);
    const colikv::ExpiryReport r = s.expire(day);
    CHECK(r.chunks == static_cast<int64_t>(r.conversations.size()));
    return std::make_pair(static_cast<int64_t>(r.conversations.size()), log.run());
  };
  CHECK(expire_first(first).first == first);  // its statements prepared
  const auto few = expire_first(first + small);
  const auto many = expire_first(first + small + large);
  std::string all;
  for (const std::string& q : many.second) all += q + "\n";
  INFO(all);
  CHECK(few.first == small);
  REQUIRE(many.first == large);
  CHECK(s.exists("c" + std::to_string(first + small + large)));
  CHECK_FALSE(s.exists("c0"));
  // Each conversation deleted, of one chunk: its chunks claimed and counted,
  // its generation checked, its chunk list and row deleted, its chunk freed
  // (5), and the foreign keys' actions SQLite runs as statements of their own
  // (the row's forks and chunk list, the chunk's chunk_meta row: 3). No
  // savepoint, no second read of its row or of its chunk list.
  const int64_t per_conversation =
      (static_cast<int64_t>(many.second.size()) - static_cast<int64_t>(few.second.size())) / (large - small);
  CHECK(per_conversation >= 1);  // the log saw the deletes
  CHECK(per_conversation <= 8);
}
