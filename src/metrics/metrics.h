// A Store's counters (colikv/metrics.h), kept as relaxed atomics so that
// counting costs a call a few uncontended additions, and the process's
// registry of them. Not installed.
//
// Nothing here has a static with a non-trivial destructor: a Store may be
// closed (and its counts folded into the process's) from an atexit handler
// or a static's destructor, after the library's own statics would be gone.
#ifndef COLIKV_SRC_METRICS_H
#define COLIKV_SRC_METRICS_H

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "colikv/error.h"
#include "colikv/metrics.h"

namespace colikv {
namespace detail {

// Upper bounds of a histogram's buckets, in its unit (nanoseconds, turns):
// constant arrays, never destroyed.
struct HistogramBounds {
  const int64_t* bounds;
  int n;
  double unit;  // what one of the unit is in the exposed base unit (1e-9 for nanoseconds)
};
extern const HistogramBounds kLatencyBounds;
extern const HistogramBounds kDepthBounds;
constexpr int kMaxBuckets = 24;

class AtomicHistogram {
 public:
  explicit AtomicHistogram(const HistogramBounds& b) : b_(b) {}
  void observe(int64_t v) noexcept {
    int i = 0;
    while (i < b_.n && v > b_.bounds[i]) ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(static_cast<uint64_t>(v < 0 ? 0 : v), std::memory_order_relaxed);
  }
  void observe_since(std::chrono::steady_clock::time_point start) noexcept {
    observe(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  }
  // Adds this histogram's counts to h (its bounds set when empty).
  void add_to(Histogram& h) const;

 private:
  const HistogramBounds& b_;
  std::atomic<uint64_t> counts_[kMaxBuckets + 1] = {};
  std::atomic<uint64_t> sum_{0};
};

// What a call counts until it returns: committed to the counters when the
// outermost call of the Store on this thread returns, dropped when it throws
// (its transactions rolled back). Guarded by the Store's lock.
struct PendingCounts {
  uint64_t append_turns = 0, append_tokens = 0, append_raw_bytes = 0, append_stored_bytes = 0,
           append_shared_bytes = 0, evictions = 0, evicted_bytes = 0, expirations = 0, erases = 0;
  void add_turn(int64_t tokens, int64_t record_bytes) {
    ++append_turns;
    append_tokens += static_cast<uint64_t>(tokens);
    append_raw_bytes += static_cast<uint64_t>(tokens * record_bytes);
  }
};

struct StoreCounters {
  using Counter = std::atomic<uint64_t>;
  Counter appends{0}, append_turns{0}, append_tokens{0}, append_raw_bytes{0}, append_stored_bytes{0},
      append_shared_bytes{0};
  Counter loads{0}, load_tokens{0}, load_bytes{0};
  Counter match_queries{0}, match_answers{0}, match_tokens{0}, adoptions{0};
  Counter evictions{0}, evicted_bytes{0}, expirations{0}, erases{0};
  Counter conflicts{0}, busy_waits{0}, lock_wait_ns{0}, reclaimed_held_chunks{0};
  Counter errors[kErrorCodeSlots] = {};
  AtomicHistogram append_seconds{kLatencyBounds}, load_seconds{kLatencyBounds}, match_seconds{kLatencyBounds},
      async_stall_seconds{kLatencyBounds}, async_queue_depth{kDepthBounds}, async_durable_seconds{kLatencyBounds};

  static void add(Counter& c, uint64_t n) noexcept { c.fetch_add(n, std::memory_order_relaxed); }
  void count_error(ErrorCode code) noexcept;
  void commit(PendingCounts& p) noexcept;
  // Adds these counts to m.
  void add_to(Metrics& m) const;
};

// Observes the time from its construction to its destruction. Declare it
// after the call's StoreCall: it is then destroyed first, inside the call.
class LatencyTimer {
 public:
  explicit LatencyTimer(AtomicHistogram& h) : h_(h), start_(std::chrono::steady_clock::now()) {}
  ~LatencyTimer() { h_.observe_since(start_); }
  LatencyTimer(const LatencyTimer&) = delete;
  LatencyTimer& operator=(const LatencyTimer&) = delete;

 private:
  AtomicHistogram& h_;
  std::chrono::steady_clock::time_point start_;
};

// The process's registry: a Store's counters from its open until its close,
// then folded into its tenant's totals of closed Stores.
void register_counters(const StoreCounters* c, const std::string& tenant);
void retire_counters(const StoreCounters* c) noexcept;

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_METRICS_H
