// import and export: a large .coli_kv file imported and exported in a child
// process of its own (time and peak memory), against copying the file.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "colikv/coli_kv.h"
#include "bench.h"

namespace colikv_bench {

namespace {

struct ChildResult {
  double seconds = -1;
  int64_t peak_kb = -1;
  int64_t bytes = 0;
  std::string error;
};

int64_t vm_hwm_kb() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int64_t kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::atoll(line + 6);
  std::fclose(f);
  return kb;
}

// Runs this program again as `--child OP ARGS...` so that peak memory is the
// operation's own; it prints "seconds peak_kb bytes" or "error <message>".
ChildResult run_child(const Config& cfg, const std::vector<std::string>& args) {
  ChildResult r;
  int fds[2];
  if (::pipe(fds) != 0) {
    r.error = "pipe";
    return r;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    std::vector<std::string> all = {cfg.self, "--child"};
    all.insert(all.end(), args.begin(), args.end());
    for (auto& a : all) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(cfg.self.c_str(), argv.data());
    _exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (out.rfind("error", 0) == 0 || out.empty()) {
    r.error = out.empty() ? "child failed" : out;
    return r;
  }
  long long kb = 0, bytes = 0;
  std::sscanf(out.c_str(), "%lf %lld %lld", &r.seconds, &kb, &bytes);
  r.peak_kb = kb;
  r.bytes = bytes;
  return r;
}

}  // namespace

int child_main(int argc, char** argv) {
  // argv: --child OP ...
  const std::string op = argc > 2 ? argv[2] : "";
  try {
    auto t0 = Clock::now();
    int64_t bytes = 0;
    if (op == "import" && argc >= 5) {
      colikv::Store store(argv[3], store_options(argc > 5 && std::string(argv[5]) == "NORMAL"
                                                     ? colikv::Synchronous::kNormal
                                                     : colikv::Synchronous::kFull));
      t0 = Clock::now();
      colikv::ImportOptions io;
      io.id = "big";
      auto res = colikv::import_coli_kv(store, argv[4], io);
      bytes = res.tokens * res.model.record_bytes();
    } else if (op == "export" && argc >= 5) {
      colikv::Store store(argv[3]);
      t0 = Clock::now();
      colikv::ExportOptions eo;
      eo.force = true;
      bytes = colikv::export_coli_kv(store, "big", argv[4], eo);
    } else if (op == "copy" && argc >= 5) {
      bytes = copy_file(argv[3], argv[4]);
    } else {
      std::printf("error unknown child operation\n");
      return 2;
    }
    const double s = since(t0);
    std::printf("%.6f %lld %lld\n", s, static_cast<long long>(vm_hwm_kb()), static_cast<long long>(bytes));
    return 0;
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 1;
  }
}

namespace {

void write_coli_kv(const std::string& path, const colikv::ModelSignature& m, int64_t n, Kind kind) {
  const int64_t block = 256;
  Engine e(m, block);
  Baseline b(path, m, false);
  ::unlink(path.c_str());
  for (int64_t first = 0; first < n; first += block) {
    const int64_t k = std::min(block, n - first);
    e.compute(0, k, 77 + static_cast<uint64_t>(first), kind);
    // The engine holds this block at positions [0, k): its records go at `first`.
    if (!b.open()) return;
    b.write_records(e, 0, k, first);
  }
  b.write_count(n);
  std::fflush(b.fp);
}

bool files_equal(const std::string& a, const std::string& b) {
  FILE* fa = std::fopen(a.c_str(), "rb");
  FILE* fb = std::fopen(b.c_str(), "rb");
  bool same = fa && fb;
  std::vector<char> x(1 << 20), y(1 << 20);
  while (same) {
    size_t na = std::fread(x.data(), 1, x.size(), fa), nb = std::fread(y.data(), 1, y.size(), fb);
    if (na != nb || std::memcmp(x.data(), y.data(), na) != 0) same = false;
    if (na == 0) break;
  }
  if (fa) std::fclose(fa);
  if (fb) std::fclose(fb);
  return same;
}

}  // namespace

void bench_import(const Config& cfg, const Shape& shape, Kind kind, const std::string& file_override) {
  const colikv::ModelSignature& m = shape.m;
  const std::string src = file_override.empty() ? cfg.dir + "/big.coli_kv" : file_override;
  const std::string db = cfg.dir + "/import.db", out = cfg.dir + "/export.coli_kv", cp = cfg.dir + "/copy.coli_kv";
  int64_t n = 0;
  if (file_override.empty()) {
    n = std::max<int64_t>(1, cfg.import_mb * 1000000 / m.record_bytes());
    write_coli_kv(src, m, n, kind);
  }
  const double mb = static_cast<double>(file_size(src)) / 1e6;
  remove_store(db);
  ::sync();
  ChildResult imp = run_child(cfg, {"import", db, src, "FULL"});
  ::sync();
  ChildResult exp = run_child(cfg, {"export", db, out});
  const bool same = files_equal(src, out);
  ::unlink(out.c_str());
  ::sync();
  ChildResult cpy = run_child(cfg, {"copy", src, cp});
  ::unlink(cp.c_str());
  const int64_t dbsize = file_size(db);
  remove_store(db);
  if (file_override.empty()) ::unlink(src.c_str());
  for (auto* r : {&imp, &exp, &cpy})
    if (!r->error.empty()) std::fprintf(stderr, "import/export child: %s\n", r->error.c_str());
  const std::string k = kind_name(kind);
  char note[128];
  std::snprintf(note, sizeof note, "%.0f MB file; baseline: copy+fsync; store %.0f MB", mb, dbsize / 1e6);
  add({"import", shape.name, k, "f32", "FULL", "import throughput", "MB/s", mb / imp.seconds, mb / cpy.seconds, true, "", -1, note});
  add({"import", shape.name, k, "f32", "FULL", "import peak RSS", "MiB", imp.peak_kb / 1024.0, cpy.peak_kb / 1024.0, true,
       "<128MiB", imp.peak_kb >= 0 && imp.peak_kb < 128 * 1024, "VmHWM of a child process"});
  std::snprintf(note, sizeof note, "export == original file: %s", same ? "yes" : "NO");
  add({"export", shape.name, k, "f32", "FULL", "export throughput", "MB/s", mb / exp.seconds, mb / cpy.seconds, true, "", -1, note});
  add({"export", shape.name, k, "f32", "FULL", "export peak RSS", "MiB", exp.peak_kb / 1024.0, cpy.peak_kb / 1024.0, true,
       "<128MiB", exp.peak_kb >= 0 && exp.peak_kb < 128 * 1024, "VmHWM of a child process"});
}

}  // namespace colikv_bench
