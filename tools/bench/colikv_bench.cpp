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
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sqlite3.h>

#include <future>

#include "core/chunk_codec.h"  // the codec alone, for the "bounds" rows
#if COLIKV_WITH_POSTGRES
#include "postgres/pg_catalog.h"     // a store's round trips, for the "many" rows
#include "postgres/pg_connection.h"  // fresh schemas on the --pg server
#endif
#include "colikv/coli_kv.h"
#include "colikv/store.h"
#include "async_writer.h"  // the async writer's queue depth, for the "async" rows
#include "sqlite/sqlite_connection.h"  // open_store: the bench's plain SQLite connections set up as colikv's
#include "store_impl.h"
#include "synthetic_engine.h"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

using colikv_examples::splitmix;

int64_t file_size(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

void remove_store(const std::string& p) {
  ::unlink(p.c_str());
  ::unlink((p + "-wal").c_str());
  ::unlink((p + "-shm").c_str());
  ::unlink((p + "-journal").c_str());
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

// Each pair's own ratio, baseline time over ours (above 1: ours is faster):
// "per pair: median 1.14 (quartiles 1.06-1.17), >=1.1 in 6 of 9".
std::string pair_ratios(const std::vector<double>& baseline, const std::vector<double>& ours) {
  std::vector<double> r;
  for (size_t i = 0; i < baseline.size() && i < ours.size(); ++i) r.push_back(baseline[i] / ours[i]);
  const auto reached = std::count_if(r.begin(), r.end(), [](double x) { return x >= 1.1; });
  char text[160];
  std::snprintf(text, sizeof text, "per pair: median %.2f (quartiles %.2f-%.2f), >=1.1 in %d of %zu", median(r),
                pct(r, 0.25), pct(r, 0.75), static_cast<int>(reached), r.size());
  return text;
}

// ---------------------------------------------------------------- engine buffers

enum class Kind { kFull, kBf16Origin, kGenuine };
const char* kind_name(Kind k) {
  return k == Kind::kFull ? "full" : k == Kind::kBf16Origin ? "bf16-origin" : "genuine";
}

// The demo's engine buffers and data (examples/synthetic_engine.h), with
// the data kinds, the genuine sample and an error measure.
struct Engine : colikv_examples::EngineBuffers {
  using EngineBuffers::EngineBuffers;

  void compute(int64_t from, int64_t to, uint64_t seed, Kind kind) {
    EngineBuffers::compute(from, to, seed, kind == Kind::kBf16Origin);
  }

  // Fills positions from a .coli_kv file's records (the genuine sample).
  bool from_file(const std::string& path, int64_t& n) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    char mg[8];
    int32_t h[8];
    bool ok = std::fread(mg, 1, 8, f) == 8 && std::fread(h, 4, 8, f) == 8;
    n = ok ? std::min<int64_t>(h[6], cap) : 0;
    for (int64_t p = 0; ok && p < n; ++p) {
      ok = std::fread(&tokens[p], 4, 1, f) == 1;
      for (int l = 0; ok && l < m.n_layers; ++l)
        ok = std::fread(&lc[l][p * m.kv_lora], 4, m.kv_lora, f) == static_cast<size_t>(m.kv_lora) &&
             std::fread(&rc[l][p * m.qk_rope], 4, m.qk_rope, f) == static_cast<size_t>(m.qk_rope);
    }
    std::fclose(f);
    return ok;
  }

  // Largest |a-b|/|a| over positions [0, n) (a = this, the original).
  double max_rel_error(const Engine& o, int64_t n) const {
    double worst = 0;
    auto cmp = [&](const std::vector<float>& a, const std::vector<float>& b, int64_t count) {
      for (int64_t i = 0; i < count; ++i) {
        const double x = a[static_cast<size_t>(i)], y = b[static_cast<size_t>(i)];
        if (x != 0) worst = std::max(worst, std::fabs(x - y) / std::fabs(x));
        else if (y != 0) worst = std::max(worst, 1.0);
      }
    };
    for (int l = 0; l < m.n_layers; ++l) {
      cmp(lc[l], o.lc[l], n * m.kv_lora);
      cmp(rc[l], o.rc[l], n * m.qk_rope);
    }
    return worst;
  }
};

// ---------------------------------------------------------------- the baseline (kv_persist.h)

// kv_disk_open / kv_disk_append / kv_disk_load, with the engine's FILE* kept
// open across turns as KVState::disk_fp is.
struct Baseline {
  std::string path;
  colikv::ModelSignature m;
  bool sync = false;  // fdatasync after the records and after the count
  FILE* fp = nullptr;
  int64_t nrec = 0;
  std::vector<uint8_t> buf;

  Baseline(std::string p, const colikv::ModelSignature& model, bool s) : path(std::move(p)), m(model), sync(s) {}
  ~Baseline() {
    if (fp) std::fclose(fp);
  }
  int64_t rec() const { return m.record_bytes(); }
  void hdr(int32_t* h, int n) const {
    h[0] = m.n_layers; h[1] = m.kv_lora; h[2] = m.qk_rope; h[3] = m.index_hd; h[4] = m.n_indexed;
    h[5] = m.vocab; h[6] = n; h[7] = 0;
  }
  bool open() {
    if (fp) return true;
    fp = std::fopen(path.c_str(), "r+b");
    if (!fp) {
      fp = std::fopen(path.c_str(), "wb");
      if (!fp) return false;
      int32_t h[8];
      hdr(h, 0);
      std::fwrite("COLIKV1\0", 1, 8, fp);
      std::fwrite(h, 4, 8, fp);
      std::fflush(fp);
      std::fclose(fp);
      fp = std::fopen(path.c_str(), "r+b");
      if (!fp) return false;
    }
    return true;
  }
  void append(const Engine& e, int64_t len) {
    if (len <= nrec || !open()) return;
    buf.resize(static_cast<size_t>(rec()));
    std::fseek(fp, 40 + nrec * rec(), SEEK_SET);
    for (int64_t p = nrec; p < len; ++p) {
      uint8_t* b = buf.data();
      std::memcpy(b, &e.tokens[p], 4);
      b += 4;
      for (int i = 0; i < m.n_layers; ++i) {
        std::memcpy(b, e.lcp[i] + p * m.kv_lora, static_cast<size_t>(m.kv_lora) * 4);
        b += m.kv_lora * 4;
        std::memcpy(b, e.rcp[i] + p * m.qk_rope, static_cast<size_t>(m.qk_rope) * 4);
        b += m.qk_rope * 4;
      }
      std::fwrite(buf.data(), 1, buf.size(), fp);
    }
    std::fflush(fp);
    if (sync) ::fdatasync(fileno(fp));
    int32_t nr = static_cast<int32_t>(len);
    std::fseek(fp, 8 + 6 * 4, SEEK_SET);
    std::fwrite(&nr, 4, 1, fp);
    std::fflush(fp);
    if (sync) ::fdatasync(fileno(fp));
    nrec = len;
  }
  int64_t load(Engine& e) const {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return 0;
    char mg[8];
    int32_t h[8], w[8];
    hdr(w, 0);
    if (std::fread(mg, 1, 8, f) != 8 || std::memcmp(mg, "COLIKV1\0", 8) || std::fread(h, 4, 8, f) != 8 ||
        std::memcmp(h, w, 6 * 4) != 0) {
      std::fclose(f);
      return 0;
    }
    int64_t n = std::min<int64_t>(h[6], e.cap);
    for (int64_t p = 0; p < n; ++p) {
      int32_t tk;
      if (std::fread(&tk, 4, 1, f) != 1) { n = p; break; }
      e.tokens[p] = tk;
      for (int i = 0; i < m.n_layers; ++i)
        if (std::fread(e.lw[i] + p * m.kv_lora, 4, m.kv_lora, f) != static_cast<size_t>(m.kv_lora) ||
            std::fread(e.rw[i] + p * m.qk_rope, 4, m.qk_rope, f) != static_cast<size_t>(m.qk_rope)) {
          n = p;
          break;
        }
    }
    std::fclose(f);
    return n;
  }
};

// Copies a file through a 1 MiB buffer and fsyncs it: the least any import or
// export of those bytes costs.
int64_t copy_file(const std::string& src, const std::string& dst) {
  FILE* in = std::fopen(src.c_str(), "rb");
  FILE* out = std::fopen(dst.c_str(), "wb");
  if (!in || !out) {
    if (in) std::fclose(in);
    if (out) std::fclose(out);
    return -1;
  }
  std::vector<char> b(1 << 20);
  int64_t total = 0;
  size_t got;
  while ((got = std::fread(b.data(), 1, b.size(), in)) > 0) {
    std::fwrite(b.data(), 1, got, out);
    total += static_cast<int64_t>(got);
  }
  std::fflush(out);
  ::fsync(fileno(out));
  std::fclose(in);
  std::fclose(out);
  return total;
}

// ---------------------------------------------------------------- results

struct Row {
  std::string workload, shape, kind, precision, sync, metric, unit;
  double colikv = 0, baseline = 0;
  bool has_baseline = true;
  std::string target;  // e.g. ">= 0.5" on the ratio, "< 5 ms" on colikv, "" for none
  int met = -1;        // 1 met, 0 missed, -1 no target
  std::string note;
  double ratio() const { return has_baseline && baseline != 0 ? colikv / baseline : 0; }
};

std::vector<Row> g_rows;
bool g_table_to_stderr = false;
int g_page_size = 0;  // --page-size: a new store's page size; 0 = the library's default
std::string g_tenant;  // --tenant: the tenant every store of the run is opened for

FILE* table_out() { return g_table_to_stderr ? stderr : stdout; }

void add(Row r) {
  FILE* o = table_out();
  char c[32], b[32], q[16];
  std::snprintf(c, sizeof c, "%.4g", r.colikv);
  if (r.has_baseline) {
    std::snprintf(b, sizeof b, "%.4g", r.baseline);
    std::snprintf(q, sizeof q, "%.3f", r.ratio());
  } else {
    std::snprintf(b, sizeof b, "-");
    std::snprintf(q, sizeof q, "-");
  }
  std::fprintf(o, "%-7s %-7s %-11s %-4s %-6s %-26s %10s %10s %7s %-8s %-8s %s\n", r.workload.c_str(),
               r.shape.c_str(), r.kind.c_str(), r.precision.c_str(), r.sync.c_str(), (r.metric + " [" + r.unit + "]").c_str(), c,
               b, q, r.target.c_str(), r.met < 0 ? "" : r.met ? "MET" : "MISSED", r.note.c_str());
  std::fflush(o);
  g_rows.push_back(std::move(r));
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) continue;
    o += ch;
  }
  return o;
}

void write_json(FILE* f, const std::map<std::string, std::string>& machine) {
  std::fprintf(f, "{\n  \"machine\": {");
  bool first = true;
  for (auto& kv : machine) {
    std::fprintf(f, "%s\"%s\": \"%s\"", first ? "" : ", ", kv.first.c_str(), json_escape(kv.second).c_str());
    first = false;
  }
  std::fprintf(f, "},\n  \"rows\": [\n");
  for (size_t i = 0; i < g_rows.size(); ++i) {
    const Row& r = g_rows[i];
    std::fprintf(f,
                 "    {\"workload\": \"%s\", \"shape\": \"%s\", \"kind\": \"%s\", \"precision\": \"%s\", \"sync\": \"%s\", "
                 "\"metric\": \"%s\", \"unit\": \"%s\", \"colikv\": %.6g, ",
                 r.workload.c_str(), r.shape.c_str(), r.kind.c_str(), r.precision.c_str(), r.sync.c_str(),
                 r.metric.c_str(), r.unit.c_str(), r.colikv);
    if (r.has_baseline)
      std::fprintf(f, "\"baseline\": %.6g, \"ratio\": %.6g, ", r.baseline, r.ratio());
    else
      std::fprintf(f, "\"baseline\": null, \"ratio\": null, ");
    std::fprintf(f, "\"target\": \"%s\", \"met\": %s, \"note\": \"%s\"}%s\n", json_escape(r.target).c_str(),
                 r.met < 0 ? "null" : r.met ? "true" : "false", json_escape(r.note).c_str(),
                 i + 1 < g_rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
}

// ---------------------------------------------------------------- configuration

struct Shape {
  std::string name;
  colikv::ModelSignature m;
};

struct Config {
  bool quick = false;
  std::string dir = "/tmp/colikv-bench";
  std::string json;
  int64_t tokens = 8192, turn = 512;
  int64_t import_mb = 2048;
  int64_t many = 10000;
  int64_t small_stored = 100000;  // --small-stored: conversations in the store before the small appends
  int64_t fork_tokens = 4096;
  int load_reps = 3;
  int cold_reps = 9;  // warm and cold loads of the async workload, each: the cold target is judged there
  std::string sample = COLIKV_BENCH_SAMPLE;
  std::vector<std::string> only;
  std::vector<std::string> shapes, kinds, syncs;  // empty: all
  bool keep = false;
  bool bf16 = true;
  std::string pg;  // a PostgreSQL URI: the turns, load and many rows again on it
  bool turn_set = false;  // --turn given (isolation's, pg-isolation's and pg-throughput's turn size)
  std::string self;
  static bool in(const std::vector<std::string>& v, const std::string& x) {
    return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
  }
  bool enabled(const std::string& w) const { return in(only, w); }
};

colikv::Options store_options(colikv::Synchronous sync, const std::string& precision = "f32") {
  colikv::Options o;
  o.synchronous = sync;
  if (const char* e = std::getenv("COLIKV_BENCH_LEVEL")) o.zstd_level = std::atoi(e);
  if (const char* e = std::getenv("COLIKV_BENCH_CHUNK")) o.chunk_target_bytes = std::atoll(e);
  if (const char* e = std::getenv("COLIKV_BENCH_PAGE")) o.page_size = std::atoi(e);
  if (g_page_size > 0) o.page_size = g_page_size;
  o.tenant = g_tenant;
  if (const char* e = std::getenv("COLIKV_BENCH_THREADS")) o.threads = std::atoi(e);
#ifndef COLIKV_BENCH_NO_PRECISION
  if (precision == "bf16") o.new_conversation_precision = colikv::Precision::kBf16;
#else
  (void)precision;
#endif
  return o;
}

const char* sync_name(colikv::Synchronous s) { return s == colikv::Synchronous::kFull ? "FULL" : "NORMAL"; }

// A fresh store named `name` on the --pg server: its own schema, emptied first.
std::string pg_store(const Config& cfg, const std::string& name) {
#if !COLIKV_WITH_POSTGRES
  (void)name;
  throw std::runtime_error("--pg " + colikv::shown_store_location(cfg.pg) +
                           ": this build has no PostgreSQL backend (COLIKV_WITH_POSTGRES=OFF)");
#else
  colikv::detail::PgConnection conn(cfg.pg, colikv::detail::PgConnection::Settings());
  const std::string schema = "colikv_bench_" + name;
  conn.exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema, "bench: " + schema);
  return cfg.pg + (cfg.pg.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema;
#endif
}

void drop_pg_store(const Config& cfg, const std::string& name) {
#if COLIKV_WITH_POSTGRES
  colikv::detail::PgConnection conn(cfg.pg, colikv::detail::PgConnection::Settings());
  conn.exec("DROP SCHEMA IF EXISTS colikv_bench_" + name + " CASCADE", "bench: " + name);
#else
  (void)cfg, (void)name;
#endif
}

// A plain binary SELECT of conversation "conv"'s payload rows in list order,
// on a libpq connection of its own: the server's and the wire's own cost of
// the bytes a load reads. Returns the bytes received.
int64_t plain_select_payloads(const std::string& location) {
#if !COLIKV_WITH_POSTGRES
  (void)location;
  return 0;
#else
  PGconn* c = PQconnectdb(location.c_str());
  int64_t bytes = 0;
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult* r = PQexecParams(c,
                               "SELECT ch.payload FROM conversations v JOIN conversation_chunks cc "
                               "ON cc.conversation_id = v.conversation_id JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                               "WHERE v.name = 'conv' ORDER BY cc.seq",
                               0, nullptr, nullptr, nullptr, nullptr, 1);
    if (PQresultStatus(r) == PGRES_TUPLES_OK)
      for (int i = 0; i < PQntuples(r); ++i) bytes += PQgetlength(r, i, 0);
    PQclear(r);
  }
  PQfinish(c);
  return bytes;
#endif
}

// ---------------------------------------------------------------- turns + load + size

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
      auto t0 = Clock::now();
      store.append("conv", m, src.tokens.data(), len, src.source());
      double t = since(t0);
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
    row("load", "pg load throughput", "MB/s", mb / pg.load, lt_b, "", -1,
        std::string("bit-exact: ") + (pg.exact ? "yes" : "no"));
    const double pl = mb / median(pg_load_reps), ps = mb / median(select_reps);
    row("load", "pg load vs plain binary SELECT", "MB/s", pl, ps, ">=0.7x", pl / ps >= 0.7,
        "baseline: libpq SELECT of the payload rows, binary; alternated, median of " +
            std::to_string(pg_load_reps.size()));
  }
}

// ---------------------------------------------------------------- asynchronous append (issue 14)

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
    size_t deepest = 0;
    std::vector<double> paced;
    auto next = Clock::now();
    for (int64_t len = std::min(turn, n_tokens); len <= n_tokens; len += turn) {
      std::this_thread::sleep_until(next);
      next += std::chrono::seconds(1);
      deepest = std::max(deepest, colikv::detail::StoreAccess::impl(store).async->queued_jobs());
      auto t0 = Clock::now();
      store.append_async("conv", m, src.tokens.data(), len, src.source());
      paced.push_back(since(t0) * 1e3);
    }
    store.wait();
    Row q{"async", shape.name, "full", "f32", sn, "queued turns at a turn/s", "turns", static_cast<double>(deepest),
          0, false, "==0", deepest == 0, "most turns still queued when the next one came"};
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

// ---------------------------------------------------------------- small turns and small appends

// Bytes of a store after close: the file and whatever companions remain.
int64_t store_bytes_after_close(const std::string& db) {
  return file_size(db) + file_size(db + "-wal") + file_size(db + "-shm");
}

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
  // The engine adapter's calls: a write() after every turn, a whole load at start.
  auto run_store = [&](const std::string& location, std::vector<double>& save, std::vector<double>& load) {
    colikv::Store store(location, store_options(sync));
    for (int64_t len = turn; len <= n; len += turn) {
      auto t0 = Clock::now();
      store.write("conv", m, src.tokens.data(), len - turn, len, src.source());
      save.push_back(since(t0) * 1e3);
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

// A plain SQLite connection of the benchmark's own (the prefill, the floor of
// a small append), opened as colikv opens a store (detail::open_store: the
// same pragmas, WAL size and busy handler); its statements are finalized on
// scope exit, before the connection closes.
class RawDb {
 public:
  RawDb(const std::string& path, const colikv::Options& options) : db_(colikv::detail::open_store(path, options)) {}
  ~RawDb() {
    for (sqlite3_stmt* q : statements_) sqlite3_finalize(q);
  }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  sqlite3* handle() const { return db_.getHandle(); }
  void exec(const std::string& sql) { check(sqlite3_exec(handle(), sql.c_str(), nullptr, nullptr, nullptr), sql.c_str()); }
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* q = nullptr;
    check(sqlite3_prepare_v2(handle(), sql, -1, &q, nullptr), sql);
    statements_.push_back(q);
    return q;
  }
  // Steps q once (a row or done) and resets it for the next bindings.
  void run(sqlite3_stmt* q) {
    check(sqlite3_step(q), sqlite3_sql(q));
    sqlite3_reset(q);
  }

 private:
  void check(int rc, const char* what) const {
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE)
      throw colikv::Error(colikv::ErrorCode::kIO, std::string("bench sqlite: ") + what + ": " + sqlite3_errmsg(handle()));
  }

  SQLite::Database db_;
  std::vector<sqlite3_stmt*> statements_;
};

// A JSON array of n random token ids below vocab, as colikv stores a chunk's tokens.
std::string random_tokens_json(uint64_t& rng, int64_t n, int64_t vocab) {
  std::string tokens = "[";
  for (int64_t t = 0; t < n; ++t)
    tokens += (t ? "," : "") + std::to_string(splitmix(rng) % static_cast<uint64_t>(vocab));
  return tokens + "]";
}

// Fills the store at db with `stored` conversations of `len` tokens, "p0",
// "p1", ...: the first few through append(), the rest cloned from them in SQL
// with fresh chunk keys, chain hashes, digests and token ids (so every index
// an append writes holds `stored` distinct entries), 10,000 a transaction:
// 100,000 take seconds, not the minutes of as many appends.
void prefill_store(const std::string& db, const colikv::ModelSignature& m, int64_t stored, int64_t len) {
  const int64_t seeds = std::min<int64_t>(stored, 64);
  {
    Engine e(m, len);
    colikv::Store store(db, store_options(colikv::Synchronous::kNormal));
    for (int64_t i = 0; i < seeds; ++i) {
      e.compute(0, len, 90000 + static_cast<uint64_t>(i), Kind::kFull);
      store.append("p" + std::to_string(i), m, e.tokens.data(), len, e.source());
    }
  }
  if (stored <= seeds) return;
  RawDb raw(db, store_options(colikv::Synchronous::kNormal));
  struct Link {
    int64_t conv, seq, chunk, n_tokens;
  };
  std::vector<Link> links;  // the seeds' chunks, in order
  {
    sqlite3_stmt* q = raw.prepare(
        "SELECT cc.conversation_id, cc.seq, cc.chunk_id, ch.n_tokens FROM conversation_chunks cc "
        "JOIN chunks ch USING (chunk_id) ORDER BY cc.conversation_id, cc.seq");
    while (sqlite3_step(q) == SQLITE_ROW)
      links.push_back({sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1), sqlite3_column_int64(q, 2),
                       sqlite3_column_int64(q, 3)});
  }
  std::vector<int64_t> seed_convs;
  for (const Link& l : links)
    if (seed_convs.empty() || seed_convs.back() != l.conv) seed_convs.push_back(l.conv);
  sqlite3_stmt* clone_conv = raw.prepare(
      "INSERT INTO conversations (name, model_id, token_count, precision, title, metadata, generation, created_ms, "
      "updated_ms, last_used_ms, tenant_id) SELECT ?, model_id, token_count, precision, title, metadata, generation, "
      "created_ms, updated_ms, last_used_ms, tenant_id FROM conversations WHERE conversation_id = ?");
  sqlite3_stmt* clone_chunk = raw.prepare(
      "INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, precision, compression, raw_size, checksum, "
      "payload) SELECT model_id, randomblob(32), first_pos, n_tokens, ?, precision, compression, raw_size, checksum, "
      "payload FROM chunks WHERE chunk_id = ?");
  sqlite3_stmt* clone_meta = raw.prepare(
      "INSERT INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, chain_hash, digest) "
      "SELECT ?, model_id, precision, prev_hash, ?, payload_bytes, randomblob(32), randomblob(32) FROM chunk_meta "
      "WHERE chunk_id = ?");
  sqlite3_stmt* link = raw.prepare("INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) VALUES (?, ?, ?)");
  uint64_t rng = 77;
  for (int64_t i = seeds; i < stored; ++i) {
    if ((i - seeds) % 10000 == 0) raw.exec("BEGIN");
    const int64_t seed = seed_convs[static_cast<size_t>(i % static_cast<int64_t>(seed_convs.size()))];
    const std::string name = "p" + std::to_string(i);
    sqlite3_bind_text(clone_conv, 1, name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(clone_conv, 2, seed);
    raw.run(clone_conv);
    const int64_t conv = sqlite3_last_insert_rowid(raw.handle());
    for (const Link& l : links) {
      if (l.conv != seed) continue;
      const std::string tokens = random_tokens_json(rng, l.n_tokens, m.vocab);
      sqlite3_bind_text(clone_chunk, 1, tokens.c_str(), -1, SQLITE_STATIC);
      sqlite3_bind_int64(clone_chunk, 2, l.chunk);
      raw.run(clone_chunk);
      const int64_t chunk = sqlite3_last_insert_rowid(raw.handle());
      sqlite3_bind_int64(clone_meta, 1, chunk);
      sqlite3_bind_text(clone_meta, 2, tokens.c_str(), -1, SQLITE_STATIC);
      sqlite3_bind_int64(clone_meta, 3, l.chunk);
      raw.run(clone_meta);
      sqlite3_bind_int64(link, 1, conv);
      sqlite3_bind_int64(link, 2, l.seq);
      sqlite3_bind_int64(link, 3, chunk);
      raw.run(link);
    }
    if ((i - seeds) % 10000 == 9999 || i + 1 == stored) raw.exec("COMMIT");
  }
  raw.exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

// SQLite's own cost of the rows one new conversation of `len` tokens (one
// chunk) adds, without colikv's work (encoding, digests, the reads before the
// write): `count` times the five writing statements an append of it runs
// (the conversation, its chunk with a payload of the size colikv just stored,
// chunk_meta, the link, the count), prepared once, one transaction each, on
// the store colikv has just appended to, through a connection set up as
// colikv's (RawDb); SQLite checkpoints inline, at the WAL size where colikv's
// background checkpointer starts one. Returns each transaction's milliseconds.
std::vector<double> time_sqlite_rows(const std::string& db, colikv::Synchronous sync, int64_t count, int64_t len,
                                     int64_t vocab) {
  RawDb raw(db, store_options(sync));
  int64_t model_id = 0, raw_size = 0, payload_bytes = 0, tenant_id = 0;
  std::string compression, prev;
  {
    sqlite3_stmt* q = raw.prepare(
        "SELECT ch.model_id, ch.raw_size, ch.compression, length(ch.payload), m.prev_hash, c.tenant_id "
        "FROM conversation_chunks cc JOIN chunks ch USING (chunk_id) JOIN chunk_meta m USING (chunk_id) "
        "JOIN conversations c USING (conversation_id) ORDER BY cc.conversation_id DESC LIMIT 1");
    if (sqlite3_step(q) != SQLITE_ROW) throw colikv::Error(colikv::ErrorCode::kIO, "bench: no chunk to copy");
    model_id = sqlite3_column_int64(q, 0);
    raw_size = sqlite3_column_int64(q, 1);
    compression = reinterpret_cast<const char*>(sqlite3_column_text(q, 2));
    payload_bytes = sqlite3_column_int64(q, 3);
    prev.assign(static_cast<const char*>(sqlite3_column_blob(q, 4)), static_cast<size_t>(sqlite3_column_bytes(q, 4)));
    tenant_id = sqlite3_column_int64(q, 5);
    sqlite3_reset(q);  // no statement left open: it would hold a read snapshot through the timed writes
  }
  sqlite3_stmt* begin = raw.prepare("BEGIN IMMEDIATE");
  sqlite3_stmt* commit = raw.prepare("COMMIT");
  sqlite3_stmt* conv = raw.prepare(
      "INSERT INTO conversations (name, model_id, precision, created_ms, updated_ms, last_used_ms, title, metadata, "
      "tenant_id) VALUES (?, ?, 'f32', ?, ?, ?, '', '{}', ?)");
  sqlite3_stmt* chunk = raw.prepare(
      "INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, precision, compression, raw_size, checksum, "
      "payload) VALUES (?, ?, 0, ?, ?, 'f32', ?, ?, ?, ?)");
  sqlite3_stmt* meta = raw.prepare(
      "INSERT OR REPLACE INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, "
      "chain_hash, digest) VALUES (?, ?, 'f32', ?, ?, ?, ?, ?)");
  sqlite3_stmt* link = raw.prepare("INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) VALUES (?, 0, ?)");
  sqlite3_stmt* set_count = raw.prepare(
      "UPDATE conversations SET token_count = ?, generation = generation + 1, updated_ms = ? WHERE conversation_id = ?");
  uint64_t rng = 4242;
  auto random_bytes = [&](std::string& out, int64_t n) {
    out.resize(static_cast<size_t>(n));
    for (char& c : out) c = static_cast<char>(splitmix(rng));
  };
  std::string key, chain, digest, payload;
  std::vector<double> ms;
  for (int64_t i = 0; i < count; ++i) {
    const std::string name = "sqlite-rows-" + std::to_string(i), tokens = random_tokens_json(rng, len, vocab);
    random_bytes(key, 32);
    random_bytes(chain, 32);
    random_bytes(digest, 32);
    random_bytes(payload, payload_bytes);
    const auto t0 = Clock::now();
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    raw.run(begin);
    sqlite3_bind_text(conv, 1, name.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_int64(conv, 2, model_id);
    for (int k = 3; k <= 5; ++k) sqlite3_bind_int64(conv, k, now);
    sqlite3_bind_int64(conv, 6, tenant_id);
    raw.run(conv);
    const int64_t conversation_id = sqlite3_last_insert_rowid(raw.handle());
    sqlite3_bind_int64(chunk, 1, model_id);
    sqlite3_bind_blob(chunk, 2, key.data(), 32, SQLITE_STATIC);
    sqlite3_bind_int64(chunk, 3, len);
    sqlite3_bind_text(chunk, 4, tokens.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_text(chunk, 5, compression.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_int64(chunk, 6, raw_size);
    sqlite3_bind_int64(chunk, 7, static_cast<int64_t>(splitmix(rng) & 0xffffffffu));
    sqlite3_bind_blob(chunk, 8, payload.data(), static_cast<int>(payload.size()), SQLITE_STATIC);
    raw.run(chunk);
    const int64_t chunk_id = sqlite3_last_insert_rowid(raw.handle());
    sqlite3_bind_int64(meta, 1, chunk_id);
    sqlite3_bind_int64(meta, 2, model_id);
    sqlite3_bind_blob(meta, 3, prev.data(), static_cast<int>(prev.size()), SQLITE_STATIC);
    sqlite3_bind_text(meta, 4, tokens.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_int64(meta, 5, payload_bytes);
    sqlite3_bind_blob(meta, 6, chain.data(), 32, SQLITE_STATIC);
    sqlite3_bind_blob(meta, 7, digest.data(), 32, SQLITE_STATIC);
    raw.run(meta);
    sqlite3_bind_int64(link, 1, conversation_id);
    sqlite3_bind_int64(link, 2, chunk_id);
    raw.run(link);
    sqlite3_bind_int64(set_count, 1, len);
    sqlite3_bind_int64(set_count, 2, now);
    sqlite3_bind_int64(set_count, 3, conversation_id);
    raw.run(set_count);
    raw.run(commit);
    ms.push_back(since(t0) * 1e3);
  }
  return ms;
}

// Many new conversations of `len` tokens each (a gateway filling a store):
// the fixed cost of one small append, in a store that holds `stored`
// conversations already (prefill_store). Baseline: one .coli_kv file each.
void bench_small_appends(const Config& cfg, const Shape& shape, colikv::Synchronous sync, int64_t count, int64_t len,
                         int64_t stored) {
  const colikv::ModelSignature& m = shape.m;
  const std::string db = cfg.dir + "/appends.db", dir = cfg.dir + "/appends";
  remove_store(db);
  ::mkdir(dir.c_str(), 0755);
  Engine e(m, len);
  std::vector<double> c, b;
  // Filled once a run (the first sync mode's), copied for the next.
  static double fill_s = 0;
  const std::string filled = cfg.dir + "/appends-" + std::to_string(stored) + ".db";
  if (stored > 0 && file_size(filled) == 0) {
    const auto t_fill = Clock::now();
    prefill_store(filled, m, stored, len);
    fill_s = since(t_fill);
  }
  if (stored > 0) std::filesystem::copy_file(filled, db, std::filesystem::copy_options::overwrite_existing);
  {
    colikv::Store store(db, store_options(sync));
    for (int64_t i = 0; i < count; ++i) {
      e.compute(0, len, 7000 + static_cast<uint64_t>(i), Kind::kFull);
      auto t0 = Clock::now();
      store.append("c" + std::to_string(i), m, e.tokens.data(), len, e.source());
      c.push_back(since(t0) * 1e3);
    }
  }
  const std::vector<double> rows = time_sqlite_rows(db, sync, count, len, m.vocab);
  for (int64_t i = 0; i < count; ++i) {
    e.compute(0, len, 7000 + static_cast<uint64_t>(i), Kind::kFull);
    auto t0 = Clock::now();
    Baseline f(dir + "/c" + std::to_string(i) + ".coli_kv", m, sync == colikv::Synchronous::kFull);
    f.append(e, len);
    b.push_back(since(t0) * 1e3);
  }
  for (int64_t i = 0; i < count; ++i) ::unlink((dir + "/c" + std::to_string(i) + ".coli_kv").c_str());
  ::rmdir(dir.c_str());
  remove_store(db);
  const bool normal = sync == colikv::Synchronous::kNormal;
  const double med = median(c);
  char fill[64] = "";
  if (stored > 0) std::snprintf(fill, sizeof fill, " (prefilled in %.0f s)", fill_s);
  const std::string metric =
      stored > 0 ? "new conversation append @" + std::to_string(stored / 1000) + "k" : "new conversation append";
  add({"small", shape.name, "full", "f32", sync_name(sync), metric, "ms", med, median(b), true,
       normal ? "<=0.3ms" : "", normal ? med <= 0.3 : -1,
       std::to_string(count) + " conversations of " + std::to_string(len) + " tokens, median" +
           (stored > 0 ? " after " + std::to_string(stored) + " stored" + fill : std::string())});
  add({"small", shape.name, "full", "f32", sync_name(sync), metric + " p95", "ms", pct(c, 0.95), pct(b, 0.95), true,
       "", -1, ""});
  add({"small", shape.name, "full", "f32", sync_name(sync), metric + " / SQLite's rows", "ms", med, median(rows), true,
       "", -1, "baseline: the same rows in plain SQLite, prepared, one transaction each, after colikv's on the store"});
}

// ---------------------------------------------------------------- import / export in a child process

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

void write_coli_kv(const std::string& path, const colikv::ModelSignature& m, int64_t n, Kind kind) {
  const int64_t block = 256;
  Engine e(m, block);
  Baseline b(path, m, false);
  ::unlink(path.c_str());
  for (int64_t first = 0; first < n; first += block) {
    const int64_t k = std::min(block, n - first);
    e.compute(0, k, 77 + static_cast<uint64_t>(first), kind);
    // Baseline::append writes positions [nrec, len) of the engine's buffers:
    // shift the window by writing records directly.
    if (!b.open()) return;
    std::vector<uint8_t> rec(static_cast<size_t>(m.record_bytes()));
    std::fseek(b.fp, 40 + first * m.record_bytes(), SEEK_SET);
    for (int64_t p = 0; p < k; ++p) {
      uint8_t* q = rec.data();
      std::memcpy(q, &e.tokens[p], 4);
      q += 4;
      for (int l = 0; l < m.n_layers; ++l) {
        std::memcpy(q, e.lcp[l] + p * m.kv_lora, static_cast<size_t>(m.kv_lora) * 4);
        q += m.kv_lora * 4;
        std::memcpy(q, e.rcp[l] + p * m.qk_rope, static_cast<size_t>(m.qk_rope) * 4);
        q += m.qk_rope * 4;
      }
      std::fwrite(rec.data(), 1, rec.size(), b.fp);
    }
  }
  int32_t nr = static_cast<int32_t>(n);
  std::fseek(b.fp, 8 + 6 * 4, SEEK_SET);
  std::fwrite(&nr, 4, 1, b.fp);
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

void bench_import(const Config& cfg, const Shape& shape, Kind kind, const std::string& file_override = "") {
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

// ---------------------------------------------------------------- many conversations

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
#if COLIKV_WITH_POSTGRES
    if (auto* pgc = dynamic_cast<colikv::detail::PgCatalog*>(colikv::detail::StoreAccess::impl(store).catalog.get())) {
      const int64_t before = pgc->connection().round_trips();
      store.match(m, prompts[0].data(), per_conv);
      r.match_trips = pgc->connection().round_trips() - before;
    }
#endif
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

// ---------------------------------------------------------------- fork

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

// ---------------------------------------------------------------- budget

// The file under a steady byte budget (issue 25): two engines (two Store
// connections on one store, as two processes have) save conversations turn by
// turn with Options::max_store_bytes set, round after round, so that each
// round evicts the older ones. After each round the store is checkpointed
// and its file measured against a vacuumed copy of itself (VACUUM INTO):
// the budget bounds the file when that ratio stays flat.
void bench_budget(const Config& cfg, int rounds) {
  Shape mock;  // the mock engine's shape of the issue's runs: 2 x (256+64)
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

// ---------------------------------------------------------------- bounds

// What bounds append and load, measured alone on this machine: the codec on
// one thread and on every core, SQLite writing multi-megabyte blobs (with and
// without its checkpoint), and the device's synced write speed.
void bench_bounds(const Config& cfg, const Shape& shape, Kind kind) {
  const colikv::ModelSignature& m = shape.m;
  const int64_t C = 16, chunks = cfg.quick ? 16 : 48, n = C * chunks;
  Engine e(m, n);
  e.compute(0, n, 9, kind);
  const double mb = static_cast<double>(n) * 4.0 * static_cast<double>(m.floats_per_token()) / 1e6;
  auto planes = [&](int64_t first) {
    colikv::detail::PlaneList pl;
    for (int l = 0; l < m.n_layers; ++l) {
      pl.push_back({e.lc[l].data() + first * m.kv_lora, m.kv_lora, m.kv_lora});
      pl.push_back({e.rc[l].data() + first * m.qk_rope, m.qk_rope, m.qk_rope});
    }
    return pl;
  };
  std::vector<colikv::detail::EncodedChunk> enc(static_cast<size_t>(chunks));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double enc1 = 0, encn = 0, dec1 = 0, decn = 0;
  for (int threads : {1, cores}) {
    auto run = [&](bool decode) {
      auto t0 = Clock::now();
      std::vector<std::future<void>> fs;
      for (int t = 0; t < threads; ++t)
        fs.push_back(std::async(std::launch::async, [&, t] {
          for (int64_t k = t; k < chunks; k += threads) {
            if (!decode) {
              enc[static_cast<size_t>(k)] = colikv::detail::encode_chunk(C, e.tokens.data() + k * C, planes(k * C), 1);
            } else {
              const auto& x = enc[static_cast<size_t>(k)];
              colikv::detail::decode_chunk(x.payload.data(), x.payload.size(), x.compressed, x.raw_size, x.checksum, C,
                                           e.tokens.data() + k * C, planes(k * C));
            }
          }
        }));
      for (auto& f : fs) f.get();
      return mb / since(t0);
    };
    (threads == 1 ? enc1 : encn) = run(false);
    (threads == 1 ? dec1 : decn) = run(true);
  }
  const std::string k = kind_name(kind);
  const std::string tn = std::to_string(cores) + " threads";
  add({"bounds", shape.name, k, "f32", "-", "encode (shuffle+zstd1+crc)", "MB/s", encn, enc1, true, "", -1,
       "colikv column: " + tn + "; baseline column: 1 thread (ratio = parallel speed-up)"});
  add({"bounds", shape.name, k, "f32", "-", "decode (zstd+crc+unshuffle)", "MB/s", decn, dec1, true, "", -1,
       "colikv column: " + tn + "; baseline column: 1 thread"});
  int64_t stored = 0;
  for (auto& x : enc) stored += static_cast<int64_t>(x.payload.size());
  // SQLite: the same blobs inserted 16 a transaction, WAL, page 65536.
  for (const char* sync : {"FULL", "NORMAL"}) {
    double with_ckpt = 0, without = 0;
    for (int ck = 0; ck < 2; ++ck) {
      const std::string db = cfg.dir + "/bounds.db";
      remove_store(db);
      sqlite3* h = nullptr;
      sqlite3_open(db.c_str(), &h);
      sqlite3_exec(h, (std::string("PRAGMA page_size=65536; PRAGMA journal_mode=WAL; PRAGMA synchronous=") + sync +
                       (ck ? "; PRAGMA wal_autocheckpoint=0" : "") + "; CREATE TABLE t(id INTEGER PRIMARY KEY, p BLOB)")
                          .c_str(),
                   nullptr, nullptr, nullptr);
      sqlite3_stmt* st = nullptr;
      sqlite3_prepare_v2(h, "INSERT INTO t(p) VALUES (?)", -1, &st, nullptr);
      ::sync();
      auto t0 = Clock::now();
      for (int rep = 0; rep < 3; ++rep)
        for (int64_t first = 0; first < chunks; first += 16) {
          sqlite3_exec(h, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
          for (int64_t j = first; j < std::min(chunks, first + 16); ++j) {
            const auto& x = enc[static_cast<size_t>(j)];
            sqlite3_bind_blob(st, 1, x.payload.data(), static_cast<int>(x.payload.size()), SQLITE_STATIC);
            sqlite3_step(st);
            sqlite3_reset(st);
          }
          sqlite3_exec(h, "COMMIT", nullptr, nullptr, nullptr);
        }
      (ck ? without : with_ckpt) = 3 * static_cast<double>(stored) / 1e6 / since(t0);
      sqlite3_finalize(st);
      sqlite3_close(h);
      remove_store(db);
    }
    add({"bounds", shape.name, k, "f32", sync, "SQLite blob insert", "MB/s", with_ckpt, without, true, "", -1,
         "compressed MB/s; colikv column: SQLite's inline auto-checkpoint, baseline column: no checkpoint"});
  }
  // The device: 3 x the stored bytes written and fdatasync'd every 64 MB.
  {
    const std::string f = cfg.dir + "/bounds.raw";
    FILE* fp = std::fopen(f.c_str(), "wb");
    std::vector<char> buf(static_cast<size_t>(64) << 20, 1);
    ::sync();
    auto t0 = Clock::now();
    int64_t written = 0;
    while (written < 3 * stored) {
      std::fwrite(buf.data(), 1, buf.size(), fp);
      std::fflush(fp);
      ::fdatasync(fileno(fp));
      written += static_cast<int64_t>(buf.size());
    }
    const double w = static_cast<double>(written) / 1e6 / since(t0);
    std::fclose(fp);
    ::unlink(f.c_str());
    add({"bounds", "-", "-", "-", "-", "device write+fdatasync", "MB/s", w, 0, false, "", -1, "64 MB per fdatasync"});
  }
}

// ---------------------------------------------------------------- the genuine sample

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

// ---------------------------------------------------------------- writers side by side (issue 20)

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

#if COLIKV_WITH_POSTGRES
// K plain libpq clients, each inserting `turns[k]` (one transaction each, the
// payloads as binary bytea parameters) into a plain table: the server's own
// cost of storing the bytes colikv stored. Returns the wall time in seconds.
double plain_bytea_inserts(const std::string& uri, const std::vector<std::vector<std::vector<std::string>>>& turns) {
  {
    colikv::detail::PgConnection conn(uri, colikv::detail::PgConnection::Settings());
    conn.exec("DROP TABLE IF EXISTS plain_payloads; CREATE TABLE plain_payloads (id bigserial PRIMARY KEY, "
              "payload bytea NOT NULL); ALTER TABLE plain_payloads ALTER COLUMN payload SET STORAGE EXTERNAL",
              "bench: plain table");
  }
  std::vector<PGconn*> conns;
  for (size_t k = 0; k < turns.size(); ++k) conns.push_back(PQconnectdb(uri.c_str()));
  std::atomic<bool> failed{false};
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (size_t k = 0; k < turns.size(); ++k)
    ts.emplace_back([&, k] {
      PGconn* c = conns[k];
      if (PQstatus(c) != CONNECTION_OK) return void(failed = true);
      for (const auto& turn : turns[k]) {
        PQclear(PQexec(c, "BEGIN"));
        for (const std::string& payload : turn) {
          const char* v[1] = {payload.data()};
          const int len[1] = {static_cast<int>(payload.size())}, fmt[1] = {1};
          PGresult* r = PQexecParams(c, "INSERT INTO plain_payloads (payload) VALUES ($1)", 1, nullptr, v, len, fmt, 1);
          if (PQresultStatus(r) != PGRES_COMMAND_OK) failed = true;
          PQclear(r);
        }
        PQclear(PQexec(c, "COMMIT"));
      }
    });
  for (auto& t : ts) t.join();
  const double secs = since(t0);
  for (PGconn* c : conns) PQfinish(c);
  if (failed) throw std::runtime_error("bench: the plain bytea inserts failed");
  return secs;
}
#endif

// pg-throughput: K writers (threads, each with its own Store and connection)
// append `turns` 256-token turns of 78x576 to a conversation of their own;
// against K plain libpq clients inserting the same payload bytes as bytea.
void bench_pg_throughput(const Config& cfg, const Shape& big) {
#if !COLIKV_WITH_POSTGRES
  (void)cfg, (void)big;
  throw std::runtime_error("--only pg-throughput needs the PostgreSQL backend");
#else
  if (cfg.pg.empty()) throw std::runtime_error("--only pg-throughput needs --pg URI");
  const int64_t turn = cfg.turn_set ? cfg.turn : 256, turns = cfg.quick ? 2 : 4, n = turn * turns;
  // One set of values; each writer its own token ids, so that no two share a chunk.
  Engine src(big.m, n);
  src.compute(0, n, 21, Kind::kFull);
  const double record_mb = static_cast<double>(big.m.record_bytes()) / 1e6;
  for (int k : {1, 2, 4}) {
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(k));
    for (int w = 0; w < k; ++w) {
      Engine t(big.m, n);
      t.compute(0, n, 100 + static_cast<uint64_t>(w), Kind::kFull);
      tokens[static_cast<size_t>(w)] = t.tokens;
    }
    const std::string name = "throughput" + std::to_string(k);
    const std::string uri = pg_store(cfg, name);
    { colikv::Store warm(uri, store_options(colikv::Synchronous::kFull));  // the model row
      warm.append("warm", big.m, tokens[0].data(), 1, src.source()); }
    std::vector<std::unique_ptr<colikv::Store>> stores;
    for (int w = 0; w < k; ++w)
      stores.push_back(std::make_unique<colikv::Store>(uri, store_options(colikv::Synchronous::kFull)));
    std::atomic<bool> failed{false};
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int w = 0; w < k; ++w)
      ts.emplace_back([&, w] {
        try {
          for (int64_t len = turn; len <= n; len += turn)
            stores[static_cast<size_t>(w)]->append("w" + std::to_string(w), big.m, tokens[static_cast<size_t>(w)].data(),
                                                   len, src.source());
        } catch (const std::exception& e) {
          std::fprintf(stderr, "pg-throughput writer %d: %s\n", w, e.what());
          failed = true;
        }
      });
    for (auto& t : ts) t.join();
    const double secs = since(t0);
    if (failed) throw std::runtime_error("bench: a pg-throughput writer failed");
    stores.clear();
    // The payloads each writer stored, turn by turn, for the plain clients.
    std::vector<std::vector<std::vector<std::string>>> plain(static_cast<size_t>(k));
    int64_t stored = 0;
    {
      colikv::detail::PgConnection conn(uri, colikv::detail::PgConnection::Settings());
      for (int w = 0; w < k; ++w) {
        plain[static_cast<size_t>(w)].resize(static_cast<size_t>(turns));
        colikv::detail::PgParams p;
        p.add("w" + std::to_string(w));
        colikv::detail::PgRows r = conn.query(
            "SELECT ch.first_pos, ch.payload FROM conversations c JOIN conversation_chunks cc "
            "ON cc.conversation_id = c.conversation_id JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
            "WHERE c.name = $1 ORDER BY cc.seq",
            p, "bench: reading payloads");
        for (int i = 0; i < r.size(); ++i) {
          const size_t t = static_cast<size_t>(std::min<int64_t>(r.int64(i, 0) / turn, turns - 1));
          plain[static_cast<size_t>(w)][t].emplace_back(reinterpret_cast<const char*>(r.bytes(i, 1)),
                                                        static_cast<size_t>(r.length(i, 1)));
          stored += r.length(i, 1);
        }
      }
    }
    const double plain_secs = plain_bytea_inserts(uri, plain);
    drop_pg_store(cfg, name);
    const double records = static_cast<double>(k * n) * record_mb;
    const std::string kw = std::to_string(k) + (k == 1 ? " writer" : " writers");
    add({"pgthru", big.name, "full", "f32", "FULL", "K=" + std::to_string(k) + " records", "MB/s", records / secs,
         records / plain_secs, true, "", -1,
         kw + ", " + std::to_string(turns) + " turns of " + std::to_string(turn) + " each; baseline: plain bytea clients"});
    add({"pgthru", big.name, "full", "f32", "FULL", "K=" + std::to_string(k) + " stored", "MB/s", stored / 1e6 / secs,
         stored / 1e6 / plain_secs, true, "", -1,
         "the same payload bytes, one transaction per turn each"});
  }
#endif
}

std::map<std::string, std::string> machine_info() {
  std::map<std::string, std::string> mi;
  mi["nproc"] = std::to_string(std::thread::hardware_concurrency());
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "model name", 10) == 0) {
        std::string v = std::strchr(line, ':') ? std::strchr(line, ':') + 2 : line;
        while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
        mi["cpu"] = v;
        break;
      }
    std::fclose(f);
  }
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    if (std::fgets(line, sizeof line, f)) {
      std::string v = line;
      while (!v.empty() && v.back() == '\n') v.pop_back();
      mi["memory"] = v;
    }
    std::fclose(f);
  }
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    char line[128];
    if (std::fgets(line, sizeof line, f)) {
      std::string v = line;
      while (!v.empty() && v.back() == '\n') v.pop_back();
      mi["loadavg_at_start"] = v;
    }
    std::fclose(f);
  }
  return mi;
}

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
    else if (a == "--page-size") g_page_size = std::atoi(next().c_str());
    else if (a == "--tenant") g_tenant = next();
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
  g_table_to_stderr = cfg.json == "-";
  ::mkdir(cfg.dir.c_str(), 0755);

  Shape big, small;
  big.name = "78x576";
  big.m.n_layers = 78; big.m.kv_lora = 512; big.m.qk_rope = 64; big.m.vocab = 154880; big.m.weights_id = "bench";
  small.name = "4x80";
  small.m.n_layers = 4; small.m.kv_lora = 64; small.m.qk_rope = 16; small.m.vocab = 154880; small.m.weights_id = "bench";

  auto mi = machine_info();
  std::fprintf(table_out(), "colikv_bench: %s, %s cores, %s; load %s\n", mi["cpu"].c_str(), mi["nproc"].c_str(),
               mi["memory"].c_str(), mi["loadavg_at_start"].c_str());
  std::fprintf(table_out(), "%-7s %-7s %-11s %-4s %-6s %-26s %10s %10s %7s %-8s %-8s %s\n", "work", "shape", "data",
               "prec", "sync", "metric [unit]", "colikv", "baseline", "ratio", "target", "", "note");
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
      // The issue's shape: 78 x (512+64), 512-token turns to 2,048 tokens.
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
      bench_tiny_store(cfg, tiny, 100);  // 64,400 bytes of KV: the issue's "64 KB conversation"
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
