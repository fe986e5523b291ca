// small (turns and sizes): small turns saved through write() as an engine
// adapter saves them, and the size of a store holding one small conversation,
// against the engine's .coli_kv file.
#include <unistd.h>

#include "bench.h"
#include "bench_access.h"

namespace colikv_bench {

namespace {

// Bytes of a store after close: the file and whatever companions remain.
int64_t store_bytes_after_close(const std::string& db) {
  return file_size(db) + file_size(db + "-wal") + file_size(db + "-shm");
}

}  // namespace

// One conversation grown by `turn`-token turns to n tokens through Store::write
// from the committed count (what an engine adapter calls after every turn),
// then loaded whole (what it calls at start); baseline kv_persist.h.
void bench_small_turns(const Config& cfg, const Shape& shape, colikv::Synchronous sync, int64_t n, int64_t turn) {
  const colikv::ModelSignature& m = shape.m;
  const std::string db = cfg.dir + "/small.db", raw = cfg.dir + "/small.coli_kv";
  const bool full = sync == colikv::Synchronous::kFull;
  remove_store(db);
  ::unlink(raw.c_str());
  Engine src(m, n), dst(m, n);
  src.compute(0, n, 3, Kind::kFull);
  std::vector<double> save_c, save_b, load_c, load_b;
  // Each turn's round trips to a server, in all and its link's (none on SQLite).
  std::vector<double> trips, link_trips;
  // The engine adapter's calls: a write() after every turn, a whole load at start.
  auto run_store = [&](const std::string& location, std::vector<double>& save, std::vector<double>& load) {
    colikv::Store store(location, store_options(sync));
    trips.clear();
    link_trips.clear();
    for (int64_t len = turn; len <= n; len += turn) {
      const int64_t trips0 = access::round_trips(store), link0 = access::link_round_trips(store);
      auto t0 = Clock::now();
      store.write("conv", m, src.tokens.data(), len - turn, len, src.source());
      save.push_back(since(t0) * 1e3);
      trips.push_back(static_cast<double>(access::round_trips(store) - trips0));
      link_trips.push_back(static_cast<double>(access::link_round_trips(store) - link0));
    }
    for (int r = 0; r < 5; ++r) {
      auto t0 = Clock::now();
      store.load("conv", m, dst.tokens.data(), dst.cap, dst.target());
      load.push_back(since(t0) * 1e3);
    }
  };
  run_store(db, save_c, load_c);
  const int64_t stored_file = store_bytes_after_close(db);
  {
    Baseline b(raw, m, full);
    for (int64_t len = turn; len <= n; len += turn) {
      auto t0 = Clock::now();
      b.append(src, len);
      save_b.push_back(since(t0) * 1e3);
    }
    for (int r = 0; r < 5; ++r) {
      auto t0 = Clock::now();
      b.load(dst);
      load_b.push_back(since(t0) * 1e3);
    }
  }
  const int64_t raw_file = file_size(raw);
  remove_store(db);
  ::unlink(raw.c_str());
  const std::string note = std::to_string(turn) + "-token turns to " + std::to_string(n) + " through write()";
  add({"small", shape.name, "full", "f32", sync_name(sync), "save median", "ms/turn", median(save_c), median(save_b), true,
       "", -1, note});
  add({"small", shape.name, "full", "f32", sync_name(sync), "save p95", "ms/turn", pct(save_c, 0.95), pct(save_b, 0.95),
       true, "", -1, ""});
  add({"small", shape.name, "full", "f32", sync_name(sync), "load whole", "ms", median(load_c), median(load_b), true, "",
       -1, std::to_string(n) + " tokens, median of 5"});
  add({"small", shape.name, "full", "f32", sync_name(sync), "file after close", "KB", stored_file / 1e3,
       raw_file / 1e3, true, "", -1, "the store against the .coli_kv file"});
  if (!cfg.pg.empty()) {
    std::vector<double> save_pg, load_pg;
    run_store(pg_store(cfg, "small"), save_pg, load_pg);
    drop_pg_store(cfg, "small");
    add({"small", shape.name, "full", "f32", sync_name(sync), "pg save median", "ms/turn", median(save_pg),
         median(save_b), true, "", -1, "PostgreSQL, loopback"});
    add({"small", shape.name, "full", "f32", sync_name(sync), "pg load whole", "ms", median(load_pg), median(load_b),
         true, "", -1, ""});
    // The first turn prepares the connection's statements: the median is a turn's own.
    add({"small", shape.name, "full", "f32", sync_name(sync), "pg round trips a turn", "", median(trips), 0, false, "",
         -1, "median; max " + std::to_string(static_cast<int64_t>(pct(trips, 1.0)))});
    add({"small", shape.name, "full", "f32", sync_name(sync), "pg link round trips a turn", "", median(link_trips), 0,
         false, "", -1, "the statement writing the chunk list and count; max " +
                            std::to_string(static_cast<int64_t>(pct(link_trips, 1.0)))});
  }
}

// The size of a store holding one small conversation, appended in one call,
// after close (the file and whatever companions remain), against its
// .coli_kv file.
void bench_tiny_store(const Config& cfg, const Shape& shape, int64_t n) {
  const colikv::ModelSignature& m = shape.m;
  const std::string db = cfg.dir + "/tiny.db", raw = cfg.dir + "/tiny.coli_kv";
  remove_store(db);
  ::unlink(raw.c_str());
  Engine e(m, n);
  e.compute(0, n, 5, Kind::kFull);
  {
    colikv::Store store(db, store_options(colikv::Synchronous::kNormal));
    store.append("conv", m, e.tokens.data(), n, e.source());
  }
  const int64_t stored = store_bytes_after_close(db);
  {
    Baseline b(raw, m, false);
    b.append(e, n);
  }
  const int64_t raw_bytes = file_size(raw);
  remove_store(db);
  ::unlink(raw.c_str());
  add({"small", shape.name, "full", "f32", "NORMAL", "one-conversation store", "KB", stored / 1e3, raw_bytes / 1e3, true,
       "", -1, std::to_string(n) + " tokens in one append, after close, against the .coli_kv file"});
}

}  // namespace colikv_bench
