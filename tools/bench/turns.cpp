// turns, load, size and sample: one conversation grown turn by turn, then
// loaded, against the engine's .coli_kv file (and again on --pg); the genuine
// engine-written sample the same way.
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "bench.h"
#include "bench_access.h"

namespace colikv_bench {

void bench_turns(const Config& cfg, const Shape& shape, Kind kind, const std::string& precision,
                 colikv::Synchronous sync, Engine& src, Engine& dst, int64_t n_tokens, int64_t turn) {
  const colikv::ModelSignature& m = shape.m;
  const std::string db = cfg.dir + "/turns.db", raw = cfg.dir + "/turns.coli_kv";
  const std::string sn = sync_name(sync);
  const bool full = sync == colikv::Synchronous::kFull;
  remove_store(db);
  ::unlink(raw.c_str());
  const double mb = static_cast<double>(n_tokens) * static_cast<double>(m.record_bytes()) / 1e6;
  std::vector<int64_t> lens;
  for (int64_t len = std::min(turn, n_tokens);; len = std::min(len + turn, n_tokens)) {
    lens.push_back(len);
    if (len == n_tokens) break;
  }

  // colikv, on a store at `location`: appends turn by turn, then loads.
  struct Run {
    std::vector<double> lat;
    std::vector<double> trips, link_trips;  // each turn's round trips to a server, and its link's
    double total = 0, load = 0, max_err = 0;
    int64_t stored = 0;
    bool exact = false;
  };
  auto run_colikv = [&](const std::string& location) {
    Run r;
    ::sync();
    colikv::Store store(location, store_options(sync, precision));
    int64_t prev = 0;
    for (int64_t len : lens) {
      const int64_t trips0 = access::round_trips(store), link0 = access::link_round_trips(store);
      auto t0 = Clock::now();
      store.append("conv", m, src.tokens.data(), len, src.source());
      double t = since(t0);
      r.trips.push_back(static_cast<double>(access::round_trips(store) - trips0));
      r.link_trips.push_back(static_cast<double>(access::link_round_trips(store) - link0));
      r.lat.push_back(t * 1e3 / static_cast<double>(len - prev) * static_cast<double>(turn));
      r.total += t;
      prev = len;
    }
    r.stored = store.stats().total.stored_bytes;
    std::vector<double> reps;
    for (int k = 0; k < cfg.load_reps; ++k) {
      dst.zero(n_tokens);
      auto t0 = Clock::now();
      int64_t got = store.load("conv", m, dst.tokens.data(), dst.cap, dst.target());
      reps.push_back(since(t0));
      if (got != n_tokens) std::fprintf(stderr, "colikv load returned %" PRId64 "\n", got);
    }
    r.load = median(reps);
    r.exact = src.same_as(dst, n_tokens);
    r.max_err = src.max_rel_error(dst, n_tokens);
    return r;
  };
  std::vector<double> lat_b;
  double total_b = 0;
  int64_t dbfile = 0;
  double load_b = 0;
  const Run sqlite = run_colikv(db);
  const std::vector<double>& lat_c = sqlite.lat;
  const double total_c = sqlite.total, load_c = sqlite.load, max_err = sqlite.max_err;
  const int64_t stored = sqlite.stored;
  const bool exact = sqlite.exact;
  dbfile = file_size(db) + file_size(db + "-wal");
  remove_store(db);

  // baseline
  {
    ::sync();
    Baseline b(raw, m, full);
    int64_t prev = 0;
    for (int64_t len : lens) {
      auto t0 = Clock::now();
      b.append(src, len);
      double t = since(t0);
      lat_b.push_back(t * 1e3 / static_cast<double>(len - prev) * static_cast<double>(turn));
      total_b += t;
      prev = len;
    }
    std::vector<double> reps;
    for (int r = 0; r < cfg.load_reps; ++r) {
      dst.zero(n_tokens);
      auto t0 = Clock::now();
      int64_t got = b.load(dst);
      reps.push_back(since(t0));
      if (got != n_tokens || !src.same_as(dst, n_tokens)) std::fprintf(stderr, "baseline load mismatch\n");
    }
    load_b = median(reps);
  }
  const int64_t rawfile = file_size(raw);
  ::unlink(raw.c_str());

  const std::string k = kind_name(kind);
  const std::string durab = full ? "baseline: fwrite+fdatasync x2 per turn" : "baseline: fwrite+fflush per turn";
  auto row = [&](const std::string& wl, const std::string& metric, const std::string& unit, double c, double b,
                 const std::string& target, int met, const std::string& note) {
    Row r{wl, shape.name, k, precision, sn, metric, unit, c, b, true, target, met, note};
    add(r);
  };
  const double thr_c = mb / total_c, thr_b = mb / total_b;
  row("turns", "append throughput", "MB/s", thr_c, thr_b, ">=0.5x", thr_c / thr_b >= 0.5, durab);
  row("turns", "append latency median", "ms/turn", median(lat_c), median(lat_b), "", -1,
      std::to_string(turn) + "-token turns to " + std::to_string(n_tokens));
  row("turns", "append latency p95", "ms/turn", pct(lat_c, 0.95), pct(lat_b, 0.95), "", -1, "");
  const double lt_c = mb / load_c, lt_b = mb / load_b;
  row("load", "load throughput", "MB/s", lt_c, lt_b, ">=0.6x", lt_c / lt_b >= 0.6,
      "warm cache; median of " + std::to_string(cfg.load_reps));
  // Size: stored payload and whole file against the raw .coli_kv file.
  const double raw_bytes = static_cast<double>(n_tokens) * static_cast<double>(m.record_bytes());
  std::string size_target;
  int size_met = -1;
  if (precision == "f32" && kind == Kind::kFull) size_target = "<=0.88";
  if (precision == "f32" && kind == Kind::kBf16Origin) size_target = "<=0.40";
  if (!size_target.empty())
    size_met = stored / raw_bytes <= (kind == Kind::kFull ? 0.88 : 0.40);
  row("size", "stored payload / raw", "MB", stored / 1e6, raw_bytes / 1e6, size_target, size_met,
      "baseline column: raw record bytes");
  row("size", "file / .coli_kv file", "MB", dbfile / 1e6, rawfile / 1e6, "", -1, "database file after close");
  char note[96];
  std::snprintf(note, sizeof note, "bit-exact: %s", exact ? "yes" : "no");
  Row e{"load", shape.name, k, precision, sn, "max relative error", "", max_err, 0, false, precision == "f32" ? "==0" : "<=2^-8",
        precision == "f32" ? (max_err == 0 && exact) : (max_err <= 1.0 / 256), note};
  add(e);
  if (!cfg.pg.empty() && precision == "f32") {
    // The same turns on PostgreSQL over loopback; its baseline column is the
    // raw file's too, so the ratios sit beside SQLite's rows above.
    const std::string pg_location = pg_store(cfg, "turns");
    const Run pg = run_colikv(pg_location);
    // The load against a plain binary SELECT of the same payload rows on a
    // libpq connection of its own, alternated, so both see the same server.
    std::vector<double> pg_load_reps, select_reps;
    {
      colikv::Store store(pg_location, store_options(sync, precision));
      for (int rep = 0; rep < std::max(cfg.load_reps, 3); ++rep) {
        dst.zero(n_tokens);
        auto t0 = Clock::now();
        store.load("conv", m, dst.tokens.data(), dst.cap, dst.target());
        pg_load_reps.push_back(since(t0));
        t0 = Clock::now();
        const int64_t bytes = plain_select_payloads(pg_location);
        select_reps.push_back(since(t0));
        if (bytes <= 0) std::fprintf(stderr, "plain SELECT read no payload\n");
      }
    }
    drop_pg_store(cfg, "turns");
    const std::string pg_note = "PostgreSQL, loopback; synchronous_commit " + std::string(full ? "on" : "off");
    row("turns", "pg append throughput", "MB/s", mb / pg.total, thr_b, "", -1, pg_note);
    row("turns", "pg append latency median", "ms/turn", median(pg.lat), median(lat_b), "", -1, "");
    // The first turn prepares the connection's statements: the median is a turn's own.
    add({"turns", shape.name, k, precision, sn, "pg round trips a turn", "", median(pg.trips), 0, false, "", -1,
         "median; max " + std::to_string(static_cast<int64_t>(pct(pg.trips, 1.0)))});
    add({"turns", shape.name, k, precision, sn, "pg link round trips a turn", "", median(pg.link_trips), 0, false, "",
         -1, "the statement writing the chunk list and count; max " +
                 std::to_string(static_cast<int64_t>(pct(pg.link_trips, 1.0)))});
    row("load", "pg load throughput", "MB/s", mb / pg.load, lt_b, "", -1,
        std::string("bit-exact: ") + (pg.exact ? "yes" : "no"));
    const double pl = mb / median(pg_load_reps), ps = mb / median(select_reps);
    row("load", "pg load vs plain binary SELECT", "MB/s", pl, ps, ">=0.7x", pl / ps >= 0.7,
        "baseline: libpq SELECT of the payload rows, binary; alternated, median of " +
            std::to_string(pg_load_reps.size()));
  }
}

void bench_sample(const Config& cfg, colikv::Synchronous sync) {
  int32_t h[8] = {0};
  {
    FILE* f = std::fopen(cfg.sample.c_str(), "rb");
    char mg[8];
    if (!f || std::fread(mg, 1, 8, f) != 8 || std::fread(h, 4, 8, f) != 8) {
      std::fprintf(stderr, "sample %s unreadable: skipped\n", cfg.sample.c_str());
      if (f) std::fclose(f);
      return;
    }
    std::fclose(f);
  }
  Shape s;
  s.m.n_layers = h[0];
  s.m.kv_lora = h[1];
  s.m.qk_rope = h[2];
  s.m.index_hd = h[3];
  s.m.n_indexed = h[4];
  s.m.vocab = h[5];
  s.name = "sample";
  if (s.m.n_indexed != 0) {
    std::fprintf(stderr, "sample has indexed layers: not supported by the benchmark, skipped\n");
    return;
  }
  Engine src(s.m, h[6]), dst(s.m, h[6]);
  int64_t n = 0;
  if (!src.from_file(cfg.sample, n) || n < 1) return;
  // The sample is 51 tokens: one turn of everything, load repeated many times.
  Config c2 = cfg;
  c2.load_reps = 25;
  bench_turns(c2, s, Kind::kGenuine, "f32", sync, src, dst, n, n);
  if (cfg.bf16) bench_turns(c2, s, Kind::kGenuine, "bf16", sync, src, dst, n, n);
}

}  // namespace colikv_bench
