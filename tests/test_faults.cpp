// Power loss, I/O errors and a full disk, injected under SQLite by the test
// VFS shim (tests/fault_vfs.h) that the store opens through Options::vfs_name.
//
// Every case starts from the same template store (four conversations of the
// deterministic workload of crash_workload.h), runs operations with a fault
// armed at the Nth I/O operation, sweeping N across the whole operation, and
// then checks the store with SQLite's default VFS, as after a reboot:
// integrity_check and Store::verify are clean, and every conversation holds
// exactly one of the states the operations went through, loading bit for bit.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "backend.h"
#include "crash_workload.h"
#include "fault_vfs.h"
#include "sqlite/sqlite_catalog.h"
#include "store/write/append.h"
#include "store/store_impl.h"
#include "test_support.h"

namespace wl = colikv_test::workload;
using colikv::Error;
using colikv::ErrorCode;
using colikv::Store;
using colikv_test::FaultVfs;
using colikv_test::TempDir;

namespace {

using State = std::map<std::string, int64_t>;  // conversation -> committed tokens

colikv::Options fault_options(bool full) {
  colikv::Options o = wl::options(full);
  o.vfs_name = FaultVfs::kName;
  return o;
}

void append_to(Store& s, const std::string& name, int64_t len) {
  const auto& b = wl::history_of(name).buffers;
  s.append(name, wl::model(), b.tokens.data(), len, b.source());
}

// The template: c0 20 tokens, c1 13, c2 8 (a full chunk), f0 = c0[:12].
State make_template(const std::string& path, std::string& db_bytes) {
  State st{{"c0", 20}, {"c1", 13}, {"c2", 8}, {"f0", 12}};
  {
    Store s(path, wl::options(true));
    append_to(s, "c0", 20);
    append_to(s, "c1", 13);
    append_to(s, "c2", 8);
    s.fork("c0", "f0", 12);
  }
  db_bytes = colikv_test::read_file(path);
  return st;
}

void restore(const std::string& path, const std::string& db_bytes) {
  colikv_test::write_file(path, db_bytes);
  ::unlink((path + "-wal").c_str());
  ::unlink((path + "-shm").c_str());
}

// "" when the store holds exactly `st`, loading bit for bit.
std::string state_diff(Store& s, const State& st) {
  for (const auto& info : s.list(colikv::ListOptions{-1, 0}))
    if (!st.count(info.id)) return "unexpected conversation " + info.id;
  for (const auto& [name, len] : st) {
    if (!s.exists(name)) return name + " is missing";
    if (s.count(name) != len)
      return name + " holds " + std::to_string(s.count(name)) + " tokens, expected " + std::to_string(len);
    std::string err = wl::check_content(s, name, len);
    if (!err.empty()) return err;
  }
  return "";
}

// Opens the file with the default VFS (after the "reboot") and returns the
// index of the state it holds among `states`, or fails.
int reopened_state(const std::string& path, const std::vector<State>& states, const std::string& ctx) {
  Store s(path, wl::options(true));
  const colikv::VerifyReport r = s.verify();
  if (r.integrity != "ok" || !r.ok())
    FAIL(ctx << ": verify: " << r.integrity << "; " << (r.problems.empty() ? "" : r.problems.front().what));
  for (size_t k = states.size(); k-- > 0;)
    if (state_diff(s, states[k]).empty()) return static_cast<int>(k);
  FAIL(ctx << ": the store holds none of the expected states; against the first: " << state_diff(s, states[0])
           << "; against the last: " << state_diff(s, states.back()));
  return -1;
}

struct Step {
  std::string what;
  std::function<void(Store&)> run;
  std::function<void(State&)> model;
};

std::vector<Step> power_loss_steps() {
  return {
      {"append c0 20->37", [](Store& s) { append_to(s, "c0", 37); }, [](State& st) { st["c0"] = 37; }},
      {"append new c3 0->11", [](Store& s) { append_to(s, "c3", 11); }, [](State& st) { st["c3"] = 11; }},
      {"truncate c0 37->29", [](Store& s) { s.truncate("c0", 29); }, [](State& st) { st["c0"] = 29; }},
      {"fork c1->f1 at 10", [](Store& s) { s.fork("c1", "f1", 10); }, [](State& st) { st["f1"] = 10; }},
      {"delete c2", [](Store& s) { s.remove("c2"); }, [](State& st) { st.erase("c2"); }},
      {"append c1 13->40", [](Store& s) { append_to(s, "c1", 40); }, [](State& st) { st["c1"] = 40; }},
  };
}

}  // namespace

TEST_CASE("faults: power loss at every write and sync of appends, truncate, fork and delete", "[faults][power]") {
  FaultVfs& vfs = FaultVfs::get();
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("power.db");
  std::string tmpl;
  const State base = make_template(path, tmpl);
  const auto steps = power_loss_steps();
  std::vector<State> states{base};
  for (const auto& st : steps) {
    State next = states.back();
    st.model(next);
    states.push_back(next);
  }

  int64_t iterations = 0, losses = 0, dropped = 0, lost_acked = 0;
  for (const bool full : {true, false}) {
    for (const bool torn : {false, true}) {
      // How many writes, syncs and truncates the whole sequence makes.
      restore(path, tmpl);
      vfs.reset();
      int64_t total = 0;
      {
        Store s(path, fault_options(full));
        const int64_t before = vfs.mutating_count();
        for (const auto& st : steps) st.run(s);
        total = vfs.mutating_count() - before;
      }
      REQUIRE(total > static_cast<int64_t>(steps.size()));
      for (int64_t n = 1; n <= total + 1; ++n) {
        const std::string ctx = std::string(full ? "FULL" : "NORMAL") + (torn ? " torn" : "") +
                                " power loss before I/O operation " + std::to_string(n) + " of " +
                                std::to_string(total);
        restore(path, tmpl);
        vfs.reset();
        if (torn) vfs.set_torn_seed(static_cast<uint32_t>(n * 7919 + 1));
        size_t acked = 0;
        bool failed = false;
        {
          Store s(path, fault_options(full));
          vfs.power_loss_at(n);
          for (const auto& st : steps) {
            try {
              st.run(s);
              ++acked;
            } catch (const Error& e) {
              if (e.code() != ErrorCode::kIO) FAIL(ctx << ": " << st.what << ": unexpected error " << e.what());
              failed = true;
              break;
            }
          }
          vfs.power_loss_now();  // no-op if it happened already
        }
        dropped += vfs.dropped_writes();
        vfs.reset();
        ++iterations;
        ++losses;
        const int k = reopened_state(path, states, ctx);
        if (full) {
          // FULL: every acknowledged operation survives; the failed one may have
          // committed before the machine died.
          if (!(k == static_cast<int>(acked) || (failed && k == static_cast<int>(acked) + 1)))
            FAIL(ctx << ": " << acked << " operations were acknowledged but the store holds the state after " << k);
        } else {
          // NORMAL: a prefix of the operations; at most the unsynced tail is lost.
          if (k > static_cast<int>(acked) + (failed ? 1 : 0))
            FAIL(ctx << ": the store holds the state after " << k << " operations, only " << acked << " ran");
          lost_acked += static_cast<int64_t>(acked) - std::min<int64_t>(k, static_cast<int64_t>(acked));
        }
      }
    }
  }
  std::printf("faults: %lld power losses (FULL and NORMAL, clean and torn), %lld unsynced writes dropped, "
              "%lld acknowledged operations lost under NORMAL, none under FULL\n",
              static_cast<long long>(losses), static_cast<long long>(dropped), static_cast<long long>(lost_acked));
  CHECK(iterations > 40);
}

namespace {

struct Turn {
  std::string name;
  int64_t len;
};

// One writer's turns, run in order on its own handle until one fails (the
// machine died): how many returned. An error before the power loss is
// recorded in `unexpected`.
size_t run_turns(Store& s, const std::vector<Turn>& turns, std::string& unexpected) {
  for (size_t k = 0; k < turns.size(); ++k) {
    try {
      append_to(s, turns[k].name, turns[k].len);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kIO || !FaultVfs::get().crashed())
        unexpected = "append " + turns[k].name + " -> " + std::to_string(turns[k].len) + ": " +
                     colikv::error_code_name(e.code()) + ": " + e.what();
      return k;
    }
  }
  return turns.size();
}

// The lengths a conversation may hold after a power loss, given its
// template length (-1: absent) and one writer's turns of which `returned`
// came back: FULL keeps every returned turn, NORMAL any prefix of them; the
// turn that failed may have committed.
std::set<int64_t> allowed_lengths(int64_t initial, const std::vector<Turn>& turns, size_t returned,
                                  const std::string& name, bool full) {
  std::vector<int64_t> states{initial};
  size_t acked = 0;
  for (size_t k = 0; k < turns.size() && k <= returned; ++k) {
    if (turns[k].name != name) continue;
    states.push_back(turns[k].len);
    if (k < returned) ++acked;
  }
  std::set<int64_t> allowed;
  for (size_t k = full ? acked : 0; k < states.size(); ++k) allowed.insert(states[k]);
  return allowed;
}

}  // namespace

// Issue 20's power loss with two writers at once: writer A appends turns of
// many chunks (c0 20 -> 100, a new c3 of 90) while writer B, on a handle of
// its own in another thread, appends small turns to f0 (c0's fork, so its
// full chunks are c0's: the two writers store chunks of equal keys) and c1.
// The disk loses every unsynced write (or a random half of them) before the
// Nth write, sync or truncate of the two. After the reboot: every turn whose
// append returned is there under FULL, every other turn whole or absent,
// each conversation loads bit for bit, and after gc verify is clean and no
// chunk is left that no chunk list names. Run both ways: each turn in one
// transaction, and objects first (docs/design.md): A's turns of several
// chunks store each chunk in a transaction of its own (synchronous NORMAL)
// before the link (the store's level), so a power loss lands between them;
// the reboot is simulated with another boot id, which makes the writers of
// the old one certainly dead, and the reopen reclaims their held chunks.
TEST_CASE("faults: power loss while one writer appends a turn of many chunks and another appends",
          "[faults][power][objects]") {
  const bool objects_first = GENERATE(false, true);
  INFO((objects_first ? "objects first" : "one transaction per turn"));
  struct Restore {
    int64_t min_bytes = colikv::detail::objects_first_min_bytes();
    ~Restore() {
      colikv::detail::objects_first_min_bytes() = min_bytes;
      colikv::detail::simulated_boot_id().clear();
    }
  } restore_settings;
  if (objects_first) colikv::detail::objects_first_min_bytes() = 0;
  int64_t held_at_loss = 0;
  FaultVfs& vfs = FaultVfs::get();
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("two.db");
  std::string tmpl;
  const State base = make_template(path, tmpl);
  const std::vector<Turn> turns_a{{"c0", 100}, {"c3", 90}};
  const std::vector<Turn> turns_b{{"f0", 20}, {"f0", 33}, {"f0", 45}, {"c1", 17}, {"c1", 30}};
  const auto run_both = [&](Store& sa, Store& sb, size_t& done_a, size_t& done_b, std::string& err_a,
                            std::string& err_b) {
    std::thread tb([&] { done_b = run_turns(sb, turns_b, err_b); });
    done_a = run_turns(sa, turns_a, err_a);
    tb.join();
  };

  int64_t losses = 0, dropped = 0, both_cut = 0, failed_committed = 0;
  for (const auto& [full, torn] : std::vector<std::pair<bool, bool>>{{true, false}, {true, true}, {false, false}}) {
    // How many writes, syncs and truncates the two writers make (the
    // interleaving varies from run to run; the sweep covers about as many).
    restore(path, tmpl);
    vfs.reset();
    int64_t total = 0;
    {
      Store sa(path, fault_options(full)), sb(path, fault_options(full));
      size_t da = 0, db = 0;
      std::string ea, eb;
      const int64_t before = vfs.mutating_count();
      run_both(sa, sb, da, db, ea, eb);
      REQUIRE(ea.empty());
      REQUIRE(eb.empty());
      total = vfs.mutating_count() - before;
    }
    REQUIRE(total > static_cast<int64_t>(turns_a.size() + turns_b.size()));
    for (int64_t n = 1; n <= total + 1; ++n) {
      const std::string ctx = std::string(full ? "FULL" : "NORMAL") + (torn ? " torn" : "") +
                              " power loss before I/O operation " + std::to_string(n) + " of about " +
                              std::to_string(total);
      restore(path, tmpl);
      vfs.reset();
      if (torn) vfs.set_torn_seed(static_cast<uint32_t>(n * 7919 + 3));
      colikv::detail::simulated_boot_id() = "before-" + std::to_string(n);
      size_t done_a = 0, done_b = 0;
      std::string err_a, err_b;
      {
        Store sa(path, fault_options(full)), sb(path, fault_options(full));
        vfs.power_loss_at(n);
        run_both(sa, sb, done_a, done_b, err_a, err_b);
        vfs.power_loss_now();  // no-op if it happened already
      }
      if (!err_a.empty()) FAIL(ctx << ": writer A: " << err_a);
      if (!err_b.empty()) FAIL(ctx << ": writer B: " << err_b);
      dropped += vfs.dropped_writes();
      vfs.reset();
      ++losses;
      both_cut += done_a < turns_a.size() && done_b < turns_b.size();
      held_at_loss += colikv_test::store_int(path, "SELECT count(*) FROM held_chunks") > 0;
      colikv::detail::simulated_boot_id() = "after-" + std::to_string(n);  // the reboot
      Store s(path, wl::options(true));
      std::set<std::string> names;
      for (const auto& info : s.list(colikv::ListOptions{-1, 0})) names.insert(info.id);
      for (const auto& [name, len] : base) names.insert(name);
      names.insert("c3");
      for (const std::string& name : names) {
        const int64_t initial = base.count(name) ? base.at(name) : -1;
        std::set<int64_t> allowed = allowed_lengths(initial, turns_a, done_a, name, full);
        const std::set<int64_t> by_b = allowed_lengths(initial, turns_b, done_b, name, full);
        // A conversation is one writer's: the other's turns leave it as it was.
        if (allowed == std::set<int64_t>{initial}) allowed = by_b;
        const int64_t actual = s.exists(name) ? s.count(name) : -1;
        if (!allowed.count(actual)) {
          std::string states;
          for (int64_t a : allowed) states += " " + std::to_string(a);
          FAIL(ctx << ": " << name << " holds " << actual << " tokens (-1: absent) after A's " << done_a << " and B's "
                   << done_b << " returned turns; possible:" << states);
        }
        // Turns only grow here: the larger of FULL's two is the failed turn's.
        if (full && allowed.size() == 2 && actual == *allowed.rbegin()) ++failed_committed;
        if (actual >= 0) {
          const std::string err = wl::check_content(s, name, actual);
          if (!err.empty()) FAIL(ctx << ": " << err);
        }
      }
      s.gc(std::numeric_limits<int64_t>::max());  // evicts nothing; reclaims what the dead writers left
      const colikv::VerifyReport r = s.verify();
      if (r.integrity != "ok" || !r.ok())
        FAIL(ctx << ": verify after gc: " << r.integrity << "; " << (r.problems.empty() ? "" : r.problems.front().what));
      const int64_t orphans = colikv_test::orphan_chunks(path, false);
      if (orphans != 0) FAIL(ctx << ": " << orphans << " chunks no chunk list names after gc");
    }
  }
  std::printf("faults two writers: %lld power losses (FULL clean and torn, NORMAL), %lld unsynced writes dropped, "
              "%lld with both writers cut inside their turns, %lld failed turns found committed under FULL\n",
              static_cast<long long>(losses), static_cast<long long>(dropped), static_cast<long long>(both_cut),
              static_cast<long long>(failed_committed));
  CHECK(losses > 40);
  CHECK(both_cut > 0);
  // Objects first, some losses left held chunks of the turn cut short, which
  // the reopen (and gc) reclaimed: the orphan check above held after them.
  if (objects_first) CHECK(held_at_loss > 0);
  std::printf("faults two writers (%s): %lld power losses left held chunks\n",
              objects_first ? "objects first" : "one transaction per turn", static_cast<long long>(held_at_loss));
}

namespace {

struct Operation {
  std::string name;
  std::string conversation;  // the message must name it
  std::function<void(Store&, const TempDir&)> run;
  std::function<void(State&)> model;
};

std::vector<Operation> fault_operations() {
  return {
      {"import", "c9",
       [](Store& s, const TempDir& d) {
         colikv::ImportOptions io;
         io.id = "c9";
         colikv::import_coli_kv(s, d.file("c9.coli_kv"), io);
       },
       [](State& st) { st["c9"] = 30; }},
      {"append", "c0", [](Store& s, const TempDir&) { append_to(s, "c0", 37); }, [](State& st) { st["c0"] = 37; }},
      {"truncate", "c0", [](Store& s, const TempDir&) { s.truncate("c0", 13); }, [](State& st) { st["c0"] = 13; }},
      {"fork", "c1", [](Store& s, const TempDir&) { s.fork("c1", "f1", 10); }, [](State& st) { st["f1"] = 10; }},
      {"delete", "c2", [](Store& s, const TempDir&) { s.remove("c2"); }, [](State& st) { st.erase("c2"); }},
  };
}

struct FaultKind {
  FaultVfs::Op op;
  int code;
  bool persistent;
  ErrorCode expect;
  const char* name;
};

}  // namespace

TEST_CASE("faults: an I/O error or a full disk at every read, write, sync and truncate changes nothing",
          "[faults][io]") {
  FaultVfs& vfs = FaultVfs::get();
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("io.db");
  std::string tmpl;
  const State base = make_template(path, tmpl);
  {
    const auto& b = wl::history_of("c9").buffers;
    colikv_test::write_coli_kv(dir.file("c9.coli_kv"), b, 30);
  }
  const std::vector<FaultKind> kinds = {
      {FaultVfs::kRead, SQLITE_IOERR_READ, false, ErrorCode::kIO, "read error"},
      {FaultVfs::kWrite, SQLITE_IOERR_WRITE, false, ErrorCode::kIO, "write error"},
      {FaultVfs::kWrite, SQLITE_FULL, true, ErrorCode::kDiskFull, "disk full (ENOSPC)"},
      {FaultVfs::kSync, SQLITE_IOERR_FSYNC, false, ErrorCode::kIO, "fsync error"},
      {FaultVfs::kTruncate, SQLITE_IOERR_TRUNCATE, false, ErrorCode::kIO, "truncate error"},
  };
  int64_t injected = 0, failed_calls = 0, cases = 0, without_conversation = 0;
  for (const auto& op : fault_operations()) {
    State after = base;
    op.model(after);
    for (const auto& kind : kinds) {
      restore(path, tmpl);
      vfs.reset();
      int64_t total = 0;
      {
        Store s(path, fault_options(true));
        const int64_t before = vfs.count(kind.op);
        op.run(s, dir);
        total = vfs.count(kind.op) - before;
      }
      for (int64_t n = 1; n <= total + 1; ++n) {
        const std::string ctx = op.name + ": " + kind.name + " at operation " + std::to_string(n) + " of " +
                                std::to_string(total);
        restore(path, tmpl);
        vfs.reset();
        bool threw = false;
        {
          Store s(path, fault_options(true));
          vfs.fail_nth(kind.op, n, kind.code, kind.persistent);
          try {
            op.run(s, dir);
          } catch (const Error& e) {
            threw = true;
            ++failed_calls;
            const std::string msg = e.what();
            if (e.code() != kind.expect)
              FAIL(ctx << ": error code " << colikv::error_code_name(e.code()) << ", expected "
                       << colikv::error_code_name(kind.expect) << ": " << msg);
            if (msg.find(path) == std::string::npos) FAIL(ctx << ": the message does not name the store: " << msg);
            if (msg.find("'" + op.conversation + "'") == std::string::npos) ++without_conversation;
            if (kind.expect == ErrorCode::kDiskFull && msg.find("full") == std::string::npos)
              FAIL(ctx << ": the message does not say the disk is full: " << msg);
          }
          injected += vfs.faults_injected();
          vfs.clear_faults();
          // The same handle goes on working and sees exactly the old or the new content.
          const std::string d = state_diff(s, threw ? base : after);
          if (!d.empty()) FAIL(ctx << (threw ? " (failed)" : " (succeeded)") << ", same handle: " << d);
        }
        vfs.reset();
        const int k = reopened_state(path, {base, after}, ctx);
        if (k != (threw ? 0 : 1))
          FAIL(ctx << ": after reopening the store holds the " << (k == 0 ? "old" : "new") << " state but the call "
                   << (threw ? "failed" : "succeeded"));
        ++cases;
      }
    }
  }
  std::printf("faults: %lld I/O and disk-full cases over import, append, truncate, fork and delete, %lld faults "
              "injected, %lld calls failed cleanly (%lld messages name the store but not the conversation)\n",
              static_cast<long long>(cases), static_cast<long long>(injected), static_cast<long long>(failed_calls),
              static_cast<long long>(without_conversation));
  CHECK(failed_calls > 20);
}

TEST_CASE("faults: a nearly full store refuses an append cleanly and works once there is room", "[faults][full]") {
  TempDir dir;
  const std::string path = dir.file("full.db");
  colikv::Options o = wl::options(true);
  o.page_size = 4096;
  o.wal_checkpoint_bytes = 1000 * 4096;  // checkpoints at 1000 pages, as these figures assume
  Store s(path, o);
  append_to(s, "c0", 40);
  append_to(s, "c1", 20);
  const State before{{"c0", 40}, {"c1", 20}};
  SQLite::Database& db =
      static_cast<colikv::detail::SqliteCatalog&>(colikv::detail::StoreAccess::catalog(s)).database();
  const int64_t pages = db.execAndGet("PRAGMA page_count").getInt64();
  db.exec("PRAGMA max_page_count = " + std::to_string(pages + 2));
  try {
    append_to(s, "c2", 160);
    FAIL("an append of 160 tokens fitted in 2 free pages");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kDiskFull);
    CHECK(std::string(e.what()).find("'c2'") != std::string::npos);
    CHECK(std::string(e.what()).find("full") != std::string::npos);
  }
  try {
    append_to(s, "c0", 160);
    FAIL("growing c0 by 120 tokens fitted in 2 free pages");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kDiskFull);
  }
  CHECK(state_diff(s, before).empty());
  CHECK(s.verify().ok());
  db.exec("PRAGMA max_page_count = 1000000");
  append_to(s, "c2", 160);
  CHECK(state_diff(s, {{"c0", 40}, {"c1", 20}, {"c2", 160}}).empty());
}

TEST_CASE("faults: a small disk (file size cap) fails appends with kDiskFull or stores them whole", "[faults][full]") {
  FaultVfs& vfs = FaultVfs::get();
  colikv_test::RamTmpdir ram;
  TempDir dir;
  const std::string path = dir.file("cap.db");
  std::string tmpl;
  {
    colikv::Options o = wl::options(true);
    o.page_size = 4096;
    o.wal_checkpoint_bytes = 1000 * 4096;  // checkpoints at 1000 pages, as these figures assume
    Store s(path, o);
    append_to(s, "c0", 40);
  }
  tmpl = colikv_test::read_file(path);
  int refused = 0, stored = 0;
  for (int64_t cap = 0; cap <= 40 * 4096; cap += 4096) {
    restore(path, tmpl);
    vfs.reset();
    bool threw = false;
    {
      Store s(path, fault_options(true));
      vfs.set_size_cap(cap + static_cast<int64_t>(tmpl.size()));
      try {
        append_to(s, "c0", 100);
        append_to(s, "c1", 160);
      } catch (const Error& e) {
        threw = true;
        if (e.code() != ErrorCode::kDiskFull) FAIL("cap " << cap << ": " << e.what());
      }
      vfs.clear_faults();
    }
    vfs.reset();
    const int k = reopened_state(path, {{{"c0", 40}}, {{"c0", 100}}, {{"c0", 100}, {"c1", 160}}},
                                 "size cap " + std::to_string(cap));
    if (threw ? k == 2 : k != 2) FAIL("cap " << cap << ": state " << k << " but the calls " << (threw ? "failed" : "succeeded"));
    (threw ? refused : stored) += 1;
  }
  CHECK(refused > 0);
  CHECK(stored > 0);
}
