// budget: the file under a steady byte budget against a vacuumed copy of itself.
#include <unistd.h>

#include <sqlite3.h>

#include "bench.h"

namespace colikv_bench {

// The file under a steady byte budget (issue 25): two engines (two Store
// connections on one store, as two processes have) save conversations turn by
// turn with Options::max_store_bytes set, round after round, so that each
// round evicts the older ones. After each round the store is checkpointed
// and its file measured against a vacuumed copy of itself (VACUUM INTO):
// the budget bounds the file when that ratio stays flat.
void bench_budget(const Config& cfg, int rounds) {
  Shape mock;  // the mock engine's shape of the runs: 2 x (256+64)
  mock.name = "2x320";
  mock.m.n_layers = 2; mock.m.kv_lora = 256; mock.m.qk_rope = 64; mock.m.vocab = 1000; mock.m.weights_id = "bench";
  const colikv::ModelSignature& m = mock.m;
  // Conversations of 2.56 MB of KV data; the budget keeps about three, so
  // each round evicts the rounds before (a budget under one conversation
  // makes two engines evict and re-save each other's whole history each turn).
  const int64_t n = 1000, turn = 40;
  const int64_t budget = 8000000;
  const std::string db = cfg.dir + "/budget.db", copy = cfg.dir + "/budget-vacuumed.db";
  remove_store(db);
  colikv::Options o = store_options(colikv::Synchronous::kNormal);
  o.max_store_bytes = budget;
  Engine e(m, n);
  e.compute(0, n, 21, Kind::kFull);
  for (int64_t p = 0; p < n; ++p) e.tokens[static_cast<size_t>(p)] %= 1000;
  std::vector<double> ratio;
  int64_t first_file = 0, last_file = 0, last_copy = 0;
  auto t0 = Clock::now();
  {
    colikv::Store a(db, o), b(db, o);
    for (int r = 0; r < rounds; ++r) {
      for (int k = 0; k < 2; ++k) {
        e.tokens[0] = 2 * r + k;  // a history of its own: no chunk shared with another round
        colikv::Store& s = k == 0 ? a : b;
        const std::string id = "e" + std::to_string(k) + "-r" + std::to_string(r);
        for (int64_t len = turn; len <= n; len += turn) s.append(id, m, e.tokens.data(), len, e.source());
      }
      sqlite3* h = nullptr;
      if (sqlite3_open(db.c_str(), &h) != SQLITE_OK) throw colikv::Error(colikv::ErrorCode::kIO, "open " + db);
      sqlite3_exec(h, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
      ::unlink(copy.c_str());
      const std::string into = "VACUUM INTO '" + copy + "'";
      if (sqlite3_exec(h, into.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
        const std::string err = sqlite3_errmsg(h);
        sqlite3_close(h);
        throw colikv::Error(colikv::ErrorCode::kIO, db + ": " + into + ": " + err);
      }
      sqlite3_close(h);
      last_file = file_size(db) + file_size(db + "-wal");
      last_copy = file_size(copy);
      if (r == 0) first_file = last_file;
      ratio.push_back(static_cast<double>(last_file) / static_cast<double>(last_copy));
    }
  }
  const double secs = since(t0);
  remove_store(db);
  ::unlink(copy.c_str());
  const double worst = *std::max_element(ratio.begin(), ratio.end());
  char note[256];
  std::snprintf(note, sizeof note,
                "%d rounds x 2 engines x %lld tokens in %lld-token turns, budget %.1f MB; file %.1f MB after round 1; "
                "worst ratio %.3f; %.1f s",
                rounds, static_cast<long long>(n), static_cast<long long>(turn), budget / 1e6, first_file / 1e6, worst,
                secs);
  add({"budget", mock.name, "full", "f32", "NORMAL", "file / vacuumed copy", "MB", last_file / 1e6, last_copy / 1e6,
       true, "<= 1.3", worst <= 1.3 ? 1 : 0, note});
}

}  // namespace colikv_bench
