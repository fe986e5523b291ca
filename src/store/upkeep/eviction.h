// Internal hooks of eviction under the byte budget (eviction.cpp), called
// from store_append.cpp, store_cut.cpp and store.cpp; retention (TenantLimits::max_idle_ms) too.
// Not installed.
#ifndef COLIKV_SRC_EVICTION_H
#define COLIKV_SRC_EVICTION_H

#include <cstdint>
#include <optional>
#include <string>

#include "core/chunk_codec.h"
#include "colikv/maintenance.h"
#include "colikv/store.h"
#include "store/store_impl.h"

namespace colikv {
namespace detail {

// In a load's read snapshot, before any KV byte is written: when KV data of
// positions [0, st.n) was evicted, fills tokens[0, st.n) (unless null) and
// throws Error(kEvicted) whose position() is the first position gone.
void throw_if_evicted(Store::Impl& s, const ScanStart& st, int32_t* tokens) REQUIRES(s.mu);

// Inside an open write transaction: evicts least recently used conversations'
// KV data until the chunk payloads take at most max_bytes, among the store's
// conversations and chunks (the store-wide budget) or the Store's tenant's
// (gc). The conversation `protect_id` (a conversations.conversation_id; -1
// for none) is never evicted.
// progress (may be null): bytes evicted so far, of the bytes over the budget.
EvictionReport evict_to_fit(Store::Impl& s, int64_t max_bytes, int64_t protect_id, Catalog::Scope scope,
                            const ProgressFn* progress = nullptr) REQUIRES(s.mu);

// Inside an open write transaction: deletes, whole, the Store's tenant's
// conversations last used before used_before_ms (but `protect_id`), their
// chunk lists and the chunks nothing else links. The caller erases their
// bytes (Catalog::erase_deleted) once it has committed.
// progress (may be null): conversations deleted so far, of those found idle.
ExpiryReport expire_idle(Store::Impl& s, int64_t used_before_ms, int64_t protect_id,
                         const ProgressFn* progress = nullptr) REQUIRES(s.mu);

// Store::gc and Store::expire, with progress (colikv/maintenance.h).
EvictionReport run_gc(Store::Impl& s, int64_t max_bytes, const ProgressFn& progress) REQUIRES(s.mu);
ExpiryReport run_expire(Store::Impl& s, int64_t max_idle_ms, const ProgressFn& progress) REQUIRES(s.mu);
// plan_gc (colikv/maintenance.h): run_expire's and run_gc's work, by the same
// functions, in one write transaction rolled back.
GcPlan plan_gc(Store::Impl& s, const std::optional<int64_t>& max_bytes, const std::optional<int64_t>& max_idle_ms) REQUIRES(s.mu);
// Store::vacuum, with progress (vacuum.cpp).
VacuumReport run_vacuum(Store::Impl& s, const ProgressFn& progress) REQUIRES(s.mu);

// Inside the write transaction of every call that stores bytes (an append,
// and with it write, copy and import; a fork's or a truncate's piece), after
// its chunks are linked to the conversation `written`: the tenant's retention (expire_idle), the tenant's
// quota (evict_to_fit within the tenant), then the store-wide budget
// (Options::max_store_bytes, across tenants), each only when set. Returns
// whether it deleted a conversation: the caller then erases after its commit.
bool apply_limits(Store::Impl& s, int64_t written) REQUIRES(s.mu);

// A tenant's stored limits, checked: a negative one is kCorrupt naming `here`.
TenantLimits checked_limits(const TenantLimits& stored, const std::string& here);

// This Store's tenant's limits as read in the caller's transaction (or alone),
// checked as checked_limits does.
TenantLimits stored_limits(Store::Impl& s, const std::string& here) REQUIRES(s.mu);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_EVICTION_H
