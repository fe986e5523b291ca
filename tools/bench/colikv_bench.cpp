// colikv_bench: colikv against the raw .coli_kv file it replaces, side by side
// in one process run (issue 4). The baseline is a faithful re-implementation of
// the engine's kv_persist.h: records fwrite'n after every turn, the count
// written last, fread to load; and the same with fdatasync so that its
// durability equals synchronous=FULL.
//
//   colikv_bench [--quick] [--json FILE] [--dir DIR] [--tokens N] [--turn K]
//                [--import-mb MB] [--many N] [--small-stored N] [--fork-tokens N] [--sample FILE]
//                [--only turns,async,bounds,sample,import,many,fork,small,budget] [--keep] [--pg URI]
//                [--cold-reps N]
//   colikv_bench --only isolation [--sync FULL,NORMAL]        (only when named: SQLite writers side by side)
//   colikv_bench --only pg-isolation,pg-throughput --pg URI   (only when named: writers side by side)
//
// --pg URI (a PostgreSQL server, e.g. tools/postgres.sh's) runs the turns, load
// and many workloads again on it, as "pg ..." rows beside SQLite's: each in
// its own schema colikv_bench_NAME, dropped afterwards.
//
// Every figure is printed as colikv, baseline and their ratio, in a table on
// stdout; --json FILE also writes them as JSON ("-" for stdout, then the table
// goes to stderr). Scratch files go to DIR (default /tmp/colikv-bench) and are
// removed at the end unless --keep.
//
// Durability pairs compared: synchronous=FULL against the baseline with
// fdatasync after the records and again after the count (a committed turn
// survives power loss in both); synchronous=NORMAL against the plain baseline
// (fwrite + fflush: a turn survives a process crash in both).
//
// This file holds main: the options, and which workloads run in what order.
// The harness (bench.h) times, keeps the baseline and writes the rows; each
// workload family has a file of its own (turns.cpp, async.cpp, small.cpp,
// small_appends.cpp, import.cpp, many.cpp, fork.cpp, budget.cpp, bounds.cpp,
// isolation.cpp, pg_throughput.cpp).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bench.h"

using namespace colikv_bench;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: colikv_bench [--quick] [--json FILE|-] [--dir DIR] [--tokens N] [--turn K] [--import-mb MB]\n"
               "                    [--many N] [--small-stored N] [--fork-tokens N] [--sample FILE] [--no-bf16] [--keep]\n"
               "                    [--only turns,async,bounds,sample,import,many,fork,small,budget] [--pg URI]\n"
               "                    [--only isolation] [--only pg-isolation,pg-throughput --pg URI]\n"
               "                    [--shape 78x576,4x80] [--data full,bf16-origin] [--sync FULL,NORMAL] [--page-size N]\n"
               "                    [--cold-reps N] [--tenant NAME]\n"
               "--shape, --data and --sync narrow the turns workload to those cases; --page-size sets the\n"
               "page size of every new SQLite store (default: the library's); --cold-reps sets how many\n"
               "warm and cold load pairs the async workload runs (default 9); --tenant opens every store of\n"
               "the run for that tenant (run without it alongside, to compare with the default tenant's);\n"
               "--small-stored sets how many conversations the store holds before the small workload's\n"
               "timed appends (default 100,000; 0 leaves out that row).\n");
  return 2;
}

// "a,b,c" -> {"a", "b", "c"}; empty items are dropped.
std::vector<std::string> split_list(const std::string& v) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= v.size()) {
    size_t q = v.find(',', p);
    if (q == std::string::npos) q = v.size();
    if (q > p) out.push_back(v.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--child") return child_main(argc, argv);
  Config cfg;
  {
    char buf[4096];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    cfg.self = n > 0 ? std::string(buf, static_cast<size_t>(n)) : argv[0];
  }
  bool tokens_set = false, import_set = false, many_set = false, fork_set = false, turn_set = false, cold_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--quick") cfg.quick = true;
    else if (a == "--json") cfg.json = next();
    else if (a == "--dir") cfg.dir = next();
    else if (a == "--tokens") { cfg.tokens = std::atoll(next().c_str()); tokens_set = true; }
    else if (a == "--turn") { cfg.turn = std::atoll(next().c_str()); turn_set = true; }
    else if (a == "--import-mb") { cfg.import_mb = std::atoll(next().c_str()); import_set = true; }
    else if (a == "--many") { cfg.many = std::atoll(next().c_str()); many_set = true; }
    else if (a == "--small-stored") cfg.small_stored = std::atoll(next().c_str());
    else if (a == "--fork-tokens") { cfg.fork_tokens = std::atoll(next().c_str()); fork_set = true; }
    else if (a == "--sample") cfg.sample = next();
    else if (a == "--no-bf16") cfg.bf16 = false;
    else if (a == "--keep") cfg.keep = true;
    else if (a == "--pg") cfg.pg = next();
    else if (a == "--page-size") store_settings().page_size = std::atoi(next().c_str());
    else if (a == "--tenant") store_settings().tenant = next();
    else if (a == "--cold-reps") { cfg.cold_reps = std::max(1, std::atoi(next().c_str())); cold_set = true; }
    else if (a == "--only") cfg.only = split_list(next());
    else if (a == "--shape") cfg.shapes = split_list(next());
    else if (a == "--data") cfg.kinds = split_list(next());
    else if (a == "--sync") cfg.syncs = split_list(next());
    else return usage();
  }
  cfg.turn_set = turn_set;
  if (cfg.quick) {
    if (!tokens_set) cfg.tokens = 1024;
    if (!turn_set) cfg.turn = 256;
    if (!import_set) cfg.import_mb = 256;
    if (!many_set) cfg.many = 1000;
    if (!fork_set) cfg.fork_tokens = 512;
    if (!cold_set) cfg.cold_reps = 3;
  }
#ifdef COLIKV_BENCH_NO_PRECISION
  cfg.bf16 = false;
#endif
  if (cfg.tokens < 1 || cfg.turn < 1 || cfg.small_stored < 0 || cfg.many < 25 || cfg.fork_tokens < 8 ||
      cfg.import_mb < 1)
    return usage();
  set_table_to_stderr(cfg.json == "-");
  ::mkdir(cfg.dir.c_str(), 0755);

  Shape big, small;
  big.name = "78x576";
  big.m.n_layers = 78; big.m.kv_lora = 512; big.m.qk_rope = 64; big.m.vocab = 154880; big.m.weights_id = "bench";
  small.name = "4x80";
  small.m.n_layers = 4; small.m.kv_lora = 64; small.m.qk_rope = 16; small.m.vocab = 154880; small.m.weights_id = "bench";

  auto mi = machine_info();
  std::fprintf(table_out(), "colikv_bench: %s, %s cores, %s; load %s\n", mi["cpu"].c_str(), mi["nproc"].c_str(),
               mi["memory"].c_str(), mi["loadavg_at_start"].c_str());
  print_header();
  const auto t_all = Clock::now();
  try {
    for (const Shape* sh : {&big, &small}) {
      if (!cfg.enabled("turns")) break;
      if (!Config::in(cfg.shapes, sh->name)) continue;
      // The small shape takes 16x the tokens so its turns are not all overhead.
      const int64_t n = sh == &big ? cfg.tokens : cfg.tokens * 16;
      const int64_t turn = sh == &big ? cfg.turn : cfg.turn * 16;
      Engine src(sh->m, n), dst(sh->m, n);
      for (Kind kind : {Kind::kFull, Kind::kBf16Origin}) {
        if (!Config::in(cfg.kinds, kind_name(kind))) continue;
        src.compute(0, n, 1, kind);
        for (auto sync : {colikv::Synchronous::kFull, colikv::Synchronous::kNormal})
          if (Config::in(cfg.syncs, sync_name(sync))) bench_turns(cfg, *sh, kind, "f32", sync, src, dst, n, turn);
        if (cfg.bf16 && Config::in(cfg.syncs, "NORMAL")) bench_turns(cfg, *sh, kind, "bf16", colikv::Synchronous::kNormal, src, dst, n, turn);
      }
    }
    if (cfg.enabled("async") && Config::in(cfg.shapes, big.name)) {
      // The shape: 78 x (512+64), 512-token turns to 2,048 tokens.
      const int64_t n = tokens_set ? cfg.tokens : 2048, turn = turn_set ? cfg.turn : 512;
      Engine src(big.m, n), dst(big.m, n);
      src.compute(0, n, 1, Kind::kFull);
      for (auto sync : {colikv::Synchronous::kFull, colikv::Synchronous::kNormal})
        if (Config::in(cfg.syncs, sync_name(sync))) bench_async(cfg, big, sync, src, dst, n, turn);
    }
    if (cfg.enabled("small")) {
      Shape tiny, two;  // the engine's tiny test model (644-byte records); a 2-layer shape
      tiny.name = "4x40";
      tiny.m.n_layers = 4; tiny.m.kv_lora = 32; tiny.m.qk_rope = 8; tiny.m.vocab = 264; tiny.m.weights_id = "bench";
      two.name = "2x40";
      two.m.n_layers = 2; two.m.kv_lora = 32; two.m.qk_rope = 8; two.m.vocab = 154880; two.m.weights_id = "bench";
      bench_tiny_store(cfg, tiny, 100);  // 64,400 bytes of KV: the "64 KB conversation"
      for (auto sync : {colikv::Synchronous::kNormal, colikv::Synchronous::kFull}) {
        if (!Config::in(cfg.syncs, sync_name(sync))) continue;
        bench_small_turns(cfg, tiny, sync, cfg.quick ? 480 : 1500, 15);
        bench_small_turns(cfg, big, sync, cfg.quick ? 60 : 240, 15);
        bench_small_appends(cfg, two, sync, cfg.quick ? 500 : 2000, 48, 0);
        if (cfg.small_stored > 0) bench_small_appends(cfg, two, sync, cfg.quick ? 500 : 2000, 48, cfg.small_stored);
      }
      remove_store(cfg.dir + "/appends-" + std::to_string(cfg.small_stored) + ".db");
    }
    if (cfg.enabled("bounds")) {
      bench_bounds(cfg, big, Kind::kFull);
      bench_bounds(cfg, big, Kind::kBf16Origin);
    }
    if (cfg.enabled("sample"))
      for (auto sync : {colikv::Synchronous::kFull, colikv::Synchronous::kNormal}) bench_sample(cfg, sync);
    if (cfg.enabled("import")) {
      bench_import(cfg, big, Kind::kFull);
      bench_import(cfg, small, Kind::kFull);
      Shape sample;  // the file fixes the shape; only the name is used
      sample.name = "sample";
      bench_import(cfg, sample, Kind::kGenuine, cfg.sample);
    }
    if (cfg.enabled("many")) {
      bench_many(cfg, small, 32);
      bench_many(cfg, big, 1);
    }
    if (cfg.enabled("budget")) bench_budget(cfg, cfg.quick ? 20 : 24);
    // Only when asked for: isolation writes a large turn twice over, the pg-
    // workloads need --pg and write gigabytes to the server.
    if (!cfg.only.empty() && cfg.enabled("isolation")) bench_sqlite_isolation(cfg, big);
    if (!cfg.only.empty() && cfg.enabled("pg-isolation")) bench_pg_isolation(cfg, big);
    if (!cfg.only.empty() && cfg.enabled("pg-throughput")) bench_pg_throughput(cfg, big);
    if (cfg.enabled("fork")) {
      bench_fork(cfg, big, cfg.fork_tokens, cfg.fork_tokens / 8);
      bench_fork(cfg, small, cfg.fork_tokens * 16, cfg.fork_tokens * 2);
    }
  } catch (const colikv::Error& e) {
    std::fprintf(stderr, "colikv_bench: %s\n", e.what());
    return 1;
  }
  std::fprintf(table_out(), "total %.1f s\n", since(t_all));
  if (!cfg.json.empty()) {
    FILE* f = cfg.json == "-" ? stdout : std::fopen(cfg.json.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", cfg.json.c_str());
      return 1;
    }
    write_json(f, mi);
    if (f != stdout) std::fclose(f);
  }
  if (!cfg.keep) ::rmdir(cfg.dir.c_str());
  return 0;
}
