// Process crashes: a real child process (tests/helpers/crash_child.cpp) appends,
// truncates, forks and deletes conversations and reports every operation
// before ("I name len") and after ("D") it; the parent SIGKILLs it at random
// moments, then checks the store: every reported operation is there, the one
// in flight is there entirely or not at all, every conversation loads bit
// for bit as its deterministic history, and PRAGMA integrity_check and
// Store::verify find nothing. 220 kills by default, 2000 with
// COLIKV_LONG_TESTS=1. The child runs with synchronous=NORMAL (3 cycles in
// 4) or FULL (1 in 4): both promise that a commit survives a process crash.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "colikv/store.h"
#include "crash_workload.h"
#include "proc_util.h"
#include "test_support.h"

namespace wl = colikv_test::workload;
using colikv_test::ChildProcess;
using colikv_test::TempDir;

namespace {

struct Inflight {
  bool active = false;
  std::string name;
  int64_t len = 0;
};

// Applies the child's report lines to `model`; what is left in flight goes to inflight.
void apply_lines(const std::vector<std::string>& lines, std::map<std::string, int64_t>& model, Inflight& inflight,
                 int64_t& ops) {
  for (const auto& l : lines) {
    if (l.size() >= 2 && l[0] == 'I') {
      std::istringstream is(l.substr(2));
      inflight.active = true;
      is >> inflight.name >> inflight.len;
    } else if (l == "D" && inflight.active) {
      if (inflight.len < 0)
        model.erase(inflight.name);
      else
        model[inflight.name] = inflight.len;
      inflight.active = false;
      ++ops;
    }
  }
}

std::string read_text(const std::string& path) {
  try {
    return colikv_test::read_file(path);
  } catch (...) {
    return "";
  }
}

}  // namespace

TEST_CASE("crash: SIGKILL at random moments never loses or tears a committed operation", "[crash]") {
  TempDir dir;
  const std::string path = dir.file("crash.db");
  const std::string err_path = dir.file("child.err");
  const int kills = colikv_test::long_tests() ? 2000 : 220;
  const int nconv = 4;
  std::mt19937 rng(20240607);
  std::map<std::string, int64_t> model;  // what the store must hold
  int64_t ops = 0, mid_operation = 0, inflight_committed = 0, before_ready = 0;
  const auto t0 = std::chrono::steady_clock::now();

  for (int i = 0; i < kills; ++i) {
    const bool full = i % 4 == 3;
    std::vector<std::string> lines;
    {
      ChildProcess child({COLIKV_CRASH_CHILD_PATH, "crash", path, std::to_string(1000 + i), std::to_string(nconv),
                          full ? "full" : "normal"},
                         false, err_path);
      // Kill before the store is open (-1), or after 0..6 committed operations,
      // then after a random 0..3 ms more.
      const int wait_done = static_cast<int>(rng() % 8) - 1;
      if (wait_done >= 0) {
        int done = 0;
        std::string line;
        while ((done < wait_done || lines.empty()) && child.read_line(line)) {
          lines.push_back(line);
          if (line == "D") ++done;
        }
      }
      ::usleep(static_cast<useconds_t>(rng() % 3000));
      child.kill_now();
      const int status = child.wait();
      if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
        FAIL("child " << i << " ended by itself (status " << status << "): " << read_text(err_path));
      std::string rest = child.read_rest();
      std::istringstream is(rest);
      for (std::string l; std::getline(is, l);) lines.push_back(l);
    }
    if (lines.empty() || lines[0] != "R") ++before_ready;
    Inflight inflight;
    apply_lines(lines, model, inflight, ops);

    colikv::Store store(path, wl::options(false));
    std::set<std::string> names;
    for (const auto& [n, len] : model) names.insert(n);
    for (const auto& info : store.list(colikv::ListOptions{-1, 0})) names.insert(info.id);
    if (inflight.active) {
      names.insert(inflight.name);
      ++mid_operation;
    }
    for (const auto& n : names) {
      const int64_t actual = store.exists(n) ? store.count(n) : -1;
      const int64_t expected = model.count(n) ? model[n] : -1;
      if (actual != expected) {
        if (inflight.active && n == inflight.name && actual == inflight.len) {
          ++inflight_committed;  // committed, killed before it could say so
          if (actual < 0)
            model.erase(n);
          else
            model[n] = actual;
        } else {
          FAIL("kill " << i << ": conversation " << n << " holds " << actual << " tokens (-1: absent), expected "
                       << expected << (inflight.active ? " or the in-flight " + inflight.name + " -> " +
                                                             std::to_string(inflight.len)
                                                       : std::string()));
        }
      }
      if (actual >= 0) {
        const std::string err = wl::check_content(store, n, actual);
        if (!err.empty()) FAIL("kill " << i << ": " << err);
      }
    }
    const colikv::VerifyReport report = store.verify();
    if (report.integrity != "ok" || !report.ok())
      FAIL("kill " << i << ": verify: " << report.integrity << "; "
                   << (report.problems.empty() ? "" : report.problems.front().what));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("crash: %d SIGKILLs survived (%lld mid-operation, %lld of those committed, %lld before the store "
              "was open), %lld operations committed, %.1f s\n",
              kills, static_cast<long long>(mid_operation), static_cast<long long>(inflight_committed),
              static_cast<long long>(before_ready), static_cast<long long>(ops), secs);
  CHECK(ops > kills);           // the child did real work between kills
  CHECK(mid_operation > kills / 4);  // and many kills landed inside an operation
}

// The kill loop of append_async: the child (crash_child async) queues turns
// of conversation a0, waits now and then, truncates now and then; killed at
// random moments, the store must hold a state the child could have reached
// since its last wait (or truncate) returned: that one or a later queued
// turn, whole, never part of one, loading bit for bit as its history.
TEST_CASE("crash: SIGKILL during append_async loses no waited-for turn and tears none", "[crash][async]") {
  TempDir dir;
  const std::string path = dir.file("async.db");
  const std::string err_path = dir.file("child.err");
  const int kills = colikv_test::long_tests() ? 1000 : 120;
  std::mt19937 rng(20261201);
  int64_t committed = 0;  // what the store held after the last check
  int64_t waits = 0, queued = 0, lost_unwaited = 0;
  for (int i = 0; i < kills; ++i) {
    const bool full = i % 4 == 3;
    std::set<int64_t> possible{committed};  // the states the store may be in
    std::vector<std::string> lines;
    {
      ChildProcess child({COLIKV_CRASH_CHILD_PATH, "async", path, std::to_string(5000 + i), full ? "full" : "normal"},
                         false, err_path);
      const int wait_lines = static_cast<int>(rng() % 40);
      std::string line;
      while (static_cast<int>(lines.size()) < wait_lines && child.read_line(line)) lines.push_back(line);
      ::usleep(static_cast<useconds_t>(rng() % 3000));
      child.kill_now();
      const int status = child.wait();
      if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
        FAIL("child " << i << " ended by itself (status " << status << "): " << read_text(err_path));
      std::istringstream is(child.read_rest());
      for (std::string l; std::getline(is, l);) lines.push_back(l);
    }
    int64_t last_queued = committed;
    for (const std::string& l : lines) {
      std::istringstream is(l);
      std::string tag;
      int64_t len = -1;
      is >> tag >> len;
      if (tag == "R") {
        REQUIRE(len == committed);  // the child found what the last check found
      } else if (tag == "Q" || tag == "T") {
        possible.insert(len);
        queued += tag == "Q";
        last_queued = len;
      } else if (tag == "W") {
        possible = {len};  // every turn up to len is committed: nothing before it may be what remains
        ++waits;
      } else if (tag == "TD") {
        possible = {last_queued};
      }
    }
    colikv::Store store(path, wl::options(false));
    const int64_t actual = store.count("a0");
    if (!possible.count(actual)) {
      std::string states;
      for (int64_t p : possible) states += " " + std::to_string(p);
      FAIL("kill " << i << ": a0 holds " << actual << " tokens; possible:" << states);
    }
    if (actual != *possible.rbegin()) ++lost_unwaited;
    const std::string err = wl::check_content(store, "a0", actual);
    if (!err.empty()) FAIL("kill " << i << ": " << err);
    if (i % 10 == 9) {
      const colikv::VerifyReport report = store.verify();
      if (report.integrity != "ok" || !report.ok())
        FAIL("kill " << i << ": verify: " << report.integrity << "; "
                     << (report.problems.empty() ? "" : report.problems.front().what));
    }
    committed = actual;
  }
  std::printf("crash async: %d SIGKILLs survived, %lld turns queued, %lld waits returned, %lld kills lost "
              "queued turns not waited for\n",
              kills, static_cast<long long>(queued), static_cast<long long>(waits),
              static_cast<long long>(lost_unwaited));
  CHECK(waits > kills / 2);  // the child did real work between kills
  CHECK(lost_unwaited > 0);  // and kills landed while turns were queued
}

// The issue-25 loop: two mock engines (crash_child engine) on one store under
// a byte budget smaller than their two conversations, so that each one's
// appends evict the other's; both killed at random moments and restarted.
// Neither may ever fail (an evicted conversation is saved again from the
// engine's rows; an eviction is no conflict), a waited-for turn is never
// lost, and each conversation holds its own history's token ids and loads
// bit for bit or is kEvicted.
TEST_CASE("crash: two engines under a byte budget, killed and restarted, never fail", "[crash][async][eviction]") {
  TempDir dir;
  const std::string path = dir.file("budget.db");
  const int kills = colikv_test::long_tests() ? 300 : 30;
  const int64_t budget = wl::kCapacity * wl::model().record_bytes() / 2;  // under one full conversation
  const std::vector<std::string> names{"ec0", "ec1"};
  std::mt19937 rng(20261225);
  std::map<std::string, int64_t> committed{{"ec0", 0}, {"ec1", 0}};
  int64_t waits = 0, evicted_seen = 0;
  for (int i = 0; i < kills; ++i) {
    std::map<std::string, std::vector<std::string>> lines;
    {
      std::vector<std::unique_ptr<ChildProcess>> children;
      for (size_t k = 0; k < names.size(); ++k)
        children.push_back(std::make_unique<ChildProcess>(
            std::vector<std::string>{COLIKV_CRASH_CHILD_PATH, "engine", path, names[k], std::to_string(900 + 2 * i + k),
                                     std::to_string(budget)},
            false, dir.file(names[k] + ".err")));
      const int wait_lines = 5 + static_cast<int>(rng() % 30);
      std::string line;
      for (size_t k = 0; k < names.size(); ++k)
        while (static_cast<int>(lines[names[k]].size()) < wait_lines && children[k]->read_line(line))
          lines[names[k]].push_back(line);
      ::usleep(static_cast<useconds_t>(rng() % 3000));
      for (auto& c : children) c->kill_now();
      for (size_t k = 0; k < names.size(); ++k) {
        const int status = children[k]->wait();
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
          FAIL("round " << i << ": engine " << names[k] << " ended by itself (status " << status
                        << "): " << read_text(dir.file(names[k] + ".err")));
        std::istringstream is(children[k]->read_rest());
        for (std::string l; std::getline(is, l);) lines[names[k]].push_back(l);
      }
    }
    colikv::Store store(path, wl::options(false));
    for (const std::string& n : names) {
      std::set<int64_t> possible{committed[n]};
      int64_t last_queued = committed[n];
      for (const std::string& l : lines[n]) {
        std::istringstream is(l);
        std::string tag;
        int64_t len = -1;
        is >> tag >> len;
        if (tag == "R") {
          REQUIRE(len == committed[n]);
        } else if (tag == "Q" || tag == "T") {
          possible.insert(len);
          last_queued = len;
        } else if (tag == "W") {
          possible = {len};
          ++waits;
        } else if (tag == "TD") {
          possible = {last_queued};
        }
      }
      const int64_t actual = store.count(n);
      if (!possible.count(actual)) {
        std::string states;
        for (int64_t p : possible) states += " " + std::to_string(p);
        FAIL("round " << i << ": " << n << " holds " << actual << " tokens; possible:" << states);
      }
      const auto& h = wl::history_of(n).buffers;
      if (!store.exists(n)) {
        REQUIRE(actual == 0);  // killed before its first turn committed
      } else if (store.tokens(n) != std::vector<int32_t>(h.tokens.begin(), h.tokens.begin() + actual)) {
        FAIL("round " << i << ": " << n << " holds token ids that are not its history's");
      } else if (store.info(n).evicted) {
        ++evicted_seen;
      } else {
        const std::string err = wl::check_content(store, n, actual);
        if (!err.empty()) FAIL("round " << i << ": " << err);
      }
      committed[n] = actual;
    }
    if (i % 10 == 9) {
      const colikv::VerifyReport report = store.verify();
      if (report.integrity != "ok" || !report.ok())
        FAIL("round " << i << ": verify: " << report.integrity << "; "
                      << (report.problems.empty() ? "" : report.problems.front().what));
    }
  }
  std::printf("crash budget: %d rounds of two engines killed, %lld waits returned, %lld evicted states seen\n", kills,
              static_cast<long long>(waits), static_cast<long long>(evicted_seen));
  CHECK(waits > kills);         // the engines did real work between kills
  CHECK(evicted_seen > 0);      // and the budget evicted one engine's conversation for the other's
}
