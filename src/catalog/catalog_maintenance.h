// The catalog's maintenance (catalog.h): a tenant's limits and expiry,
// eviction, compaction and erasure, and the capabilities only some backends
// have, each an accessor that is null where the backend lacks it (as
// RocksDB's FileSystem::SupportedOps advertises what a file system can do)
// instead of a call that does nothing there. catalog.h's rules (errors,
// transactions, writers, threads) hold for it.
#ifndef COLIKV_SRC_CATALOG_MAINTENANCE_H
#define COLIKV_SRC_CATALOG_MAINTENANCE_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "catalog/catalog_rows.h"
#include "catalog/prefix_index.h"

namespace colikv {
namespace detail {

// The files of a store kept beside its location (SQLite's file, WAL, ...);
// a store on a server has none of its own.
class LocalFiles {
 public:
  virtual ~LocalFiles() = default;
  // The local files the store keeps, as suffixes of its location ("" for the
  // location itself).
  virtual std::vector<std::string> file_suffixes() const = 0;
  // Outside any transaction, after a gc's transaction: gives free pages back in
  // steps as compact does, without its full rewrite.
  virtual void release_free_pages(const std::string& what, int64_t step_bytes,
                                  const std::function<void(int64_t, int64_t)>& progress) = 0;
  // Outside any transaction, before a write of about raw_bytes
  // (uncompressed): waits for the background work on the files that would
  // slow it (SQLite: a large write waits for a running WAL checkpoint, a
  // small one at most a few ms).
  virtual void wait_before_write(int64_t raw_bytes) = 0;
};

// Server roles that row-level security lets use a tenant (see
// Store::grant_tenant); a store in a file has none (SQLite: its file mode,
// Options::file_mode, decides who reads every tenant).
class TenantRoles {
 public:
  virtual ~TenantRoles() = default;
  // Write transaction. Lets the server role `role` use this catalog's tenant
  // (granted), or no longer (not granted).
  virtual void set_tenant_role(const std::string& role, bool granted, int64_t now_ms) = 0;
};

class CatalogMaintenance {
 public:
  virtual ~CatalogMaintenance() = default;

  // Tenant limits (TenantLimits), of this catalog's tenant
  // The limits as stored, unchecked; a stored value that is not an integer
  // is kCorrupt.
  virtual TenantLimits tenant_limits() = 0;
  // Write transaction. Sets the limits `fields` names (kTenantMaxBytes,
  // kTenantMaxIdle) to those of `limits` (none: NULL), and keeps the other
  // as stored: read under the tenant row's lock where writers run side by
  // side, so that another writer's change to it is kept, not overwritten
  // (appends, which only read the limits, are not held up). Returns the
  // limits as they now stand, unchecked: the kept one as read (one that is
  // not an integer is kCorrupt; none is read when both are set). Refused: a
  // negative limit (the schema's CHECK, kConflict); a tenant deleted
  // meanwhile (kNotFound).
  virtual TenantLimits set_tenant_limits(const TenantLimits& limits, unsigned fields) = 0;
  // The tenant's conversations last used before used_before_ms (strictly),
  // least recently used first, each with its generation. In a write
  // transaction, those another writer is using are left out, and the rest
  // locked for deleting.
  virtual std::vector<IdleConversation> idle_conversations(int64_t used_before_ms) = 0;

  // Eviction
  // Which conversations an eviction weighs and evicts: all of the store's
  // (the byte budget of Options::max_store_bytes), or this catalog's tenant's
  // (Store::gc; tenants share no chunk, so its bytes are its own).
  enum class Scope { kStore, kTenant };
  // The payload bytes of the chunks in scope: all chunks, or those the
  // tenant's conversations use.
  virtual int64_t stored_payload_bytes(Scope scope) = 0;
  // Conversations in scope, least recently used first, stepped lazily;
  // chunks (not conversations) may change while it runs.
  virtual void visit_least_recent(Scope scope, const PrefixIndex::ConversationVisitor& f) = 0;
  // A conversation's chunks, once each: every chunk its chunk list names,
  // so that an expiry frees them all. Each with its payload size as its
  // chunk_meta row weighs it (0: evicted; 0 too for a chunk without that row,
  // which a hand edit deleted: stored_payload_bytes does not count it, so an
  // eviction, which weighs by that count, leaves it) and its users (how many
  // chunk-list entries name it, and how many of them are this
  // conversation's own); none for no such conversation. In a write
  // transaction each is claimed first, locked where writers run side by
  // side: until the transaction ends none is linked anew, so its users stay
  // true. One another writer holds (linking, freeing or evicting it) is
  // not claimed and has no users count: an eviction or an expiry keeps it.
  virtual std::vector<PayloadChunk> claim_chunks(int64_t conversation_id) = 0;
  // Write transaction. Drops a chunk's payload; its row and token ids stay.
  virtual void evict_payload(int64_t chunk_id) = 0;
  // Outside any transaction: frees what free_unused_chunks left for later
  // and no chunk list names by now, waiting for the writers that hold it;
  // best effort (what it cannot free stays for the next call). gc and vacuum
  // call it. SQLite has no queue: there it reclaims the held chunks of
  // writers certainly dead (reclaim_dead_writers), as its writable open does.
  virtual void free_queued_chunks() = 0;

  // What compact did beyond the file sizes the store measures itself.
  struct CompactOutcome {
    int64_t reclaimable_bytes = -1;  // free space inside the store before it; -1: not known
    std::string held_back;           // empty, or why space it freed stays in the files for now
  };
  // Outside any transaction. Gives the store's free space back to the file
  // system. Never waits for a reader while it holds the write lock, and lets
  // writers in between steps of about step_bytes each where the backend can
  // (SQLite: incremental vacuum; a store made before it converts with one full
  // VACUUM, which writers wait for). Needs free disk space about the store's
  // size for that full VACUUM (kDiskFull).
  // progress(done, total) as it goes, in bytes given back (a server's
  // rewrite: once, at its end); may be empty.
  virtual CompactOutcome compact(const std::string& what, int64_t step_bytes,
                                 const std::function<void(int64_t, int64_t)>& progress) = 0;
  // After a commit that deleted rows (delete, gc): makes their bytes
  // unreadable in the store's files, as far as the backend allows (SQLite:
  // sqlite/sqlite_erase.h; PostgreSQL: VACUUM of the tables, pg_catalog.cpp). Returns
  // false when a reader holding an older snapshot kept it from finishing
  // within the busy timeout: then it is tried again by the next call and when
  // the store closes. Never throws: the delete itself has committed.
  virtual bool erase_deleted(const std::string& what) = 0;

  // Capabilities: null where the backend lacks them.
  virtual LocalFiles* local_files() = 0;
  virtual TenantRoles* tenant_roles() = 0;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CATALOG_MAINTENANCE_H
