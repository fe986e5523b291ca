// How a SQLite store gives space back: an evicted payload's pages freed, the
// free pages returned to the filesystem in short steps, the WAL reset
// without waiting for readers. Used by SqliteCatalog (eviction, vacuum).
#ifndef COLIKV_SRC_SQLITE_SQLITE_SPACE_H
#define COLIKV_SRC_SQLITE_SQLITE_SPACE_H

#include <SQLiteCpp/Database.h>

#include <cstdint>
#include <functional>
#include <string>

#include "catalog/catalog.h"
#include "sqlite/sqlite_statement_cache.h"

namespace colikv {
namespace detail {

struct BusyWait;  // sqlite_util.h

// Inside an open write transaction: drops chunk_id's payload (chunks.payload
// NULL, chunk_meta.payload_bytes 0), keeping its row, token ids and id.
//
// The row is deleted and inserted again without its payload rather than
// updated: SQLite rebalances a b-tree page that a delete leaves underfull,
// never one an update shrinks, and chunk ids only grow, so new rows never
// refill the pages of evicted ones. Updated in place, every evicted chunk
// kept the leaf space its inline payload part had, and the file grew under a
// steady budget; deleted, those pages are merged and freed for reuse.
void evict_chunk_payload(SQLite::Database& db, StatementCache& statements, int64_t chunk_id);

// A store with incremental auto-vacuum (every store colikv creates): gives
// its free pages back, step_bytes' worth of pages per write transaction so
// that a writer waits for one step at most, until none is left. Nothing for
// a store without it.
// progress (may be empty): bytes given back so far, of the free bytes at the start.
void give_back_free_pages(SQLite::Database& db, int64_t step_bytes, const std::string& what,
                          const std::function<void(int64_t, int64_t)>& progress);

// Store::vacuum on SQLite: give_back_free_pages, or for a store made without
// incremental auto-vacuum one full VACUUM that turns it on (writers wait for
// that rewrite, once); then the WAL reset without waiting for readers
// (truncate_wal_without_waiting). kDiskFull names the free space a rewrite needs.
Catalog::CompactOutcome compact_store(SQLite::Database& db, BusyWait& busy, int64_t step_bytes,
                                      const std::string& what, const std::function<void(int64_t, int64_t)>& progress);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_SPACE_H
