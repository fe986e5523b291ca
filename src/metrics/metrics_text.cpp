// Prometheus's text exposition format (version 0.0.4) of colikv/metrics.h:
// metrics_text and gauges_text. Names follow Prometheus's conventions: a
// colikv_ prefix, base units (seconds, bytes), _total on counters.
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "colikv/metrics.h"

namespace colikv {

namespace {

// A label value: backslash, double quote and newline escaped as the format
// says; another control character (a store's weights id may hold one) as
// %XX, so that no raw one reaches a terminal or a scraper.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", u);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

std::string number(uint64_t v) { return std::to_string(v); }
std::string number(int64_t v) { return std::to_string(v); }
std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}
std::string bound(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// The stable label of each error code (errors[-code]).
const char* const kCodeLabels[kErrorCodeSlots] = {
    "ok",      "not_found",   "model_mismatch", "diverged", "conflict", "corrupt", "busy",    "disk_full",
    "invalid_argument", "io", "read_only",      "too_large", "version",  "internal", "evicted", "unsupported"};

struct CounterFamily {
  const char* name;
  const char* help;
  uint64_t Metrics::*field;
};

const CounterFamily kCounters[] = {
    {"colikv_appends_total", "Calls of append, write, create and append_async.", &Metrics::appends},
    {"colikv_append_turns_total", "Transactions that committed new positions (a call's, or a queued turn's).",
     &Metrics::append_turns},
    {"colikv_append_tokens_total", "Positions committed by appends.", &Metrics::append_tokens},
    {"colikv_append_raw_bytes_total", "Bytes of the appended positions as .coli_kv records.",
     &Metrics::append_raw_bytes},
    {"colikv_append_bytes_total", "Payload bytes of the chunks stored for appends.", &Metrics::append_stored_bytes},
    {"colikv_append_shared_bytes_total", "Raw bytes of chunks linked to an equal stored chunk instead of stored.",
     &Metrics::append_shared_bytes},
    {"colikv_loads_total", "Calls of load and load_range.", &Metrics::loads},
    {"colikv_load_tokens_total", "Positions loaded.", &Metrics::load_tokens},
    {"colikv_load_bytes_total", "Bytes of the loaded positions as .coli_kv records.", &Metrics::load_bytes},
    {"colikv_match_queries_total", "Prefix match queries.", &Metrics::match_queries},
    {"colikv_match_answers_total", "Prefix match queries that found a conversation.", &Metrics::match_answers},
    {"colikv_match_tokens_total", "Prompt tokens the found conversations held.", &Metrics::match_tokens},
    {"colikv_adoptions_total", "Adopt calls that loaded a matched prefix.", &Metrics::adoptions},
    {"colikv_evictions_total", "Conversations whose KV data an eviction dropped.", &Metrics::evictions},
    {"colikv_evicted_bytes_total", "Payload bytes evictions freed.", &Metrics::evicted_bytes},
    {"colikv_expirations_total", "Conversations deleted by a tenant's retention or expire.", &Metrics::expirations},
    {"colikv_erases_total", "Conversations deleted by remove.", &Metrics::erases},
    {"colikv_conflicts_total", "Calls and queued turns that failed because another writer changed the conversation.",
     &Metrics::conflicts},
    {"colikv_busy_waits_total", "Waits for another connection's lock on the database.", &Metrics::busy_waits},
    {"colikv_reclaimed_held_chunks_total", "Chunks of writers that died mid-turn, freed by this process.",
     &Metrics::reclaimed_held_chunks},
};

struct HistogramFamily {
  const char* name;
  const char* help;
  Histogram Metrics::*field;
};

const HistogramFamily kHistograms[] = {
    {"colikv_append_seconds", "Time of append and write calls.", &Metrics::append_seconds},
    {"colikv_load_seconds", "Time of load and load_range calls.", &Metrics::load_seconds},
    {"colikv_match_seconds", "Time of prefix match queries.", &Metrics::match_seconds},
    {"colikv_async_stall_seconds", "Time append_async held the caller's (the engine's) thread.",
     &Metrics::async_stall_seconds},
    {"colikv_async_queue_depth", "Turns queued or committing, the new one included, when a turn is queued.",
     &Metrics::async_queue_depth},
    {"colikv_async_durable_seconds", "Time from append_async's return to the queued turn's commit.",
     &Metrics::async_durable_seconds},
};

}  // namespace

std::string metrics_text(const std::vector<Metrics>& metrics) {
  std::string out;
  for (const CounterFamily& f : kCounters) {
    family(out, f.name, "counter", f.help);
    for (const Metrics& m : metrics)
      out += std::string(f.name) + "{tenant=\"" + label_value(m.tenant) + "\"} " + number(m.*f.field) + "\n";
  }
  family(out, "colikv_lock_wait_seconds_total", "counter", "Time spent waiting for another connection's lock.");
  for (const Metrics& m : metrics)
    out += "colikv_lock_wait_seconds_total{tenant=\"" + label_value(m.tenant) + "\"} " + number(m.lock_wait_seconds) +
           "\n";
  family(out, "colikv_errors_total", "counter", "Calls that failed, by error code.");
  for (const Metrics& m : metrics)
    for (int i = 1; i < kErrorCodeSlots; ++i)
      out += "colikv_errors_total{tenant=\"" + label_value(m.tenant) + "\",code=\"" + kCodeLabels[i] + "\"} " +
             number(m.errors[i]) + "\n";
  for (const HistogramFamily& f : kHistograms) {
    family(out, f.name, "histogram", f.help);
    for (const Metrics& m : metrics) {
      const Histogram& h = m.*f.field;
      const std::string tenant = "tenant=\"" + label_value(m.tenant) + "\"";
      uint64_t cumulative = 0;
      for (size_t i = 0; i < h.upper_bounds.size() && i < h.counts.size(); ++i) {
        cumulative += h.counts[i];
        out += std::string(f.name) + "_bucket{" + tenant + ",le=\"" + bound(h.upper_bounds[i]) + "\"} " +
               number(cumulative) + "\n";
      }
      out += std::string(f.name) + "_bucket{" + tenant + ",le=\"+Inf\"} " + number(h.count) + "\n";
      out += std::string(f.name) + "_sum{" + tenant + "} " + number(h.sum) + "\n";
      out += std::string(f.name) + "_count{" + tenant + "} " + number(h.count) + "\n";
    }
  }
  return out;
}

std::string gauges_text(const Gauges& g) {
  struct RowFamily {
    const char* name;
    const char* help;
    int64_t GaugeRow::*field;
  };
  static constexpr RowFamily kRows[] = {
      {"colikv_store_conversations", "Conversations in the store.", &GaugeRow::conversations},
      {"colikv_store_tokens", "Committed tokens of those conversations.", &GaugeRow::tokens},
      {"colikv_store_stored_bytes", "Payload bytes of the distinct chunks they use.", &GaugeRow::stored_bytes},
      {"colikv_store_evicted_bytes", "Raw bytes of their chunks whose KV data was evicted.", &GaugeRow::evicted_bytes},
  };
  // Every series names its store: cron jobs of several stores write into one textfile folder.
  const std::string store = "store=\"" + label_value(g.store) + "\"";
  std::string out;
  for (const RowFamily& f : kRows) {
    family(out, f.name, "gauge", f.help);
    for (const GaugeRow& r : g.rows)
      out += std::string(f.name) + "{" + store + ",tenant=\"" + label_value(r.tenant) + "\",model=\"" +
             label_value(r.model) + "\"} " + number(r.*f.field) + "\n";
  }
  family(out, "colikv_store_file_bytes", "gauge", "Bytes of the store's database file.");
  out += "colikv_store_file_bytes{" + store + "} " + number(g.file_bytes) + "\n";
  family(out, "colikv_store_wal_bytes", "gauge", "Bytes of the store's write-ahead log.");
  out += "colikv_store_wal_bytes{" + store + "} " + number(g.wal_bytes) + "\n";
  family(out, "colikv_store_held_chunks", "gauge", "Chunks held by writers mid-turn.");
  out += "colikv_store_held_chunks{" + store + "} " + number(g.held_chunks) + "\n";
  return out;
}

}  // namespace colikv
