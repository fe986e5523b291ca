// fork: the bytes and time a fork inside a chunk costs, both branches then
// grown, against copying the slot file.
#include <unistd.h>

#include "bench.h"

namespace colikv_bench {

void bench_fork(const Config& cfg, const Shape& shape, int64_t n, int64_t grow) {
  const colikv::ModelSignature& m = shape.m;
  const std::string db = cfg.dir + "/fork.db", raw = cfg.dir + "/fork.coli_kv", raw2 = cfg.dir + "/fork2.coli_kv";
  remove_store(db);
  Engine a(m, n + grow), b(m, n + grow);
  a.compute(0, n + grow, 11, Kind::kFull);
  const int64_t at = n - n / 7;  // a fork inside a chunk: its partial chunk is re-encoded
  b.compute(0, at, 11, Kind::kFull);
  b.compute(at, n + grow, 12, Kind::kFull);
  int64_t before = 0, after = 0, fbefore = 0, fafter = 0;
  double t_fork = 0;
  {
    colikv::Store store(db, store_options(colikv::Synchronous::kFull));
    store.append("a", m, a.tokens.data(), n, a.source());
    before = store.stats().total.stored_bytes;
  }
  fbefore = file_size(db) + file_size(db + "-wal");  // after close: checkpointed
  {
    colikv::Store store(db, store_options(colikv::Synchronous::kFull));
    auto t0 = Clock::now();
    store.fork("a", "b", at);
    t_fork = since(t0);
    store.append("a", m, a.tokens.data(), n + grow, a.source());
    store.append("b", m, b.tokens.data(), n + grow, b.source());
    after = store.stats().total.stored_bytes;
  }
  fafter = file_size(db) + file_size(db + "-wal");
  remove_store(db);
  // baseline: the slot file is copied and its count set to `at`, then both grow.
  ::unlink(raw.c_str());
  ::unlink(raw2.c_str());
  double tb = 0;
  int64_t bb = 0, ba = 0;
  {
    Baseline ba_(raw, m, true);
    ba_.append(a, n);
    bb = file_size(raw);
    auto t0 = Clock::now();
    copy_file(raw, raw2);
    Baseline bf(raw2, m, true);
    bf.nrec = n;
    bf.open();
    // kv_disk_truncate: only the count changes
    int32_t nr = static_cast<int32_t>(at);
    std::fseek(bf.fp, 8 + 6 * 4, SEEK_SET);
    std::fwrite(&nr, 4, 1, bf.fp);
    std::fflush(bf.fp);
    bf.nrec = at;
    tb = since(t0);
    ba_.append(a, n + grow);
    bf.append(b, n + grow);
  }
  ba = file_size(raw) + file_size(raw2);
  ::unlink(raw.c_str());
  ::unlink(raw2.c_str());
  const std::string note = "fork at " + std::to_string(at) + " of " + std::to_string(n) + ", both grown by " +
                           std::to_string(grow) + "; baseline: copy the slot file, set its count";
  add({"fork", shape.name, "full", "f32", "FULL", "payload bytes added", "MB", (after - before) / 1e6, (ba - bb) / 1e6,
       true, "", -1, note});
  add({"fork", shape.name, "full", "f32", "FULL", "file bytes added", "MB", (fafter - fbefore) / 1e6, (ba - bb) / 1e6,
       true, "", -1, "database file after close"});
  add({"fork", shape.name, "full", "f32", "FULL", "fork time", "ms", t_fork * 1e3, tb * 1e3, true, "", -1, ""});
}

}  // namespace colikv_bench
