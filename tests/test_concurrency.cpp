// Concurrency: writer processes (tests/helpers/crash_child.cpp "work") and threads
// (each with its own Store, and two sharing one) append, truncate, fork,
// delete and load their own conversations of one store while a sqlite3 shell
// holds a read transaction open the whole time. Every call must succeed (a
// busy error inside the busy timeout fails the test), every load inside the
// writers is compared bit for bit, the shell keeps seeing its snapshot, and at
// the end each conversation holds exactly what its writer last committed.
// Once the shell lets go, the WAL, which had to grow past the checkpoint
// threshold while it was held, stops growing and is cut back.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sqlite3.h>

#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "chunk_pause.h"
#include "crash_workload.h"
#include "proc_util.h"
#include "test_support.h"

namespace wl = colikv_test::workload;
using colikv_test::ChildProcess;
using colikv_test::TempDir;
using colikv_test::file_size;

namespace {

struct Round {
  std::map<std::string, int64_t> expect;  // every writer's final state
  std::vector<std::string> errors;
};

// P processes and T threads (the last two sharing one Store) doing nops each.
Round run_writers(const std::string& path, const std::string& round, int procs, int threads, int nops) {
  Round r;
  std::vector<std::unique_ptr<ChildProcess>> children;
  const std::string err_path = path + "." + round + ".err";
  for (int i = 0; i < procs; ++i)
    children.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{COLIKV_CRASH_CHILD_PATH, "work", path, round + "p" + std::to_string(i) + "-", "3",
                                 std::to_string(nops), std::to_string(100 + i)},
        false, err_path));
  std::vector<std::map<std::string, int64_t>> texpect(static_cast<size_t>(threads));
  std::vector<std::string> terr(static_cast<size_t>(threads));
  std::vector<std::unique_ptr<colikv::Store>> stores;
  for (int t = 0; t < threads; ++t)
    if (t < threads - 1 || threads < 2) stores.push_back(std::make_unique<colikv::Store>(path, wl::options(false)));
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    colikv::Store& s = *stores[std::min<size_t>(static_cast<size_t>(t), stores.size() - 1)];
    ts.emplace_back([&, t, sp = &s] {
      terr[static_cast<size_t>(t)] = wl::run_operations(*sp, round + "t" + std::to_string(t) + "-", 3, nops,
                                                 static_cast<uint32_t>(200 + t), texpect[static_cast<size_t>(t)]);
    });
  }
  for (auto& t : ts) t.join();
  for (int t = 0; t < threads; ++t) {
    if (!terr[static_cast<size_t>(t)].empty()) r.errors.push_back(terr[static_cast<size_t>(t)]);
    r.expect.insert(texpect[static_cast<size_t>(t)].begin(), texpect[static_cast<size_t>(t)].end());
  }
  for (auto& c : children) {
    std::string out = c->read_rest();
    int status = c->wait();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::string err;
      try {
        err = colikv_test::read_file(err_path);
      } catch (...) {
      }
      r.errors.push_back("writer process failed (status " + std::to_string(status) + "): " + err);
      continue;
    }
    std::istringstream is(out);
    std::string name;
    int64_t len;
    while (is >> name >> len) r.expect[name] = len;
  }
  return r;
}

}  // namespace

TEST_CASE("concurrency: processes and threads write while a sqlite3 shell holds a read transaction",
          "[concurrency]") {
  if (*COLIKV_SQLITE3_SHELL == '\0') FAIL("no sqlite3 shell was found when configuring (Debian package sqlite3): install it and reconfigure");
  TempDir dir;
  const std::string path = dir.file("conc.db");
  colikv::Options o = wl::options(false);
  o.page_size = 4096;  // the WAL checkpoint threshold is 1000 pages: 4 MB
  o.wal_checkpoint_bytes = 1000 * 4096;  // checkpoints at 1000 pages, as these figures assume
  {
    colikv::Store s(path, o);
    const auto& b = wl::history_of("zc0").buffers;
    s.append("zc0", wl::model(), b.tokens.data(), 50, b.source());
  }
  ChildProcess shell({COLIKV_SQLITE3_SHELL, path}, true, dir.file("shell.err"));
  shell.write_stdin("BEGIN;\nSELECT count(*) FROM conversations;\n.print READY\n");
  std::string line, first;
  while (shell.read_line(line) && line != "READY") first = line;
  REQUIRE(line == "READY");
  REQUIRE(first == "1");

  const int nops = colikv_test::long_tests() ? 400 : 60;
  Round a = run_writers(path, "a", 3, 4, nops);
  for (const auto& e : a.errors) FAIL_CHECK(e);
  REQUIRE(a.errors.empty());
  const int64_t wal_held = file_size(path + "-wal");

  // The shell still sees its snapshot: one conversation.
  shell.write_stdin("SELECT count(*) FROM conversations;\n.print READY\n");
  while (shell.read_line(line) && line != "READY") first = line;
  CHECK(first == "1");
  CHECK(wal_held > 1000 * 4096);  // checkpoints could not reset the WAL under the reader
  shell.write_stdin("COMMIT;\n.quit\n");
  shell.close_stdin();
  shell.read_rest();
  CHECK(shell.wait() == 0);

  // Once the reader is gone, the next checkpoint resets the WAL and the file
  // is cut back (journal_size_limit): another round of as many writes leaves
  // it smaller than it grew under the reader.
  colikv::Store keeper(path, o);  // keeps the WAL file from being deleted at the last close
  Round b = run_writers(path, "b", 3, 4, nops);
  for (const auto& e : b.errors) FAIL_CHECK(e);
  REQUIRE(b.errors.empty());
  const int64_t wal_busy = file_size(path + "-wal");
  // The writers have stopped: within the next 1000 WAL frames the automatic
  // checkpoint runs with no reader in the way, the WAL restarts and the file
  // is cut back to journal_size_limit (1000 pages).
  int64_t zc0_len = 50, commits = 0;
  {
    const auto& zb = wl::history_of("zc0").buffers;
    while (file_size(path + "-wal") > 1000 * 4096 && commits < 2000) {
      if (zc0_len == 80) {
        keeper.truncate("zc0", 60);
        zc0_len = 60;
      } else {
        keeper.append("zc0", wl::model(), zb.tokens.data(), 80, zb.source());
        zc0_len = 80;
      }
      ++commits;
    }
  }
  const int64_t wal_after = file_size(path + "-wal");
  std::printf("concurrency: WAL %lld bytes while the shell held its snapshot, %lld after another round of busy "
              "writers without it, %lld after %lld more commits once they stopped\n",
              static_cast<long long>(wal_held), static_cast<long long>(wal_busy), static_cast<long long>(wal_after),
              static_cast<long long>(commits));
  CHECK(wal_after <= 1000 * 4096);

  colikv::Store& s = keeper;
  std::map<std::string, int64_t> expect = a.expect;
  expect.insert(b.expect.begin(), b.expect.end());
  expect["zc0"] = zc0_len;
  int64_t tokens = 0;
  for (const auto& info : s.list(colikv::ListOptions{-1, 0}))
    if (!expect.count(info.id)) FAIL_CHECK("unexpected conversation " << info.id);
  for (const auto& [name, len] : expect) {
    const std::string err = wl::check_content(s, name, len);
    if (!err.empty()) FAIL_CHECK(err);
    tokens += len;
  }
  const colikv::VerifyReport r = s.verify();
  CHECK(r.integrity == "ok");
  CHECK(r.ok());
  std::printf("concurrency: %zu conversations, %lld tokens, %d operations per writer, all exact\n", expect.size(),
              static_cast<long long>(tokens), nops);
}

TEST_CASE("concurrency: of two imports racing to create one id, the loser is told it exists", "[concurrency]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  const colikv::ModelSignature m = colikv_test::tiny_model();
  colikv_test::EngineBuffers b(m, 40);
  b.fill(0, 40, 3);
  colikv_test::write_coli_kv(dir.file("same.coli_kv"), b, 40);
  colikv::Store first(path), second(path);
  // A shell holds the write lock until both imports have read the store (no
  // "same" yet) and wait for it: both then race for the one id.
  sqlite3* shell = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &shell) == SQLITE_OK);
  REQUIRE(sqlite3_exec(shell, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  std::vector<std::string> failures;
  std::mutex mu;
  auto import_into = [&](colikv::Store& s) {
    try {
      colikv::import_coli_kv(s, dir.file("same.coli_kv"));
    } catch (const colikv::Error& e) {
      std::lock_guard<std::mutex> lock(mu);
      failures.push_back(std::to_string(static_cast<int>(e.code())) + " " + e.what());
    }
  };
  std::thread a(import_into, std::ref(first)), c(import_into, std::ref(second));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  sqlite3_exec(shell, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(shell);
  a.join();
  c.join();
  REQUIRE(failures.size() == 1);
  INFO(failures[0]);
  CHECK(failures[0].rfind(std::to_string(static_cast<int>(colikv::ErrorCode::kConflict)) + " ", 0) == 0);
  // Not "reload and retry": a retry can only fail again.
  CHECK(failures[0].find("'same': a conversation with this id exists already") != std::string::npos);
  CHECK(first.count("same") == 40);
}

// A short append reads and writes in one transaction only when it can have
// the write lock at once (Appender, "one_transaction_if_free"). One that
// would wait for another writer reads what is committed first, as every
// append did: the other writer's commit meanwhile makes it kConflict, which
// a caller retries from a new count. Had it read after its wait, it would
// find a conversation longer than it appends to, and answer "truncate
// first", which would lose the other writer's turn.
TEST_CASE("concurrency: a short append that finds the write lock taken reads before it waits, and a commit meanwhile "
          "is kConflict",
          "[concurrency][sync]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  colikv::Options o;
  o.busy_timeout_ms = 60000;
  const colikv_test::EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), 12, 5);
  colikv::Store host_a(path, o), host_b(path, o);
  colikv_test::append(host_a, "c", h, 6);
  colikv_test::ChunkPause paused("c", 1);  // b's turn 6 -> 12: its piece stored, its transaction open
  colikv_test::Outcome rb, ra;
  std::thread tb([&] { rb = colikv_test::outcome_of([&] { colikv_test::append(host_b, "c", h, 12); }); });
  paused.wait_reached();
  // a saw 6 tokens and appends to 9 while b holds the write lock.
  const uint64_t waits = host_a.metrics().busy_waits;
  std::thread ta([&] { ra = colikv_test::outcome_of([&] { colikv_test::append(host_a, "c", h, 9); }); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (host_a.metrics().busy_waits == waits && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool a_waited = host_a.metrics().busy_waits > waits;
  paused.release();
  tb.join();
  ta.join();
  CHECK(a_waited);
  INFO(rb.message << " / " << ra.message);
  CHECK(rb.code == colikv::ErrorCode::kOk);
  CHECK(ra.code == colikv::ErrorCode::kConflict);
  CHECK(host_a.count("c") == 12);
  CHECK(colikv_test::loads_as(host_a, "c", h, 12) == "");
}
