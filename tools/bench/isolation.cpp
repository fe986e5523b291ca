// isolation and pg-isolation: two writers of different conversations side by
// side, each with a Store of its own.
#include <unistd.h>

#include <atomic>
#include <thread>

#include "bench.h"

namespace colikv_bench {

// isolation (SQLite) and pg-isolation: host A commits one 512-token turn of
// 78x576 to its conversation with a Store of its own, in another thread,
// while host B commits 4-token turns of a 2-layer model to another
// conversation, one after another: B's turn times while A's turn is open,
// against A's turn time. `tag` names the rows (isolation, pgisol).
void bench_isolation(const Config& cfg, const Shape& big, const std::string& location, colikv::Synchronous sync,
                     const std::string& tag) {
  colikv::ModelSignature two = big.m;
  two.n_layers = 2;
  two.kv_lora = 32;
  two.qk_rope = 8;
  const int64_t a_turn = cfg.turn_set ? cfg.turn : 512, b_turn = 4, b_cap = 1 << 16;
  Engine a(big.m, a_turn + 4), b(two, b_cap);
  a.compute(0, a_turn + 4, 11, Kind::kFull);
  b.compute(0, b_cap, 12, Kind::kFull);
  colikv::Store host_a(location, store_options(sync));
  colikv::Store host_b(location, store_options(sync));
  // Both models and conversations exist: what is measured is the turns alone.
  host_a.append("a", big.m, a.tokens.data(), 4, a.source());
  host_b.append("b", two, b.tokens.data(), b_turn, b.source());
  ::sync();  // no writeback of the set-up competes with either host
  std::atomic<int> a_state{0};  // 1: A's turn under way, 2: committed
  double a_ms = 0;
  std::thread ta([&] {
    a_state = 1;
    const auto t0 = Clock::now();
    host_a.append("a", big.m, a.tokens.data(), 4 + a_turn, a.source());
    a_ms = since(t0) * 1e3;
    a_state = 2;
  });
  while (a_state == 0) std::this_thread::yield();
  // Every B turn begun while A's is open counts, the last one too: a turn
  // that waited for A's commit ends after it, and is the wait measured.
  std::vector<double> during;
  int64_t committed_during = 0;
  int64_t len = b_turn;
  while (a_state == 1 && len + b_turn <= b_cap) {
    len += b_turn;
    const auto t0 = Clock::now();
    host_b.append("b", two, b.tokens.data(), len, b.source());
    during.push_back(since(t0) * 1e3);
    if (a_state == 1) ++committed_during;  // ended inside A's turn
  }
  ta.join();
  const double worst = during.empty() ? a_ms : *std::max_element(during.begin(), during.end());
  const std::string sn = sync_name(sync);
  const std::string note = std::to_string(a_turn) + "-token turn of A (" + big.name + ") against B's " +
                           std::to_string(b_turn) + "-token turns (2x40), own Stores, " + sn;
  add({tag, big.name, "full", "f32", sn, "A's turn", "ms", a_ms, 0, false, "", -1, note});
  add({tag, "2x40", "full", "f32", sn, "B worst during A / A", "ms", worst, a_ms, true, "<= 0.1",
       worst <= 0.1 * a_ms ? 1 : 0, "ratio: B's worst turn over A's turn"});
  add({tag, "2x40", "full", "f32", sn, "B median during A", "ms", during.empty() ? 0 : median(during), a_ms, true, "",
       -1, ""});
  add({tag, "2x40", "full", "f32", sn, "B turns during A", "turns", static_cast<double>(committed_during), 0, false,
       ">= 1", committed_during > 0 ? 1 : 0, "committed while A's turn was open"});
}

void bench_sqlite_isolation(const Config& cfg, const Shape& big) {
  for (auto sync : {colikv::Synchronous::kFull, colikv::Synchronous::kNormal}) {
    if (!Config::in(cfg.syncs, sync_name(sync))) continue;
    const std::string db = cfg.dir + "/isolation.db";
    remove_store(db);
    bench_isolation(cfg, big, db, sync, "isolation");
    remove_store(db);
  }
}

void bench_pg_isolation(const Config& cfg, const Shape& big) {
  if (cfg.pg.empty()) throw std::runtime_error("--only pg-isolation needs --pg URI");
  bench_isolation(cfg, big, pg_store(cfg, "isolation"), colikv::Synchronous::kFull, "pgisol");
  drop_pg_store(cfg, "isolation");
}

}  // namespace colikv_bench
