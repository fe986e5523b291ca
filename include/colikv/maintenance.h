// colikv/maintenance.h: a store's maintenance with its progress reported, and
// gc's plan without changing anything: what `colikv gc` and `colikv vacuum`
// use. Store::gc, Store::expire and Store::vacuum are these without progress.
#ifndef COLIKV_MAINTENANCE_H
#define COLIKV_MAINTENANCE_H

#include <cstdint>
#include <optional>

#include "colikv/export.h"
#include "colikv/store.h"

namespace colikv {

// Store::gc, calling progress(done, total) as it goes (empty: never): bytes
// evicted of the bytes over the budget, then bytes of free pages given back
// to the filesystem of those free after the eviction (SQLite).
COLIKV_API EvictionReport gc(Store& store, int64_t max_bytes, const ProgressFn& progress);

// Store::expire, calling progress(done, total): conversations deleted of
// those found idle.
COLIKV_API ExpiryReport expire(Store& store, int64_t max_idle_ms, const ProgressFn& progress);

// Store::vacuum, calling progress(done, total): bytes given back of the free
// bytes at the start (SQLite, in steps); a whole rewrite (an older SQLite
// store, PostgreSQL's VACUUM FULL) reports once, at its end.
COLIKV_API VacuumReport vacuum(Store& store, const ProgressFn& progress);

// What expire(max_idle_ms) and then gc(max_bytes) would do now (either may be
// left out), for this Store's tenant: decided by the same code as they run,
// inside a write transaction that is rolled back, so that nothing changes.
// It takes the write lock as gc does (a writable Store; other writers wait
// for it), and like gc sees the chunks dead writers left held as they are
// (gc first reclaims them, so it may evict a little less). What it reports
// is what a gc starting now would do; another writer's append afterwards
// may change that. Throws kInvalidArgument (a negative value), kReadOnly, kBusy.
struct GcPlan {
  ExpiryReport expiry;      // empty when max_idle_ms was left out
  EvictionReport eviction;  // all zero when max_bytes was left out
};
COLIKV_API GcPlan plan_gc(Store& store, const std::optional<int64_t>& max_bytes,
                          const std::optional<int64_t>& max_idle_ms);

}  // namespace colikv

#endif  // COLIKV_MAINTENANCE_H
