// What a Store counted and what a store holds (colikv/metrics.h), as plain
// dicts and as Prometheus's text format: Store.metrics, Store.gauges,
// Store.metrics_text and colikv.process_metrics.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "colikv/error.h"
#include "colikv/metrics.h"
#include "colikv/store.h"

#include "store.h"
#include "text.h"

namespace colikv_py {
namespace {

py::dict histogram_dict(const colikv::Histogram& h) {
  py::dict d;
  d["upper_bounds"] = h.upper_bounds;
  d["counts"] = h.counts;
  d["count"] = h.count;
  d["sum"] = h.sum;
  return d;
}

py::dict metrics_dict(const colikv::Metrics& m) {
  py::dict d;
  d["tenant"] = Text(m.tenant);
  d["appends"] = m.appends;
  d["append_turns"] = m.append_turns;
  d["append_tokens"] = m.append_tokens;
  d["append_raw_bytes"] = m.append_raw_bytes;
  d["append_stored_bytes"] = m.append_stored_bytes;
  d["append_shared_bytes"] = m.append_shared_bytes;
  d["loads"] = m.loads;
  d["load_tokens"] = m.load_tokens;
  d["load_bytes"] = m.load_bytes;
  d["match_queries"] = m.match_queries;
  d["match_answers"] = m.match_answers;
  d["match_tokens"] = m.match_tokens;
  d["adoptions"] = m.adoptions;
  d["evictions"] = m.evictions;
  d["evicted_bytes"] = m.evicted_bytes;
  d["expirations"] = m.expirations;
  d["erases"] = m.erases;
  d["conflicts"] = m.conflicts;
  d["busy_waits"] = m.busy_waits;
  d["lock_wait_seconds"] = m.lock_wait_seconds;
  d["reclaimed_held_chunks"] = m.reclaimed_held_chunks;
  // Errors by the code's stable name ("not found", "conflict", ...), those counted only.
  py::dict errors;
  for (int slot = 1; slot < colikv::kErrorCodeSlots; ++slot)
    if (m.errors[slot] != 0)
      errors[colikv::error_code_name(static_cast<colikv::ErrorCode>(-slot))] = m.errors[slot];
  d["errors"] = errors;
  d["append_seconds"] = histogram_dict(m.append_seconds);
  d["load_seconds"] = histogram_dict(m.load_seconds);
  d["match_seconds"] = histogram_dict(m.match_seconds);
  d["async_stall_seconds"] = histogram_dict(m.async_stall_seconds);
  d["async_queue_depth"] = histogram_dict(m.async_queue_depth);
  d["async_durable_seconds"] = histogram_dict(m.async_durable_seconds);
  return d;
}

py::dict gauges_dict(const colikv::Gauges& g) {
  py::dict d;
  d["store"] = Text(g.store);
  py::list rows;
  for (const auto& r : g.rows) {
    py::dict row;
    row["tenant"] = Text(r.tenant);
    row["model"] = r.model;
    row["conversations"] = r.conversations;
    row["tokens"] = r.tokens;
    row["stored_bytes"] = r.stored_bytes;
    row["evicted_bytes"] = r.evicted_bytes;
    rows.append(row);
  }
  d["rows"] = rows;
  d["file_bytes"] = g.file_bytes;
  d["wal_bytes"] = g.wal_bytes;
  d["held_chunks"] = g.held_chunks;
  return d;
}

}  // namespace

void def_store_metrics(py::module_& mod, py::class_<PyStore>& cls) {
  cls.def(
         "metrics",
         [](PyStore& ps) { return metrics_dict(locked_call(ps, [](colikv::Store& s) { return s.metrics(); })); },
         "What this Store counted since it opened, for its tenant: a dict of counters (appends, loads, matches, "
         "evictions, lock waits, errors by code name, ...) and latency histograms (each a dict of upper_bounds, "
         "counts, count and sum, in seconds). The names are the README's operators' section's.")
      .def(
          "gauges",
          [](PyStore& ps) { return gauges_dict(locked_call(ps, [](colikv::Store& s) { return s.gauges(); })); },
          "What the store holds now, every tenant's, from one read snapshot: a dict with rows (per tenant and "
          "model: conversations, tokens, stored_bytes, evicted_bytes), file_bytes, wal_bytes and held_chunks.")
      .def(
          "metrics_text",
          [](PyStore& ps) {
            return locked_call(ps, [](colikv::Store& s) { return colikv::metrics_text({s.metrics()}); });
          },
          "This Store's counters in Prometheus's text exposition format, as colikv_metrics_text writes them "
          "(the store's gauges: colikv stats STORE --prometheus).");
  mod.def(
      "process_metrics",
      [] {
        std::vector<colikv::Metrics> all;
        {
          py::gil_scoped_release nogil;
          all = colikv::process_metrics();
        }
        py::list out;
        for (const auto& m : all) out.append(metrics_dict(m));
        return out;
      },
      "This process's counts by tenant, summed over its Stores, open and closed: a list of dicts shaped as "
      "Store.metrics() returns them.");
}

}  // namespace colikv_py
