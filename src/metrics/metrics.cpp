// A Store's counters and the process's registry of them (metrics.h);
// process_metrics. The text format is metrics_text.cpp's.
#include "metrics/metrics.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "core/thread_annotations.h"

namespace colikv {

namespace detail {

namespace {

// Latencies from 10 us (a match's index probe) to 10 s (a turn waiting out
// another writer's lock), in nanoseconds.
constexpr int64_t kLatencyNs[] = {10000,    25000,    50000,     100000,    250000,     500000,    1000000,
                                  2500000,  5000000,  10000000,  25000000,  50000000,   100000000, 250000000,
                                  500000000, 1000000000, 2500000000, 5000000000, 10000000000};
// Queue depths in turns, powers of two.
constexpr int64_t kDepthTurns[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

static_assert(sizeof(kLatencyNs) / sizeof(kLatencyNs[0]) <= kMaxBuckets, "too many latency buckets");

uint64_t load(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }

// Never destroyed (see metrics.h): a Store closed from an atexit handler
// still folds its counts in here.
struct Registry {
  Mutex mu;
  std::vector<std::pair<const StoreCounters*, std::string>> live GUARDED_BY(mu);  // open Stores and their tenants
  std::map<std::string, Metrics> closed GUARDED_BY(mu);                           // by tenant
};
Registry& registry() {
  static Registry& r = *new Registry();
  return r;
}

void add_histogram(const Histogram& from, Histogram& to) {
  if (to.upper_bounds.empty()) {
    to = from;
    return;
  }
  for (size_t i = 0; i < to.counts.size() && i < from.counts.size(); ++i) to.counts[i] += from.counts[i];
  to.count += from.count;
  to.sum += from.sum;
}

// m += from, but for the tenant.
void add_metrics(const Metrics& from, Metrics& to) {
  // The plain counters, field by field.
  for (uint64_t Metrics::*f :
       {&Metrics::appends, &Metrics::append_turns, &Metrics::append_tokens, &Metrics::append_raw_bytes,
        &Metrics::append_stored_bytes, &Metrics::append_shared_bytes, &Metrics::loads, &Metrics::load_tokens,
        &Metrics::load_bytes, &Metrics::match_queries, &Metrics::match_answers, &Metrics::match_tokens,
        &Metrics::adoptions, &Metrics::evictions, &Metrics::evicted_bytes, &Metrics::expirations, &Metrics::erases,
        &Metrics::conflicts, &Metrics::busy_waits, &Metrics::reclaimed_held_chunks})
    to.*f += from.*f;
  to.lock_wait_seconds += from.lock_wait_seconds;
  for (int i = 0; i < kErrorCodeSlots; ++i) to.errors[i] += from.errors[i];
  for (Histogram Metrics::*h : {&Metrics::append_seconds, &Metrics::load_seconds, &Metrics::match_seconds,
                                &Metrics::async_stall_seconds, &Metrics::async_queue_depth,
                                &Metrics::async_durable_seconds})
    add_histogram(from.*h, to.*h);
}

}  // namespace

const HistogramBounds kLatencyBounds = {kLatencyNs, static_cast<int>(sizeof(kLatencyNs) / sizeof(kLatencyNs[0])),
                                        1e-9};
const HistogramBounds kDepthBounds = {kDepthTurns, static_cast<int>(sizeof(kDepthTurns) / sizeof(kDepthTurns[0])),
                                      1.0};

void AtomicHistogram::add_to(Histogram& h) const {
  Histogram mine;
  for (int i = 0; i < b_.n; ++i) mine.upper_bounds.push_back(static_cast<double>(b_.bounds[i]) * b_.unit);
  for (int i = 0; i <= b_.n; ++i) {
    mine.counts.push_back(load(counts_[i]));
    mine.count += mine.counts.back();
  }
  mine.sum = static_cast<double>(load(sum_)) * b_.unit;
  add_histogram(mine, h);
}

void StoreCounters::count_error(ErrorCode code) noexcept {
  const int slot = -static_cast<int>(code);
  add(errors[slot > 0 && slot < kErrorCodeSlots ? slot : -static_cast<int>(ErrorCode::kInternal)], 1);
  if (code == ErrorCode::kConflict) add(conflicts, 1);
}

void StoreCounters::commit(PendingCounts& p) noexcept {
  if (p.append_turns) {
    add(append_turns, p.append_turns);
    add(append_tokens, p.append_tokens);
    add(append_raw_bytes, p.append_raw_bytes);
  }
  if (p.append_stored_bytes) add(append_stored_bytes, p.append_stored_bytes);
  if (p.append_shared_bytes) add(append_shared_bytes, p.append_shared_bytes);
  if (p.evictions) add(evictions, p.evictions);
  if (p.evicted_bytes) add(evicted_bytes, p.evicted_bytes);
  if (p.expirations) add(expirations, p.expirations);
  if (p.erases) add(erases, p.erases);
  p = PendingCounts();
}

void StoreCounters::add_to(Metrics& m) const {
  Metrics c;
  c.appends = load(appends);
  c.append_turns = load(append_turns);
  c.append_tokens = load(append_tokens);
  c.append_raw_bytes = load(append_raw_bytes);
  c.append_stored_bytes = load(append_stored_bytes);
  c.append_shared_bytes = load(append_shared_bytes);
  c.loads = load(loads);
  c.load_tokens = load(load_tokens);
  c.load_bytes = load(load_bytes);
  c.match_queries = load(match_queries);
  c.match_answers = load(match_answers);
  c.match_tokens = load(match_tokens);
  c.adoptions = load(adoptions);
  c.evictions = load(evictions);
  c.evicted_bytes = load(evicted_bytes);
  c.expirations = load(expirations);
  c.erases = load(erases);
  c.conflicts = load(conflicts);
  c.busy_waits = load(busy_waits);
  c.lock_wait_seconds = static_cast<double>(load(lock_wait_ns)) * 1e-9;
  c.reclaimed_held_chunks = load(reclaimed_held_chunks);
  for (int i = 0; i < kErrorCodeSlots; ++i) c.errors[i] = load(errors[i]);
  append_seconds.add_to(c.append_seconds);
  load_seconds.add_to(c.load_seconds);
  match_seconds.add_to(c.match_seconds);
  async_stall_seconds.add_to(c.async_stall_seconds);
  async_queue_depth.add_to(c.async_queue_depth);
  async_durable_seconds.add_to(c.async_durable_seconds);
  add_metrics(c, m);
}

void register_counters(const StoreCounters* c, const std::string& tenant) {
  Registry& r = registry();
  LockGuard<Mutex> lock(r.mu);
  r.live.emplace_back(c, tenant);
}

void retire_counters(const StoreCounters* c) noexcept {
  Registry& r = registry();
  LockGuard<Mutex> lock(r.mu);
  auto it = std::find_if(r.live.begin(), r.live.end(), [c](const auto& e) { return e.first == c; });
  if (it == r.live.end()) return;
  try {
    Metrics& closed = r.closed[it->second];
    closed.tenant = it->second;
    c->add_to(closed);
  } catch (...) {  // out of memory: this Store's counts are lost from the totals, the close goes on
  }
  r.live.erase(it);
}

}  // namespace detail

std::vector<Metrics> process_metrics() {
  detail::Registry& r = detail::registry();
  std::map<std::string, Metrics> by_tenant;
  detail::LockGuard<detail::Mutex> lock(r.mu);
  for (const auto& e : r.closed) by_tenant[e.first] = e.second;
  for (const auto& e : r.live) {
    Metrics& m = by_tenant[e.second];
    m.tenant = e.second;
    e.first->add_to(m);
  }
  std::vector<Metrics> out;
  for (auto& e : by_tenant) out.push_back(std::move(e.second));
  return out;
}

}  // namespace colikv
