// The harness's shared pieces: statistics, files, the result table and its
// JSON, the machine's description, and the options every store is opened with.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "bench.h"

namespace colikv_bench {

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

double mean(const std::vector<double>& v) {
  double total = 0;
  for (double x : v) total += x;
  return v.empty() ? 0 : total / static_cast<double>(v.size());
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

const char* kind_name(Kind k) {
  return k == Kind::kFull ? "full" : k == Kind::kBf16Origin ? "bf16-origin" : "genuine";
}

// ---------------------------------------------------------------- results

namespace {

std::vector<Row> rows;
bool table_to_stderr = false;

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) continue;
    o += ch;
  }
  return o;
}

}  // namespace

void set_table_to_stderr(bool to_stderr) { table_to_stderr = to_stderr; }

FILE* table_out() { return table_to_stderr ? stderr : stdout; }

void print_header() {
  std::fprintf(table_out(), "%-7s %-7s %-11s %-4s %-6s %-26s %10s %10s %7s %-8s %-8s %s\n", "work", "shape", "data",
               "prec", "sync", "metric [unit]", "colikv", "baseline", "ratio", "target", "", "note");
}

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
  rows.push_back(std::move(r));
}

void write_json(FILE* f, const std::map<std::string, std::string>& machine) {
  std::fprintf(f, "{\n  \"machine\": {");
  bool first = true;
  for (auto& kv : machine) {
    std::fprintf(f, "%s\"%s\": \"%s\"", first ? "" : ", ", kv.first.c_str(), json_escape(kv.second).c_str());
    first = false;
  }
  std::fprintf(f, "},\n  \"rows\": [\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
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
                 i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
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

// ---------------------------------------------------------------- store options

StoreSettings& store_settings() {
  static StoreSettings settings;
  return settings;
}

colikv::Options store_options(colikv::Synchronous sync, const std::string& precision) {
  colikv::Options o;
  o.synchronous = sync;
  if (const char* e = std::getenv("COLIKV_BENCH_LEVEL")) o.zstd_level = std::atoi(e);
  if (const char* e = std::getenv("COLIKV_BENCH_CHUNK")) o.chunk_target_bytes = std::atoll(e);
  if (const char* e = std::getenv("COLIKV_BENCH_PAGE")) o.page_size = std::atoi(e);
  if (store_settings().page_size > 0) o.page_size = store_settings().page_size;
  o.tenant = store_settings().tenant;
  if (const char* e = std::getenv("COLIKV_BENCH_THREADS")) o.threads = std::atoi(e);
#ifndef COLIKV_BENCH_NO_PRECISION
  if (precision == "bf16") o.new_conversation_precision = colikv::Precision::kBf16;
#else
  (void)precision;
#endif
  return o;
}

const char* sync_name(colikv::Synchronous s) { return s == colikv::Synchronous::kFull ? "FULL" : "NORMAL"; }

}  // namespace colikv_bench
