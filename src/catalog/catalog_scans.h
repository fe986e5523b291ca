// The catalog's scans (catalog.h): what verify and stats read of a whole
// store, as reads in the caller's snapshot (begin(kRead)). A caller that only
// scans needs only this interface; catalog.h's rules (errors, transactions,
// threads) hold for it.
#ifndef COLIKV_SRC_CATALOG_SCANS_H
#define COLIKV_SRC_CATALOG_SCANS_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "catalog/catalog_rows.h"

namespace colikv {
namespace detail {

class CatalogScans {
 public:
  virtual ~CatalogScans() = default;

  // The database's own consistency check (SQLite: PRAGMA integrity_check).
  virtual IntegrityReport check_integrity() = 0;
  // All conversations by name, or the one named `only`.
  virtual std::vector<ConversationRow> conversations_to_verify(const std::string& only) = 0;
  // Each entry of a conversation's chunk list with its chunk's fields, in seq
  // order; entries naming a missing chunk too (chunk_id none).
  virtual void for_each_verify_row(int64_t conversation_id, const std::function<void(const VerifyChunkRow&)>& f) = 0;
  // Every conversation's place in the fork tree.
  virtual std::vector<LineageRow> lineage() = 0;
  // The uses of chunks that still hold values, have no content digest, and
  // are used more than once, by chunk id.
  virtual void for_each_undigested_share(const std::function<void(const ChunkUse&)>& f) = 0;
  // What nothing reaches, for a verify of the whole store: the chunks no
  // chunk list names, and the conversations whose tenant_id names no tenant
  // row, whichever tenant this catalog's is (no Store can open, read or
  // delete them).
  virtual Strays strays() = 0;
  // What this catalog's tenant (Options::tenant) holds: by model id, its
  // conversations and the chunks they use (every model of the store where
  // models are shared, SQLite; a model of none of them has zero counts); and
  // its evicted chunks, and its conversations that use one.
  virtual TenantUsage usage() = 0;
  // Every tenant of the store, whichever this catalog's is, by name.
  virtual std::vector<TenantRow> tenant_usage() = 0;
  // Every tenant's usage by model, whichever this catalog's is (as far as
  // the server lets this role see), with the store's files and the chunks
  // writers hold mid-turn (objects first: docs/design.md).
  virtual GaugeUsage gauge_usage() = 0;
  // Bytes the store takes on disk (SQLite: the file and its WAL; PostgreSQL:
  // its tables and indexes).
  virtual int64_t file_bytes() = 0;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CATALOG_SCANS_H
