// Eviction of KV data under a byte budget: Store::gc, the budget enforced
// after each append (Options::max_store_bytes), loading an evicted
// conversation (kEvicted with its token ids). Store::vacuum is in vacuum.cpp.
//
// An evicted chunk keeps its row and token ids; only chunks.payload becomes
// NULL (and chunk_meta.payload_bytes 0). A conversation is evicted when one of
// its chunks is: that state is derived from the chunks, never stored apart,
// so it cannot disagree with them. A chunk's payload is freed only when every
// conversation that uses it is being evicted.
#include "store/upkeep/eviction.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>

#include "catalog/backend_error.h"
#include "store/store_call.h"
#include "store/store_impl.h"

namespace colikv {


namespace detail {

void throw_if_evicted(Store::Impl& s, const ScanStart& st, int32_t* tokens) {
  if (st.n <= 0) return;
  const std::string here = s.where(st.conv.name);
  const std::optional<int64_t> gone =
      s.catalog().prefix_index().first_evicted_pos(st.conv.id, st.n);
  if (!gone) return;
  const int64_t first_gone = *gone;
  int64_t filled = 0;
  if (tokens) {
    std::vector<int32_t> t;
    s.catalog().for_each_token_list(st.conv.id, 0, st.n, [&](int64_t, int64_t n_tokens, std::string_view json) {
      if (filled >= st.n) return;
      if (!parse_tokens_json(json.data(), json.size(), t) || static_cast<int64_t>(t.size()) != n_tokens)
        throw Error(ErrorCode::kCorrupt, here + ": a chunk's token list is not a JSON array of its token ids");
      const int64_t take = std::min<int64_t>(static_cast<int64_t>(t.size()), st.n - filled);
      std::copy(t.begin(), t.begin() + take, tokens + filled);
      filled += take;
    });
    if (filled != st.n)
      throw Error(ErrorCode::kCorrupt, here + ": its chunks hold " + std::to_string(filled) + " of the " +
                                           std::to_string(st.n) + " token ids its count says");
  }
  throw Error(ErrorCode::kEvicted,
              here + ": its KV data from position " + std::to_string(first_gone) +
                  " on was evicted to keep the store within its byte budget; " +
                  (tokens ? "its " + std::to_string(st.n) + " token ids were returned: " : "") +
                  "load the first " + std::to_string(first_gone) +
                  " positions, recompute the rest and append to re-save it",
              first_gone);
}

EvictionReport evict_to_fit(Store::Impl& s, int64_t max_bytes, int64_t protect_id, Catalog::Scope scope,
                            const ProgressFn* progress) {
  EvictionReport r;
  const std::string here = s.where();
  Catalog& catalog = s.catalog();
  r.stored_bytes_before = catalog.stored_payload_bytes(scope);
  int64_t total = r.stored_bytes_before;
  if (total > max_bytes) {
    // Least recently used first.
    struct Victim {
      int64_t id;
      std::string name;
      std::vector<int64_t> chunks;  // its chunks that still had a payload
    };
    std::vector<Victim> victims;
    std::unordered_map<int64_t, int64_t> holders;  // chunk -> conversations not yet evicted that use it
    std::set<int64_t> freed;
    // Stepped lazily: a budget just exceeded costs a few rows, not a list
    // of every conversation.
    catalog.visit_least_recent(scope, [&](int64_t conv_id, const std::string& name) {
      if (conv_id == protect_id) return false;
      Victim v{conv_id, name, {}};
      // Claimed before their users are counted: one another writer is
      // linking has no count, and is kept (catalog_maintenance.h). A chunk
      // weighed for an earlier victim keeps the count it has come down to.
      std::vector<PayloadChunk> chunks = catalog.claim_chunks(conv_id);
      chunks.erase(std::remove_if(chunks.begin(), chunks.end(), [](const PayloadChunk& c) { return c.bytes <= 0; }),
                   chunks.end());  // evicted already, or weighed by no chunk_meta row: not in the total
      for (const PayloadChunk& c : chunks) holders.emplace(c.chunk_id, c.users ? *c.users : INT64_MAX);
      for (const PayloadChunk& c : chunks) {
        v.chunks.push_back(c.chunk_id);
        auto h = holders.find(c.chunk_id);
        if (--h->second > 0) continue;  // a conversation that is kept still uses it
        catalog.evict_payload(c.chunk_id);
        freed.insert(c.chunk_id);
        total -= c.bytes;
        ++r.chunks;
      }
      victims.push_back(std::move(v));
      if (progress && *progress) {
        const int64_t over = r.stored_bytes_before - max_bytes;  // the last victim may free more than that
        (*progress)(std::min(r.stored_bytes_before - total, over), over);
      }
      return total <= max_bytes;
    });
    // A conversation that lost KV data is evicted. Its generation stays:
    // an eviction changes no token id and no value a writer relies on, so
    // it is no conflict for one that prepared its write before it. A chunk
    // an append meant to name again is encoded once found evicted
    // (put_chunk); a truncate or fork keeps the values it decoded; chunks
    // kept as they are stay evicted, as the gc left them.
    for (auto& v : victims) {
      bool lost = std::any_of(v.chunks.begin(), v.chunks.end(), [&](int64_t c) { return freed.count(c) > 0; });
      if (lost) r.conversations.push_back(v.name);
    }
  }
  r.stored_bytes_after = total;
  r.freed_bytes = r.stored_bytes_before - total;
  s.pending().evictions += r.conversations.size();  // committed with the call (StoreCall)
  s.pending().evicted_bytes += static_cast<uint64_t>(r.freed_bytes);
  r.fits = total <= max_bytes;
  return r;
}

ExpiryReport expire_idle(Store::Impl& s, int64_t used_before_ms, int64_t protect_id, const ProgressFn* progress) {
  ExpiryReport r;
  Catalog& catalog = s.catalog();
  const std::vector<IdleConversation> idle = catalog.idle_conversations(used_before_ms);
  for (const IdleConversation& c : idle) {
    if (c.id == protect_id) continue;
    // Claimed and counted before the delete: a chunk that only this
    // conversation's entries name goes with it; one another conversation (a
    // fork, a shared prefix) links, or another writer holds, is kept. The
    // delete is a removal edit, as remove()'s, at the generation read when
    // the conversation was chosen (and locked: no other writer changes it).
    const std::vector<PayloadChunk> chunks = catalog.claim_chunks(c.id);
    s.delete_idle(c, chunks);
    for (const PayloadChunk& p : chunks) {
      if (!p.users || *p.users > p.own_entries) continue;  // kept
      ++r.chunks;
      r.freed_bytes += p.bytes;
    }
    r.conversations.push_back(c.name);
    if (progress && *progress)
      (*progress)(static_cast<int64_t>(r.conversations.size()), static_cast<int64_t>(idle.size()));
  }
  s.pending().expirations += r.conversations.size();  // committed with the call (StoreCall)
  return r;
}

TenantLimits checked_limits(const TenantLimits& stored, const std::string& here) {
  if (stored.max_bytes && *stored.max_bytes < 0)
    throw Error(ErrorCode::kCorrupt, here + ": the tenant's stored max_bytes " + std::to_string(*stored.max_bytes) +
                                         " is negative");
  if (stored.max_idle_ms && *stored.max_idle_ms < 0)
    throw Error(ErrorCode::kCorrupt, here + ": the tenant's stored max_idle_ms " +
                                         std::to_string(*stored.max_idle_ms) + " is negative");
  return stored;
}

TenantLimits stored_limits(Store::Impl& s, const std::string& here) {
  return checked_limits(s.catalog().tenant_limits(), here);
}

bool apply_limits(Store::Impl& s, int64_t written) {
  const TenantLimits limits = stored_limits(s, s.where());
  bool deleted = false;
  // Retention first: what it deletes need not be evicted for the quota.
  if (limits.max_idle_ms)
    deleted = !expire_idle(s, now_ms() - *limits.max_idle_ms, written)
                   .conversations.empty();
  if (limits.max_bytes) evict_to_fit(s, *limits.max_bytes, written, Catalog::Scope::kTenant);
  if (s.options().max_store_bytes > 0) evict_to_fit(s, s.options().max_store_bytes, written, Catalog::Scope::kStore);
  return deleted;
}

EvictionReport run_gc(Store::Impl& s, int64_t max_bytes, const ProgressFn& progress) {
  s.require_writable("gc");
  if (max_bytes < 0)
    throw Error(ErrorCode::kInvalidArgument, s.where() + ": gc: negative byte budget " + std::to_string(max_bytes));
  EvictionReport r;
  s.catalog().free_queued_chunks();  // what writers left for later, so that the budget counts without it
  {
    const auto txn = s.catalog().begin(detail::Catalog::Access::kWrite, s.where() + ": gc");
    // Only this tenant's conversations: another tenant's are no call of this one's.
    r = detail::evict_to_fit(s, max_bytes, -1, detail::Catalog::Scope::kTenant, &progress);
    txn->commit();
  }
  // The freed pages back to the filesystem, a chunk's worth per transaction:
  // writers go in between, and the file follows the budget down.
  // A server gives its pages back itself.
  if (detail::LocalFiles* files = s.catalog().local_files())
    files->release_free_pages(s.where() + ": gc", s.options().chunk_target_bytes, progress);
  // The evicted values, out of the store's files too. Not after the budget's
  // eviction in an append: that would checkpoint on every append at the budget.
  if (r.chunks > 0) s.catalog().erase_deleted(s.where() + ": gc");
  return r;
}

ExpiryReport run_expire(Store::Impl& s, int64_t max_idle_ms, const ProgressFn& progress) {
  const std::string here = s.where() + ": expire";
  s.require_writable("expire");
  if (max_idle_ms < 0)
    throw Error(ErrorCode::kInvalidArgument, here + ": negative idle time " + std::to_string(max_idle_ms) + " ms");
  ExpiryReport r;
  {
    const auto txn = s.catalog().begin(detail::Catalog::Access::kWrite, here);
    r = detail::expire_idle(s, detail::now_ms() - max_idle_ms, -1, &progress);
    txn->commit();
  }
  // What it deleted, out of the store's files as remove() erases.
  if (!r.conversations.empty()) s.catalog().erase_deleted(here);
  return r;
}

GcPlan plan_gc(Store::Impl& s, const std::optional<int64_t>& max_bytes, const std::optional<int64_t>& max_idle_ms) {
  const std::string here = s.where() + ": gc --dry-run";
  // A write transaction, as gc's: the plan sees what gc would, and no writer
  // changes it meanwhile. It is rolled back, never committed.
  s.require_writable("gc --dry-run");
  if ((max_bytes && *max_bytes < 0) || (max_idle_ms && *max_idle_ms < 0))
    throw Error(ErrorCode::kInvalidArgument, here + ": a negative byte budget or idle time");
  GcPlan plan;
  const auto txn = s.catalog().begin(detail::Catalog::Access::kWrite, here);
  // In gc's order: expiry first, so the budget counts without what it deletes.
  if (max_idle_ms)
    plan.expiry = detail::expire_idle(s, detail::now_ms() - *max_idle_ms, -1);
  if (max_bytes) plan.eviction = detail::evict_to_fit(s, *max_bytes, -1, detail::Catalog::Scope::kTenant);
  return plan;  // txn goes out of scope uncommitted: rolled back
}

}  // namespace detail

EvictionReport Store::gc(int64_t max_bytes) {
  return detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    return detail::run_gc(s, max_bytes, ProgressFn());
  });
}

ExpiryReport Store::expire(int64_t max_idle_ms) {
  return detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    return detail::run_expire(s, max_idle_ms, ProgressFn());
  });
}

EvictionReport gc(Store& store, int64_t max_bytes, const ProgressFn& progress) {
  return detail::StoreCall::run(detail::StoreAccess::impl(store), [&](Store::Impl& s) REQUIRES(s.mu) {
    return detail::run_gc(s, max_bytes, progress);
  });
}

ExpiryReport expire(Store& store, int64_t max_idle_ms, const ProgressFn& progress) {
  return detail::StoreCall::run(detail::StoreAccess::impl(store), [&](Store::Impl& s) REQUIRES(s.mu) {
    return detail::run_expire(s, max_idle_ms, progress);
  });
}

GcPlan plan_gc(Store& store, const std::optional<int64_t>& max_bytes, const std::optional<int64_t>& max_idle_ms) {
  return detail::StoreCall::run(detail::StoreAccess::impl(store), [&](Store::Impl& s) REQUIRES(s.mu) {
    return detail::plan_gc(s, max_bytes, max_idle_ms);
  });
}

}  // namespace colikv
