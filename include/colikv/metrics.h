// colikv/metrics.h: what a process counts (Store::metrics, process_metrics)
// and what a store holds (Store::gauges), and both in Prometheus's text
// exposition format (metrics_text, gauges_text; the names are listed in the
// README's operators' section).
//
// Counters count from the Store's open (per Store) or from the library's
// first Store in this process (process_metrics, which keeps the counts of
// the Stores closed since). A counter is read without stopping the Store's
// calls: the fields of one snapshot may be a call apart.
#ifndef COLIKV_METRICS_H
#define COLIKV_METRICS_H

#include <cstdint>
#include <string>
#include <vector>

#include "colikv/error.h"
#include "colikv/export.h"

namespace colikv {

// A histogram as Prometheus keeps one: counts[i] observations were at most
// upper_bounds[i] and more than upper_bounds[i - 1]; counts.back() counts those
// above the last bound (+Inf). Latencies are in seconds, queue depths in turns.
struct Histogram {
  std::vector<double> upper_bounds;
  std::vector<uint64_t> counts;  // upper_bounds.size() + 1 entries
  uint64_t count = 0;            // all observations
  double sum = 0;                // of the observed values
};

// The number of error codes metrics keep apart: errors[-code] counts ErrorCode code.
constexpr int kErrorCodeSlots = 16;

// What Stores of one tenant counted.
struct Metrics {
  std::string tenant;  // Options::tenant ("" for the default tenant)

  // Appends: calls of append, write, create and append_async that were
  // accepted (append_async: queued); turns: transactions that committed new
  // positions (one per call, or per queued turn); tokens: positions committed.
  uint64_t appends = 0;
  uint64_t append_turns = 0;
  uint64_t append_tokens = 0;
  // Bytes of those positions as .coli_kv records (tokens * record bytes);
  // payload bytes of the chunks stored for them; raw bytes of the chunks
  // linked to an equal stored chunk instead of being stored again.
  uint64_t append_raw_bytes = 0;
  uint64_t append_stored_bytes = 0;
  uint64_t append_shared_bytes = 0;

  // load, load_range and adopt's load: calls, positions and raw bytes filled.
  uint64_t loads = 0;
  uint64_t load_tokens = 0;
  uint64_t load_bytes = 0;

  // match and match_loadable (and adopt's match): queries, those that found
  // a conversation, and the prompt tokens it held.
  uint64_t match_queries = 0;
  uint64_t match_answers = 0;
  uint64_t match_tokens = 0;
  uint64_t adoptions = 0;  // adopt calls that loaded positions

  // Conversations whose KV data an eviction (gc, a budget) dropped; whole
  // conversations a tenant's retention or expire() deleted; remove() calls.
  uint64_t evictions = 0;
  uint64_t evicted_bytes = 0;  // payload bytes those evictions freed
  uint64_t expirations = 0;
  uint64_t erases = 0;

  // Calls that failed with kConflict (another writer changed the
  // conversation), and the queued turns that did; waits of this Store's
  // connection for another connection's lock on the database (SQLite's busy
  // handler), whichever Store's call the thread was in, and the time spent
  // in them.
  uint64_t conflicts = 0;
  uint64_t busy_waits = 0;
  double lock_wait_seconds = 0;
  // Chunks of writers that died mid-turn, freed by this process (SQLite).
  uint64_t reclaimed_held_chunks = 0;

  // Calls that failed, by code: errors[-static_cast<int>(code)].
  uint64_t errors[kErrorCodeSlots] = {};

  Histogram append_seconds;         // append and write, whole calls
  Histogram load_seconds;           // load, load_range
  Histogram match_seconds;          // match, match_loadable, adopt
  Histogram async_stall_seconds;    // append_async on the caller's thread: the engine's stall
  Histogram async_queue_depth;      // turns queued or committing, this one included, when queued
  Histogram async_durable_seconds;  // from append_async's return to the turn's commit
};

// One tenant and model's share of a store, as a query reads it now.
struct GaugeRow {
  std::string tenant;
  std::string model;  // ModelSignature::to_string()
  int64_t conversations = 0;
  int64_t tokens = 0;         // of those conversations
  int64_t stored_bytes = 0;   // payload bytes of the distinct chunks they use
  int64_t evicted_bytes = 0;  // raw bytes (as .coli_kv records) of their chunks whose values were evicted
};

// What a store holds, every tenant's, from one read snapshot.
struct Gauges {
  std::string store;           // the store's location as messages show it (shown_store_location)
  std::vector<GaugeRow> rows;  // by tenant, then model (by its id)
  int64_t file_bytes = 0;      // the database file (the whole store's size on PostgreSQL)
  int64_t wal_bytes = 0;       // its write-ahead log (0 on PostgreSQL)
  int64_t held_chunks = 0;     // chunks held by writers mid-turn (SQLite's objects first; 0 on PostgreSQL)
};

// This process's counts, by tenant (bytewise), summed over its Stores, open
// and closed. Never throws but std::bad_alloc.
COLIKV_API std::vector<Metrics> process_metrics();

// Prometheus's text exposition format (version 0.0.4): # HELP and # TYPE
// lines, then the samples, with a tenant label on every counter and
// histogram series. metrics_text of several Metrics renders each family once.
COLIKV_API std::string metrics_text(const std::vector<Metrics>& metrics);
COLIKV_API std::string gauges_text(const Gauges& gauges);

}  // namespace colikv

#endif  // COLIKV_METRICS_H
