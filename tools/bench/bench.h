// The benchmark's harness, shared by its workload files: timing and
// statistics, the engine-shaped buffers, the raw .coli_kv baseline the engine
// writes today (kv_persist.h), the result rows (table and JSON), the run's
// configuration, and fresh stores on the --pg server. Workloads reach colikv
// through include/colikv/*.h; the few internals a figure needs are behind
// bench_access.h.
#ifndef COLIKV_TOOLS_BENCH_BENCH_H
#define COLIKV_TOOLS_BENCH_BENCH_H

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "colikv/store.h"
#include "synthetic_engine.h"

typedef struct pg_conn PGconn;  // libpq's connection, as libpq-fe.h declares it

namespace colikv_bench {

// ---------------------------------------------------------------- timing and files

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

using colikv_examples::splitmix;

int64_t file_size(const std::string& p);
// Removes a SQLite store and its companions (-wal, -shm, -journal).
void remove_store(const std::string& p);

double median(std::vector<double> v);
double pct(std::vector<double> v, double q);
double mean(const std::vector<double>& v);  // 0 for none
// Each pair's own ratio, baseline time over ours (above 1: ours is faster):
// "per pair: median 1.14 (quartiles 1.06-1.17), >=1.1 in 6 of 9".
std::string pair_ratios(const std::vector<double>& baseline, const std::vector<double>& ours);

// ---------------------------------------------------------------- engine buffers

enum class Kind { kFull, kBf16Origin, kGenuine };
const char* kind_name(Kind k);

// The demo's engine buffers and data (examples/synthetic_engine.h), with
// the data kinds, the genuine sample and an error measure.
struct Engine : colikv_examples::EngineBuffers {
  using EngineBuffers::EngineBuffers;

  void compute(int64_t from, int64_t to, uint64_t seed, Kind kind) {
    EngineBuffers::compute(from, to, seed, kind == Kind::kBf16Origin);
  }
  // Fills positions from a .coli_kv file's records (the genuine sample).
  bool from_file(const std::string& path, int64_t& n);
  // Largest |a-b|/|a| over positions [0, n) (a = this, the original).
  double max_rel_error(const Engine& o, int64_t n) const;
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

  Baseline(std::string p, const colikv::ModelSignature& model, bool s);
  ~Baseline();
  Baseline(const Baseline&) = delete;
  Baseline& operator=(const Baseline&) = delete;
  int64_t rec() const { return m.record_bytes(); }
  void hdr(int32_t* h, int n) const;
  bool open();
  void append(const Engine& e, int64_t len);
  // Writes the engine's positions [from, to) as the file's records from
  // record `at` on (the file open); write_count sets the header's count.
  void write_records(const Engine& e, int64_t from, int64_t to, int64_t at);
  void write_count(int64_t n);
  int64_t load(Engine& e) const;
};

// Copies a file through a 1 MiB buffer and fsyncs it: the least any import or
// export of those bytes costs.
int64_t copy_file(const std::string& src, const std::string& dst);

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

// Where the table goes: stdout, or stderr when the JSON goes to stdout.
void set_table_to_stderr(bool to_stderr);
FILE* table_out();
// The table's header line.
void print_header();
// Prints a row to the table and keeps it for the JSON.
void add(Row r);
// Every row added so far, with the machine's description.
void write_json(FILE* f, const std::map<std::string, std::string>& machine);
// The CPU, cores, memory and load average at start.
std::map<std::string, std::string> machine_info();

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

// What every store of the run is opened with: --page-size (0: the library's
// default) and --tenant, set once by main before any workload runs.
struct StoreSettings {
  int page_size = 0;
  std::string tenant;
};
StoreSettings& store_settings();

// A store's options for this run: the sync mode, the precision of new
// conversations, and the COLIKV_BENCH_* environment overrides.
colikv::Options store_options(colikv::Synchronous sync, const std::string& precision = "f32");

const char* sync_name(colikv::Synchronous s);

// ---------------------------------------------------------------- the --pg server (pg_server.cpp)

// A plain libpq connection of the benchmark's own to the --pg server (not a
// store's): the server's notices dropped, as a store's connection drops them.
// Only in a build with the PostgreSQL backend.
class PgSession {
 public:
  // Throws colikv::Error(kIO) naming the server when it cannot connect.
  explicit PgSession(const std::string& uri);
  ~PgSession();
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;
  PGconn* handle() const { return conn_; }
  // Runs sql (one or more statements); throws colikv::Error(kIO) naming `what`.
  void exec(const std::string& sql, const std::string& what);

 private:
  PGconn* conn_ = nullptr;
};

// A fresh store named `name` on the --pg server: its own schema, emptied first.
std::string pg_store(const Config& cfg, const std::string& name);
void drop_pg_store(const Config& cfg, const std::string& name);
// A plain binary SELECT of conversation "conv"'s payload rows in list order,
// on a libpq connection of its own: the server's and the wire's own cost of
// the bytes a load reads. Returns the bytes received.
int64_t plain_select_payloads(const std::string& location);

// ---------------------------------------------------------------- the workloads, one file each

// turns.cpp: turns, load and size (the sample's too)
void bench_turns(const Config& cfg, const Shape& shape, Kind kind, const std::string& precision,
                 colikv::Synchronous sync, Engine& src, Engine& dst, int64_t n_tokens, int64_t turn);
void bench_sample(const Config& cfg, colikv::Synchronous sync);
// async.cpp
void bench_async(const Config& cfg, const Shape& shape, colikv::Synchronous sync, Engine& src, Engine& dst,
                 int64_t n_tokens, int64_t turn);
// small.cpp and small_appends.cpp
void bench_small_turns(const Config& cfg, const Shape& shape, colikv::Synchronous sync, int64_t n, int64_t turn);
void bench_tiny_store(const Config& cfg, const Shape& shape, int64_t n);
void bench_small_appends(const Config& cfg, const Shape& shape, colikv::Synchronous sync, int64_t count, int64_t len,
                         int64_t stored);
// import.cpp; child_main runs one operation in the child process it times.
void bench_import(const Config& cfg, const Shape& shape, Kind kind, const std::string& file_override = "");
int child_main(int argc, char** argv);
// many.cpp: list, open, delete and longest-prefix match among many conversations
void bench_many(const Config& cfg, const Shape& shape, int64_t per_conv);
// fork.cpp
void bench_fork(const Config& cfg, const Shape& shape, int64_t n, int64_t grow);
// budget.cpp
void bench_budget(const Config& cfg, int rounds);
// bounds.cpp: the codec, SQLite's blob writes and the device alone
void bench_bounds(const Config& cfg, const Shape& shape, Kind kind);
// isolation.cpp: writers side by side, SQLite and PostgreSQL
void bench_sqlite_isolation(const Config& cfg, const Shape& big);
void bench_pg_isolation(const Config& cfg, const Shape& big);
// pg_throughput.cpp
void bench_pg_throughput(const Config& cfg, const Shape& big);

}  // namespace colikv_bench

#endif  // COLIKV_TOOLS_BENCH_BENCH_H
