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

// Chunks that writers hold mid-turn (objects first, docs/design.md): a
// capability of a backend whose writers hold chunks before they link them
// (SQLite); CatalogScans::held_chunks() is null where none does.
class HeldChunks {
 public:
  virtual ~HeldChunks() = default;
  // How many chunks writers hold now.
  virtual int64_t held_chunk_count() = 0;
};

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
  // Chunks no chunk list names.
  virtual std::vector<ChunkPlace> unused_chunks() = 0;
  // Conversations whose tenant_id names no tenant row, whichever tenant this
  // catalog's is: no Store can open them, read them or delete them.
  virtual std::vector<StrandedConversation> conversations_of_no_tenant() = 0;
  // By model id, of this catalog's tenant (Options::tenant): its
  // conversations, and the chunks they use.
  virtual std::vector<ModelUsageRow> model_usage() = 0;
  // Every tenant of the store, whichever this catalog's is, by name.
  virtual std::vector<TenantRow> tenant_usage() = 0;
  // Every tenant's usage by model, whichever this catalog's is (as far as
  // the server lets this role see), by tenant name then model id.
  virtual std::vector<GaugeUsageRow> gauge_usage() = 0;
  // Chunks of this catalog's tenant whose payload was evicted.
  virtual int64_t evicted_chunk_count() = 0;
  // Conversations of this catalog's tenant with at least one evicted chunk.
  virtual int64_t evicted_conversation_count() = 0;
  // Bytes the store takes on disk (SQLite: the file and its WAL; PostgreSQL:
  // its tables and indexes).
  virtual int64_t file_bytes() = 0;
  // The chunks writers hold mid-turn; null where writers hold none.
  virtual HeldChunks* held_chunks() = 0;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CATALOG_SCANS_H
