// async: append_async against the engine's own write of each turn (the
// engine's stall, the time until durable, a turn a second, the queue bound),
// and loads warm and cold against fread.
#include <fcntl.h>
#include <unistd.h>

#include <optional>
#include <thread>

#include "bench.h"

namespace colikv_bench {

namespace {

// Drops a file's pages from the page cache (after syncing them): a cold read
// of that file alone, not of the whole machine.
void evict_from_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// Loads of the async workload's conversation, each paired with fread of the
// raw file right before or after it (alternating): warm; cold (the store's
// files and the raw file evicted from the page cache first) through a Store
// kept open, whose own page cache still holds the small B-tree pages; and
// cold through a Store opened after the eviction, as after an engine restart
// (the open itself not timed). A cold load on a shared virtual disk varies by
// 2x from one load to the next, so the cold rows also give each pair's own
// ratio: its median, quartiles and how many pairs reach the target.
void bench_async_loads(const Config& cfg, const Shape& shape, const std::string& db, const std::string& raw,
                       const std::string& sn, Engine& src, Engine& dst, int64_t n_tokens) {
  enum Case { kWarm, kCold, kColdFresh };
  const colikv::ModelSignature& m = shape.m;
  const colikv::Options options = store_options(colikv::Synchronous::kFull);
  std::vector<double> ours_t[3], fread_t[3];
  ::sync();  // no writeback of the earlier workloads competes with either side
  std::optional<colikv::Store> kept(std::in_place, db, options);
  Baseline b(raw, m, false);
  for (int rep = 0; rep < cfg.cold_reps; ++rep)
    for (Case c : {kWarm, kCold, kColdFresh}) {
      auto ours = [&] {
        if (c == kColdFresh) kept.reset();
        if (c != kWarm) {
          evict_from_cache(db);
          evict_from_cache(db + "-wal");
        }
        if (!kept) kept.emplace(db, options);
        dst.zero(n_tokens);
        auto t0 = Clock::now();
        kept->load("conv", m, dst.tokens.data(), dst.cap, dst.target());
        ours_t[c].push_back(since(t0));
        if (!src.same_as(dst, n_tokens)) std::fprintf(stderr, "async: colikv load mismatch\n");
      };
      auto theirs = [&] {
        if (c != kWarm) evict_from_cache(raw);
        dst.zero(n_tokens);
        auto t0 = Clock::now();
        b.load(dst);
        fread_t[c].push_back(since(t0));
      };
      if (rep % 2 == 0) { ours(); theirs(); } else { theirs(); ours(); }
    }
  const double mb = static_cast<double>(n_tokens) * static_cast<double>(m.record_bytes()) / 1e6;
  const std::string reps = "median of " + std::to_string(cfg.cold_reps);
  auto row = [&](Case c, const std::string& metric, const std::string& target, const std::string& note) {
    const double ours_mbs = mb / median(ours_t[c]), fread_mbs = mb / median(fread_t[c]);
    const int met = target.empty() ? -1 : ours_mbs / fread_mbs >= 1.1;
    add(Row{"load", shape.name, "full", "f32", sn, metric, "MB/s", ours_mbs, fread_mbs, true, target, met, note});
  };
  row(kWarm, "load throughput warm", "", reps + ", vs fread");
  row(kCold, "load throughput cold", ">=1.1x",
      reps + "; files fsync'd + POSIX_FADV_DONTNEED first; vs fread; " + pair_ratios(fread_t[kCold], ours_t[kCold]));
  row(kColdFresh, "load throughput cold, Store just opened", "",
      reps + "; as above, the Store opened after the eviction; " +
          pair_ratios(fread_t[kColdFresh], ours_t[kColdFresh]));
}

// The most turns still queued or committing when append_async queued another
// on this Store, from its own count (Metrics::async_queue_depth, which counts
// the new turn too): exact up to one, above that the bound of its bucket.
double deepest_queue(colikv::Store& store) {
  const colikv::Histogram h = store.metrics().async_queue_depth;
  for (size_t i = h.counts.size(); i-- > 0;)
    if (h.counts[i] > 0)
      return i < h.upper_bounds.size() ? h.upper_bounds[i] - 1 : h.upper_bounds.back();
  return 0;
}

}  // namespace

// append_async against the engine's own write of the same records, turn by
// turn in one run, the two alternating which goes first: the engine's stall
// (how long append_async holds its thread) against the plain fwrite; the time
// until the turn is durable (append_async + wait) against the baseline of the
// same durability; the writer at one turn a second (the queue stays empty);
// the queue bound at work (turns back to back); and loads warm and cold.
void bench_async(const Config& cfg, const Shape& shape, colikv::Synchronous sync, Engine& src, Engine& dst,
                 int64_t n_tokens, int64_t turn) {
  const colikv::ModelSignature& m = shape.m;
  const std::string db = cfg.dir + "/async.db", raw = cfg.dir + "/async.coli_kv", rawsync = cfg.dir + "/async_sync.coli_kv";
  const std::string sn = sync_name(sync);
  const bool full = sync == colikv::Synchronous::kFull;
  const int rounds = cfg.quick ? 2 : 3;
  std::vector<double> stall, fwrite_t, durable, durable_b;
  std::vector<double> first_stall, first_fwrite;  // each round's first turn, of a Store just opened
  int64_t turns_per_round = 0;
  for (int r = 0; r < rounds; ++r) {
    remove_store(db);
    ::unlink(raw.c_str());
    ::unlink(rawsync.c_str());
    ::sync();
    // Opened as the engine adapter opens its store (prefault_async_staging).
    colikv::Options engine_options = store_options(sync);
    engine_options.prefault_async_staging = true;
    colikv::Store store(db, engine_options);
    Baseline plain(raw, m, false), durable_baseline(rawsync, m, full);
    // As after an engine restart: the store opened, then the engine computes its first turn.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    int k = 0;
    for (int64_t len = std::min(turn, n_tokens); len <= n_tokens; len += turn, ++k) {
      auto ours = [&] {
        auto t0 = Clock::now();
        store.append_async("conv", m, src.tokens.data(), len, src.source());
        stall.push_back(since(t0) * 1e3);
        if (k == 0) first_stall.push_back(stall.back());
        store.wait("conv");
        durable.push_back(since(t0) * 1e3);
      };
      auto theirs = [&] {
        auto t0 = Clock::now();
        plain.append(src, len);
        fwrite_t.push_back(since(t0) * 1e3);
        if (k == 0) first_fwrite.push_back(fwrite_t.back());
        t0 = Clock::now();
        durable_baseline.append(src, len);
        durable_b.push_back(since(t0) * 1e3);
      };
      if ((r + k) % 2 == 0) { ours(); theirs(); } else { theirs(); ours(); }
    }
    turns_per_round = k;
    store.wait();
  }
  // As after an engine restart: a Store opened on the conversation as the
  // engine adapter opens it (prefault_async_staging), one slot restored by a
  // load, then, once the engine has computed it, the first turn of another
  // slot's new conversation, against fwrite of the same turn.
  std::vector<double> restart_stall, restart_fwrite;
  for (int r = 0; r < rounds; ++r) {
    colikv::Options engine_options = store_options(sync);
    engine_options.prefault_async_staging = true;
    colikv::Store store(db, engine_options);
    dst.zero(n_tokens);
    store.load("conv", m, dst.tokens.data(), dst.cap, dst.target());
    ::unlink(raw.c_str());
    Baseline plain(raw, m, false);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const int64_t len = std::min(turn, n_tokens);
    auto ours = [&] {
      auto t0 = Clock::now();
      store.append_async("slot" + std::to_string(r), m, src.tokens.data(), len, src.source());
      restart_stall.push_back(since(t0) * 1e3);
    };
    auto theirs = [&] {
      auto t0 = Clock::now();
      plain.append(src, len);
      restart_fwrite.push_back(since(t0) * 1e3);
    };
    if (r % 2 == 0) { ours(); theirs(); } else { theirs(); ours(); }
    store.wait();
  }
  const std::string samples = std::to_string(rounds) + " x " + std::to_string(turns_per_round) + " turns of " +
                              std::to_string(turn) + " tokens";
  auto row = [&](const std::string& wl, const std::string& metric, const std::string& unit, double c, double b,
                 const std::string& target, int met, const std::string& note) {
    add(Row{wl, shape.name, "full", "f32", sn, metric, unit, c, b, true, target, met, note});
  };
  const double st = median(stall), fw = median(fwrite_t);
  row("async", "engine stall median", "ms/turn", st, fw, "<=0.2x", st / fw <= 0.2,
      "append_async vs plain fwrite+fflush; " + samples);
  row("async", "engine stall max", "ms/turn", *std::max_element(stall.begin(), stall.end()),
      *std::max_element(fwrite_t.begin(), fwrite_t.end()), "", -1, "");
  auto first_turns = [&](const std::string& metric, const std::vector<double>& ours, const std::vector<double>& fwrites,
                         const std::string& note) {
    std::string each;
    for (size_t i = 0; i < ours.size(); ++i)
      each += (i ? ", " : "") + std::to_string(static_cast<int>(ours[i] + 0.5)) + "/" +
              std::to_string(static_cast<int>(fwrites[i] + 0.5));
    const double o = median(ours), f = median(fwrites);
    row("async", metric, "ms/turn", o, f, "<=0.2x", o / f <= 0.2, note + ", vs fwrite of that turn; each: " + each + " ms");
  };
  first_turns("first turn stall, new store", first_stall, first_fwrite,
              "each round's first turn, 1 s after its new Store opened as the engine adapter opens it");
  first_turns("first turn stall after a restart", restart_stall, restart_fwrite,
              "a Store opened, a conversation loaded, 1 s later a new one's first turn");
  row("async", "until durable median", "ms/turn", median(durable), median(durable_b), "", -1,
      full ? "append_async+wait vs fwrite+fdatasync x2" : "append_async+wait vs fwrite+fflush");

  // One turn a second: the writer is done before the next turn comes.
  {
    remove_store(db);
    colikv::Store store(db, store_options(sync));
    std::vector<double> paced;
    auto next = Clock::now();
    for (int64_t len = std::min(turn, n_tokens); len <= n_tokens; len += turn) {
      std::this_thread::sleep_until(next);
      next += std::chrono::seconds(1);
      auto t0 = Clock::now();
      store.append_async("conv", m, src.tokens.data(), len, src.source());
      paced.push_back(since(t0) * 1e3);
    }
    store.wait();
    const double deepest = deepest_queue(store);
    Row q{"async", shape.name, "full", "f32", sn, "queued turns at a turn/s", "turns", deepest, 0, false, "==0",
          deepest == 0, "most turns still queued when the next one came"};
    add(q);
    Row p{"async", shape.name, "full", "f32", sn, "engine stall at a turn/s", "ms/turn", median(paced), 0, false, "",
          -1, "median"};
    add(p);
  }

  // Back to back under a bound of two turns: the third append_async waits for room.
  {
    remove_store(db);
    colikv::Options o = store_options(sync);
    o.max_queued_bytes = 2 * turn * m.floats_per_token() * 4;
    colikv::Store store(db, o);
    std::vector<double> t;
    for (int64_t len = std::min(turn, n_tokens); len <= n_tokens; len += turn) {
      auto t0 = Clock::now();
      store.append_async("conv", m, src.tokens.data(), len, src.source());
      t.push_back(since(t0) * 1e3);
    }
    store.wait();
    std::string each;
    for (double x : t) each += (each.empty() ? "" : " ") + std::to_string(static_cast<int>(x + 0.5));
    Row b{"async", shape.name, "full", "f32", sn, "back-to-back stall max", "ms/turn",
          *std::max_element(t.begin(), t.end()), 0, false, "", -1, "bound 2 turns; each: " + each + " ms"};
    add(b);
  }

  // Loads of the whole conversation, warm and cold (the store's files and the
  // raw file evicted from the page cache first), alternating with fread.
  if (full) bench_async_loads(cfg, shape, db, raw, sn, src, dst, n_tokens);
  remove_store(db);
  ::unlink(raw.c_str());
  ::unlink(rawsync.c_str());
}

}  // namespace colikv_bench
