// many: list, open, delete and longest-prefix lookup among many
// conversations, against a directory of .coli_kv files (and again on --pg).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "bench_access.h"

namespace colikv_bench {

void bench_many(const Config& cfg, const Shape& shape, int64_t per_conv) {
  const colikv::ModelSignature& m = shape.m;
  const std::string db = cfg.dir + "/many.db", dir = cfg.dir + "/many";
  const int64_t N = cfg.many;
  remove_store(db);
  Engine e(m, per_conv), d(m, per_conv);
  const int reps = 20;
  std::vector<double> list_c, list_deep_c, open_c, del_c, list_b, open_b, del_b, match_c, match_b;
  std::vector<std::vector<int32_t>> prompts;  // the lookups: each a stored conversation's tokens
  // colikv, on a store at `location`: fills it, then times list, open and
  // match (the prompts, drawn once, are the same for every backend).
  struct ManyRun {
    std::vector<double> list, list_deep, open, del, match;
    int64_t match_trips = -1;  // a lookup's round trips on a server store
  };
  auto run_colikv = [&](const std::string& location) {
    ManyRun r;
    {
      colikv::Store store(location, store_options(colikv::Synchronous::kNormal));
      for (int64_t i = 0; i < N; ++i) {
        e.compute(0, per_conv, 5000 + static_cast<uint64_t>(i), Kind::kFull);
        store.append("c" + std::to_string(i), m, e.tokens.data(), per_conv, e.source());
      }
    }
    colikv::Store store(location, store_options(colikv::Synchronous::kFull));
    uint64_t s = 42;
    for (int k = 0; k < reps; ++k) {
      auto t0 = Clock::now();
      auto page = store.list({100, 0});
      r.list.push_back(since(t0) * 1e3);
      t0 = Clock::now();
      auto deep = store.list({100, N / 2});
      r.list_deep.push_back(since(t0) * 1e3);
      const std::string id = "c" + std::to_string(splitmix(s) % static_cast<uint64_t>(N));
      t0 = Clock::now();
      colikv::ConversationInfo info = store.info(id);
      store.load(id, m, d.tokens.data(), d.cap, d.target());
      r.open.push_back(since(t0) * 1e3);
      (void)info;
    }
    const bool draw = prompts.empty();
    for (int k = 0; k < reps; ++k) {
      if (draw) {
        e.compute(0, per_conv, 5000 + splitmix(s) % static_cast<uint64_t>(N), Kind::kFull);
        prompts.emplace_back(e.tokens.begin(), e.tokens.begin() + per_conv);
      }
      auto t0 = Clock::now();
      colikv::PrefixMatch pm = store.match(m, prompts[static_cast<size_t>(k)].data(), per_conv);
      r.match.push_back(since(t0) * 1e3);
      if (pm.tokens != per_conv) std::fprintf(stderr, "lookup found %lld of %lld tokens\n",
                                              static_cast<long long>(pm.tokens), static_cast<long long>(per_conv));
    }
    const int64_t before = access::round_trips(store);
    if (before >= 0) {
      store.match(m, prompts[0].data(), per_conv);
      r.match_trips = access::round_trips(store) - before;
    }
    for (int k = 0; k < reps; ++k) {
      auto t0 = Clock::now();
      store.remove("c" + std::to_string(k));
      r.del.push_back(since(t0) * 1e3);
    }
    return r;
  };
  const ManyRun sqlite = run_colikv(db);
  list_c = sqlite.list;
  list_deep_c = sqlite.list_deep;
  open_c = sqlite.open;
  del_c = sqlite.del;
  match_c = sqlite.match;
  ManyRun pg;
  if (!cfg.pg.empty()) {
    pg = run_colikv(pg_store(cfg, "many"));
    drop_pg_store(cfg, "many");
  }
  remove_store(db);

  // baseline: one .coli_kv file per conversation in a directory
  ::mkdir(dir.c_str(), 0755);
  for (int64_t i = 0; i < N; ++i) {
    e.compute(0, per_conv, 5000 + static_cast<uint64_t>(i), Kind::kFull);
    Baseline b(dir + "/c" + std::to_string(i) + ".coli_kv", m, false);
    b.append(e, per_conv);
  }
  {
    uint64_t s = 42;
    for (int r = 0; r < reps; ++r) {
      // list a page: the 100 most recently used (by mtime), with their headers
      auto t0 = Clock::now();
      std::vector<std::pair<int64_t, std::string>> files;
      DIR* dp = ::opendir(dir.c_str());
      while (struct dirent* de = ::readdir(dp)) {
        if (de->d_name[0] == '.') continue;
        struct stat st;
        std::string p = dir + "/" + de->d_name;
        if (::stat(p.c_str(), &st) == 0)
          files.emplace_back(static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, p);
      }
      ::closedir(dp);
      std::partial_sort(files.begin(), files.begin() + std::min<size_t>(100, files.size()), files.end(),
                        [](const auto& a, const auto& b) { return a.first > b.first; });
      for (size_t i = 0; i < std::min<size_t>(100, files.size()); ++i) {
        FILE* f = std::fopen(files[i].second.c_str(), "rb");
        int32_t h[10];
        if (f) {
          if (std::fread(h, 4, 10, f) != 10) h[8] = 0;
          std::fclose(f);
        }
      }
      list_b.push_back(since(t0) * 1e3);
      const std::string id = "c" + std::to_string(splitmix(s) % static_cast<uint64_t>(N));
      t0 = Clock::now();
      Baseline b(dir + "/" + id + ".coli_kv", m, false);
      b.load(d);
      open_b.push_back(since(t0) * 1e3);
    }
    // Without colikv a lookup reads the token ids of every file.
    const int64_t rb = m.record_bytes();
    for (const auto& prompt : prompts) {
      auto t0 = Clock::now();
      int64_t best = 0;
      for (int64_t i = 0; i < N; ++i) {
        int fd = ::open((dir + "/c" + std::to_string(i) + ".coli_kv").c_str(), O_RDONLY);
        if (fd < 0) continue;
        int64_t k = 0;
        int32_t t;
        while (k < per_conv && ::pread(fd, &t, 4, 40 + k * rb) == 4 && t == prompt[static_cast<size_t>(k)]) ++k;
        ::close(fd);
        best = std::max(best, k);
      }
      match_b.push_back(since(t0) * 1e3);
      if (best != per_conv) std::fprintf(stderr, "baseline lookup mismatch\n");
    }
    for (int r = 0; r < reps; ++r) {
      auto t0 = Clock::now();
      ::unlink((dir + "/c" + std::to_string(r) + ".coli_kv").c_str());
      del_b.push_back(since(t0) * 1e3);
    }
  }
  for (int64_t i = 0; i < N; ++i) ::unlink((dir + "/c" + std::to_string(i) + ".coli_kv").c_str());
  ::rmdir(dir.c_str());

  const std::string note = std::to_string(N) + " conversations of " + std::to_string(per_conv) + " tokens; median of " +
                           std::to_string(reps);
  add({"many", shape.name, "full", "f32", "FULL", "list a page of 100", "ms", median(list_c), median(list_b), true,
       "<5ms", median(list_c) < 5, note + "; baseline: readdir+stat+headers"});
  add({"many", shape.name, "full", "f32", "FULL", "list page at offset N/2", "ms", median(list_deep_c), median(list_b), true,
       "<5ms", median(list_deep_c) < 5, ""});
  add({"many", shape.name, "full", "f32", "FULL", "open one (info+load)", "ms", median(open_c), median(open_b), true,
       "<5ms", median(open_c) < 5, "baseline: kv_disk_load"});
  add({"many", shape.name, "full", "f32", "FULL", "delete one", "ms", median(del_c), median(del_b), true, "", -1,
       "baseline: unlink"});
  add({"many", shape.name, "full", "f32", "FULL", "longest-prefix lookup", "ms", median(match_c), median(match_b), true,
       "", -1, "baseline: read the token ids of every file"});
  if (!cfg.pg.empty()) {
    const std::string pg_note = "PostgreSQL, loopback; " + note;
    add({"many", shape.name, "full", "f32", "FULL", "pg list a page of 100", "ms", median(pg.list), median(list_b), true,
         "", -1, pg_note});
    add({"many", shape.name, "full", "f32", "FULL", "pg list page at offset N/2", "ms", median(pg.list_deep),
         median(list_b), true, "", -1, ""});
    add({"many", shape.name, "full", "f32", "FULL", "pg open one (info+load)", "ms", median(pg.open), median(open_b),
         true, "", -1, ""});
    add({"many", shape.name, "full", "f32", "FULL", "pg delete one", "ms", median(pg.del), median(del_b), true, "", -1,
         ""});
    add({"many", shape.name, "full", "f32", "FULL", "pg longest-prefix lookup", "ms", median(pg.match), median(match_b),
         true, "", -1, std::to_string(pg.match_trips) + " round trips"});
  }
}

}  // namespace colikv_bench
