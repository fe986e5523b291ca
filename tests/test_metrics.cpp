// Metrics (colikv/metrics.h): what a Store counts, the process's totals, the
// store's gauges, and their text in Prometheus's format, checked by promtool.
#include <SQLiteCpp/Database.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.h"
#include "colikv/colikv.h"
#include "colikv/copy.h"
#include "colikv/metrics.h"
#include "colikv/store.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::Metrics;
using colikv::Store;
using namespace colikv_test;

namespace {

// This process's totals of one tenant (zero when it has none yet).
Metrics process_of(const std::string& tenant) {
  for (const Metrics& m : colikv::process_metrics())
    if (m.tenant == tenant) return m;
  Metrics none;
  none.tenant = tenant;
  return none;
}

uint64_t errors_of(const Metrics& m, ErrorCode code) { return m.errors[-static_cast<int>(code)]; }

// promtool check metrics of the text: "" when it passes, else what it said.
std::string promtool_problems(const TempDir& dir, const std::string& text) {
  const std::string promtool = COLIKV_PROMTOOL;
  if (promtool.empty())
    FAIL("no promtool was found when configuring (Debian package prometheus): install it and reconfigure");
  const std::string file = dir.file("metrics.prom");
  write_file(file, text);
  const Run r = run_program("/bin/sh", {"-c", "'" + promtool + "' check metrics < '" + file + "'"});
  if (r.code == 0 && r.out.empty() && r.err.empty()) return "";
  return "exit " + std::to_string(r.code) + "\n" + r.out + r.err + "\n--- text\n" + text;
}

}  // namespace

TEST_CASE("metrics: a Store counts appends, loads and matches of its tenant, and the process keeps them after close") {
  TempDir dir;
  const colikv::ModelSignature m = tiny_model();
  const uint64_t raw = static_cast<uint64_t>(m.record_bytes());
  const Metrics before = process_of("metrics-a");
  EngineBuffers h = history(m, 40, 7);
  auto s = std::make_unique<Store>(dir.file("s.db"), tenant_options(m, "metrics-a"));
  append(*s, "a", h, 10);
  append(*s, "a", h, 20);
  append(*s, "b", h, 20);  // the same rows: its full chunks are a's

  EngineBuffers out(m, 40);
  REQUIRE(s->load("a", m, out.tokens.data(), 40, out.target()) == 20);
  const colikv::PrefixMatch found = s->match(m, h.tokens.data(), 30);
  REQUIRE(found.tokens == 20);
  CHECK(s->match(m, token_run(900, 8).data(), 8).tokens == 0);
  CHECK(error_code_of([&] { s->load("missing", m, out.tokens.data(), 40, out.target()); }) == ErrorCode::kNotFound);

  const Metrics c = s->metrics();
  CHECK(c.tenant == "metrics-a");
  CHECK(c.appends == 3);
  CHECK(c.append_turns == 3);
  CHECK(c.append_tokens == 40);
  CHECK(c.append_raw_bytes == 40 * raw);
  CHECK(c.append_stored_bytes > 0);
  CHECK(c.append_shared_bytes >= 16 * raw);  // b's four full chunks
  CHECK(c.loads == 2);
  CHECK(c.load_tokens == 20);
  CHECK(c.load_bytes == 20 * raw);
  CHECK(c.match_queries == 2);
  CHECK(c.match_answers == 1);
  CHECK(c.match_tokens == 20);
  CHECK(errors_of(c, ErrorCode::kNotFound) == 1);
  CHECK(c.append_seconds.count == 3);
  CHECK(c.append_seconds.sum > 0);
  CHECK(c.load_seconds.count == 2);
  CHECK(c.match_seconds.count == 2);
  REQUIRE(c.append_seconds.counts.size() == c.append_seconds.upper_bounds.size() + 1);

  s.reset();  // closed: the process's totals keep its counts
  const Metrics after = process_of("metrics-a");
  CHECK(after.appends - before.appends == 3);
  CHECK(after.append_tokens - before.append_tokens == 40);
  CHECK(after.loads - before.loads == 2);
  CHECK(errors_of(after, ErrorCode::kNotFound) - errors_of(before, ErrorCode::kNotFound) == 1);
  CHECK(after.append_seconds.count - before.append_seconds.count == 3);
}

TEST_CASE("metrics: a failing call is counted by the code it throws, and its writes are not") {
  TempDir dir;
  const colikv::ModelSignature m = tiny_model();
  EngineBuffers h = history(m, 20, 3);
  EngineBuffers other = history(m, 20, 4);
  Store s(dir.file("s.db"), chunked_options(m, 4));
  append(s, "a", h, 8);
  CHECK(error_code_of([&] { s.create("a", m); }) == ErrorCode::kConflict);
  CHECK(error_code_of([&] { append(s, "a", other, 12); }) == ErrorCode::kDiverged);
  // Not a colikv::Error of the call's own: an error caught inside a call (a
  // tail's evicted rows, a nested lookup) must not count; only what it throws.
  const Metrics c = s.metrics();
  CHECK(errors_of(c, ErrorCode::kConflict) == 1);
  CHECK(c.conflicts == 1);
  CHECK(errors_of(c, ErrorCode::kDiverged) == 1);
  CHECK(c.append_turns == 1);
  CHECK(c.append_tokens == 8);
  uint64_t all = 0;
  for (uint64_t e : c.errors) all += e;
  CHECK(all == 2);
}

TEST_CASE("metrics: an error made on a pool worker is counted by its code by the call that throws it") {
  TempDir dir;
  const colikv::ModelSignature m = wide_model();
  const std::string path = dir.file("s.db");
  colikv::Options o = chunked_options(m, 128);
  o.threads = 2;
  EngineBuffers h = history(m, 256, 5);
  {
    Store s(path, o);
    append(s, "a", h, 256);
  }
  {
    // A byte of the first chunk's payload flipped: chunks this large are
    // decoded on the pool, and the load rethrows the worker's kCorrupt.
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    SQLite::Statement q(db, "SELECT chunk_id, payload FROM chunks ORDER BY first_pos LIMIT 1");
    REQUIRE(q.executeStep());
    const int64_t chunk = q.getColumn(0).getInt64();
    std::string payload = q.getColumn(1).getString();
    REQUIRE(payload.size() > 64);
    payload[payload.size() / 2] = static_cast<char>(payload[payload.size() / 2] ^ 0x5a);
    SQLite::Statement u(db, "UPDATE chunks SET payload = ? WHERE chunk_id = ?");
    u.bind(1, payload.data(), static_cast<int>(payload.size()));
    u.bind(2, chunk);
    REQUIRE(u.exec() == 1);
  }
  Store s(path, o);
  EngineBuffers out(m, 256);
  CHECK(error_code_of([&] { s.load("a", m, out.tokens.data(), 256, out.target()); }) == ErrorCode::kCorrupt);
  const Metrics c = s.metrics();
  CHECK(errors_of(c, ErrorCode::kCorrupt) == 1);
  CHECK(errors_of(c, ErrorCode::kInternal) == 0);
}

TEST_CASE("metrics: a call is counted by what it throws and not by an error caught in its progress callback") {
  TempDir dir;
  const colikv::ModelSignature m = tiny_model();
  Store x(dir.file("x.db"), chunked_options(m, 4)), y(dir.file("y.db"), chunked_options(m, 4));
  append(x, "a", history(m, 8, 1), 8);
  EngineBuffers out(m, 8);
  // The callback's calls fail and it catches their errors, then stops the
  // verify with an exception of its own: x's call fails with no colikv::Error.
  const auto stop = [&](int64_t, int64_t) {
    CHECK(error_code_of([&] { x.load("missing", m, out.tokens.data(), 8, out.target()); }) == ErrorCode::kNotFound);
    CHECK(error_code_of([&] { y.load("missing", m, out.tokens.data(), 8, out.target()); }) == ErrorCode::kNotFound);
    throw std::runtime_error("stopped by its callback");
  };
  CHECK_THROWS_AS(x.verify("", stop), std::runtime_error);
  const Metrics cx = x.metrics(), cy = y.metrics();
  // x's nested call is counted only as the outer call's error, which it is not.
  CHECK(errors_of(cx, ErrorCode::kNotFound) == 0);
  CHECK(errors_of(cx, ErrorCode::kInternal) == 1);
  // A call on y from x's callback is y's outermost call: y counts its error.
  CHECK(errors_of(cy, ErrorCode::kNotFound) == 1);
  CHECK(errors_of(cy, ErrorCode::kInternal) == 0);
}

TEST_CASE("metrics: the async path's stall, queue depth and time until durable") {
  TempDir dir;
  const colikv::ModelSignature m = tiny_model();
  EngineBuffers h = history(m, 30, 5);
  Store s(dir.file("s.db"), chunked_options(m, 4));
  for (int64_t n : {10, 20, 30}) s.append_async("a", m, h.tokens.data(), n, h.source());
  s.wait();
  const Metrics c = s.metrics();
  CHECK(c.appends == 3);
  CHECK(c.append_turns == 3);
  CHECK(c.append_tokens == 30);
  CHECK(c.async_stall_seconds.count == 3);
  CHECK(c.async_queue_depth.count == 3);
  CHECK(c.async_queue_depth.sum >= 3);  // each turn counts itself
  CHECK(c.async_durable_seconds.count == 3);
  CHECK(c.async_durable_seconds.sum > 0);
  CHECK(c.append_seconds.count == 0);  // a queued turn is no append call
}

TEST_CASE("metrics: evictions, expirations and erases") {
  TempDir dir;
  const colikv::ModelSignature m = tiny_model();
  Store s(dir.file("s.db"), chunked_options(m, 4));
  append(s, "a", history(m, 16, 1), 16);
  append(s, "b", history(m, 16, 2), 16);
  append(s, "c", history(m, 16, 3), 16);
  const colikv::EvictionReport r = s.gc(0);
  Metrics c = s.metrics();
  CHECK(c.evictions == r.conversations.size());
  CHECK(c.evictions == 3);
  CHECK(c.evicted_bytes == static_cast<uint64_t>(r.freed_bytes));
  s.remove("a");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(s.expire(0).conversations.size() == 2);
  c = s.metrics();
  CHECK(c.erases == 1);
  CHECK(c.expirations == 2);
}

TEST_CASE("metrics: a wait for another connection's lock is counted with its time") {
  TempDir dir;
  const colikv::ModelSignature m = tiny_model();
  const std::string path = dir.file("s.db");
  colikv::Options o = chunked_options(m, 4);
  o.busy_timeout_ms = 5000;
  Store s(path, o);
  append(s, "a", history(m, 8, 1), 8);
  SQLite::Database other(path, SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    other.exec("COMMIT");
  });
  append(s, "b", history(m, 8, 2), 8);
  release.join();
  const Metrics c = s.metrics();
  CHECK(c.busy_waits >= 1);
  CHECK(c.lock_wait_seconds >= 0.05);
  CHECK(c.lock_wait_seconds < 5);
}

// Holds the write lock of the store file at `path` from another connection
// until `ms` have passed (then commits), on a thread of its own.
class LockedFor {
 public:
  LockedFor(const std::string& path, int ms) : db_(path, SQLite::OPEN_READWRITE) {
    db_.exec("BEGIN IMMEDIATE");
    release_ = std::thread([this, ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      db_.exec("COMMIT");
    });
  }
  ~LockedFor() { release_.join(); }

 private:
  SQLite::Database db_;
  std::thread release_;
};

TEST_CASE("metrics: a wait for a lock is charged to the Store whose connection waited, in a call on two "
          "Stores and in a progress callback that calls another Store") {
  TempDir dir;
  const colikv::ModelSignature m = tiny_model();
  colikv::Options o = chunked_options(m, 4);
  o.busy_timeout_ms = 5000;
  const std::string x_path = dir.file("x.db"), y_path = dir.file("y.db");
  Store x(x_path, o), y(y_path, o);
  append(x, "a", history(m, 8, 1), 8);
  append(y, "b", history(m, 8, 2), 8);
  // A copy holds both Stores at once, whichever address is higher; each
  // direction waits for its destination's lock.
  {
    LockedFor locked(y_path, 100);
    colikv::copy_conversation(x, y, "a");
  }
  CHECK(y.metrics().busy_waits >= 1);
  CHECK(x.metrics().busy_waits == 0);
  const uint64_t y_waits = y.metrics().busy_waits;
  {
    LockedFor locked(x_path, 100);
    colikv::copy_conversation(y, x, "b");
  }
  CHECK(x.metrics().busy_waits >= 1);
  CHECK(y.metrics().busy_waits == y_waits);

  // x's verify reports progress; its callback appends to y, which waits.
  const uint64_t x_waits = x.metrics().busy_waits;
  bool appended = false;
  x.verify("", [&](int64_t, int64_t) {
    if (appended) return;
    appended = true;
    LockedFor locked(y_path, 100);
    append(y, "c", history(m, 8, 3), 8);
  });
  REQUIRE(appended);
  CHECK(y.metrics().busy_waits > y_waits);
  CHECK(x.metrics().busy_waits == x_waits);
}

TEST_CASE("metrics: gauges by tenant and model, the files and held chunks") {
  TempDir dir;
  const colikv::ModelSignature m = tiny_model();
  const std::string path = dir.file("s.db");
  Store plain(path, chunked_options(m, 4));
  Store t(path, tenant_options(m, "t1"));
  append(plain, "a", history(m, 10, 1), 10);
  append(t, "x", history(m, 12, 2), 12);
  append(t, "y", history(m, 6, 3), 6);
  t.gc(0);  // t1's data evicted, the default tenant's kept

  const colikv::Gauges g = plain.gauges();
  REQUIRE(g.rows.size() == 2);
  CHECK(g.rows[0].tenant == "");
  CHECK(g.rows[0].model == m.to_string());
  CHECK(g.rows[0].conversations == 1);
  CHECK(g.rows[0].tokens == 10);
  CHECK(g.rows[0].stored_bytes > 0);
  CHECK(g.rows[0].evicted_bytes == 0);
  CHECK(g.rows[1].tenant == "t1");
  CHECK(g.rows[1].conversations == 2);
  CHECK(g.rows[1].tokens == 18);
  CHECK(g.rows[1].stored_bytes == 0);
  CHECK(g.rows[1].evicted_bytes == 18 * m.record_bytes());
  CHECK(g.file_bytes > 0);
  CHECK(g.wal_bytes >= 0);
  CHECK(g.held_chunks == 0);
  CHECK(g.store == path);
}

TEST_CASE("metrics: the text passes promtool check metrics, labels escaped") {
  TempDir dir;
  const colikv::ModelSignature m = tiny_model();
  Store s(dir.file("s.db"), chunked_options(m, 4));
  append(s, "a", history(m, 10, 1), 10);
  std::vector<Metrics> all = colikv::process_metrics();
  Metrics odd = s.metrics();
  odd.tenant = "a \"quoted\" \\ name\nwith\x1b control";
  all.push_back(odd);
  const std::string text = colikv::metrics_text(all);
  CHECK(promtool_problems(dir, text) == "");
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find("# TYPE colikv_append_bytes_total counter\n") != std::string::npos);
  CHECK(text.find("# TYPE colikv_append_seconds histogram\n") != std::string::npos);
  CHECK(text.find("colikv_errors_total{tenant=\"\",code=\"not_found\"} ") != std::string::npos);

  colikv::Gauges g = s.gauges();
  g.rows.push_back({"t\"2", "model \\ \n", 1, 2, 3, 4});
  CHECK(promtool_problems(dir, colikv::gauges_text(g)) == "");
}

TEST_CASE("metrics: colikv stats --prometheus prints the store's gauges, which promtool accepts") {
  TempDir dir;
  const colikv::ModelSignature m = tiny_model();
  const std::string path = dir.file("s.db");
  {
    Store s(path, chunked_options(m, 4));
    append(s, "a", history(m, 10, 1), 10);
  }
  const Run r = run_program(kTool, {"stats", path, "--prometheus"});
  INFO(describe({"stats", path, "--prometheus"}, r));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("colikv_store_conversations{store=\"" + path + "\",tenant=\"\",model=\"" + m.to_string() +
                   "\"} 1\n") != std::string::npos);
  CHECK(r.out.find("colikv_store_tokens{store=\"" + path + "\",tenant=\"\",model=\"" + m.to_string() + "\"} 10\n") !=
        std::string::npos);
  CHECK(promtool_problems(dir, r.out) == "");
}

TEST_CASE("metrics: colikv_metrics_text returns the size it needs and fills only a buffer that large") {
  TempDir dir;
  colikv_store* s = nullptr;
  REQUIRE(colikv_open(dir.file("c.db").c_str(), COLIKV_CREATE, &s) == COLIKV_OK);
  const int64_t need = colikv_metrics_text(s, nullptr, 0);
  REQUIRE(need > 1);
  std::string small(16, 'x');
  CHECK(colikv_metrics_text(s, &small[0], small.size()) == need);
  CHECK(small == std::string(16, 'x'));  // unchanged
  std::vector<char> buf(static_cast<size_t>(need));
  CHECK(colikv_metrics_text(s, buf.data(), buf.size()) == need);
  CHECK(std::string(buf.data()).size() == static_cast<size_t>(need - 1));
  CHECK(std::string(buf.data()).rfind("# HELP colikv_appends_total ", 0) == 0);
  // NULL: the process's totals.
  const int64_t total = colikv_metrics_text(nullptr, nullptr, 0);
  CHECK(total > 1);
  colikv_close(s);
  CHECK(colikv_metrics_text(nullptr, nullptr, 0) > 1);
}
