// The rows the catalog (catalog.h) reads and writes, as plain structs free of
// any database's types: what a conversation, a model and a chunk are to the
// store, and what its scans (verify, stats, eviction) return.
#ifndef COLIKV_SRC_CATALOG_ROWS_H
#define COLIKV_SRC_CATALOG_ROWS_H

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/chunk_codec.h"
#include "colikv/model.h"
#include "colikv/options.h"

namespace colikv {
namespace detail {

struct ModelRow {
  int64_t id = 0;
  ModelSignature sig;
  std::string text;  // sig.to_string()
  int64_t chunk_tokens = 0;
};

// A model as stored, before the store checks it (Store::Impl::model_by_id).
struct StoredModel {
  ModelSignature sig;
  int64_t chunk_tokens = 0;
  std::string signature;  // the stored signature text
};

struct ConversationRow {
  int64_t id = 0;
  std::string name;
  int64_t model_id = 0;
  int64_t count = 0;
  int64_t generation = 0;
  std::string precision;
  // conversations_to_verify only: why a stored field could not be read as
  // what it is ("" when it could); verify reports it instead of throwing.
  std::string malformed;
};

// One entry of a conversation's chunk list, without its tokens or payload.
struct ChunkSummary {
  int64_t chunk_id;
  ChunkHash key;                    // the key it is stored under
  ChunkHash chain;                  // its chain hash
  std::optional<ChunkHash> digest;  // its content digest (none: written before schema 5)
  int64_t n_tokens;
  bool evicted;  // its payload was evicted (only token ids are kept)
  int64_t seq;
  int64_t first_pos;
};

// A chunk stored under a key.
struct KeyedChunk {
  int64_t chunk_id = 0;
  bool evicted = false;
};

// A chunk to store: its place, its tokens and its encoded values.
struct ChunkRecord {
  int64_t model_id = 0;
  ChunkHash key{};      // chunk_key(chain, digest)
  int64_t first_pos = 0;
  std::string precision;
  std::string tokens_json;
  ChunkHash prev{};     // the chain hash before it (ignored at position 0)
  ChunkHash chain{};    // its own chain hash
  ChunkHash digest{};   // its content digest (kNoValuesDigest for a token-only chunk)
  int64_t n_tokens = 0;
  const EncodedChunk* encoded = nullptr;  // payload empty: a token-only chunk, stored evicted
  // What chunk_meta indexes it by (docs/format.md, "Chunk lists"): the region
  // from the chunk boundary at or before it to its end. A full chunk's region
  // is itself; a tail piece's starts at the tail, after the last full chunk.
  int64_t index_first = 0;         // where the region starts (0: it follows nothing)
  ChunkHash index_prev{};          // the chain hash there, the anchor (ignored at position 0)
  std::string index_tokens_json;   // the region's token ids
  // Objects first (hold_chunk): the chunk_meta row is written by its link
  // (index_chunk), so that a chunk no chunk list names yet is in no index.
  bool defer_index = false;
};

// One entry of a conversation's chunk list with its chunk's stored fields, as
// a load reads them: unchecked (the core checks them).
struct ChunkListRow {
  int64_t seq = 0;
  int64_t chunk_id = 0;
  int64_t first_pos = 0;
  int64_t n_tokens = 0;
  std::string tokens_json;
  std::string compression;
  int64_t raw_size = 0;
  int64_t checksum = 0;
  std::optional<int64_t> payload_bytes;  // none: evicted
  ChunkHash key{};
  std::string precision;
  std::optional<ChunkHash> digest;  // none: written before schema 5
};

// The rows of a chunk list in seq order, and their payloads.
class ChunkCursor {
 public:
  virtual ~ChunkCursor() = default;
  // Fills row with the next entry; false after the last.
  virtual bool next(ChunkListRow& row) = 0;
  // Reads the payload of a chunk, `bytes` long, into out (resized to it);
  // a different size is kCorrupt. Errors name `what`.
  virtual void read_payload(int64_t chunk_id, int64_t bytes, std::vector<uint8_t>& out, const std::string& what) = 0;
};

// A chunk's stored fields and payload, for re-encoding a prefix of it.
struct ChunkContent {
  int64_t n_tokens = 0;
  std::string tokens_json;
  std::string compression;
  int64_t raw_size = 0;
  int64_t checksum = 0;
  std::optional<std::vector<uint8_t>> payload;  // none: evicted
  std::string precision;
};

// A conversation forked from another: it takes the parent's model,
// precision, title and metadata.
struct NewFork {
  std::string name;
  int64_t parent_id = 0;
  int64_t count = 0;  // tokens taken, also the fork point
  int64_t now_ms = 0;
};

struct NewConversation {
  std::string name;
  int64_t model_id = 0;
  std::string precision;
  std::string title;
  std::string metadata;  // valid JSON text
  int64_t now_ms = 0;
};

// A conversation as info() and list() show it; model_id unchecked.
struct ConversationInfoRow {
  std::string name;
  int64_t model_id = 0;
  int64_t count = 0;
  std::string title;
  std::string metadata;
  std::string parent;  // "" when none or deleted
  int64_t forked_at = 0;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t last_used_ms = 0;
  int64_t stored_bytes = 0;  // payload bytes of its chunks
  bool evicted = false;      // one of its chunks has its payload evicted
  std::string precision;
};

// The text columns a caller may set on a conversation.
enum class ConversationText { kName, kTitle, kMetadata };

// "name", "title", "metadata": for messages, and the columns' names in the schemas.
inline const char* text_column_name(ConversationText column) {
  switch (column) {
    case ConversationText::kName: return "name";
    case ConversationText::kTitle: return "title";
    case ConversationText::kMetadata: return "metadata";
  }
  return "title";
}

// A conversation's place in the fork tree, for verify.
struct LineageRow {
  int64_t id = 0;
  std::string name;
  int64_t parent_id = 0;  // 0: none, or the parent was deleted
  int64_t forked_at = 0;
};

// Where a chunk sits: its first position and its size.
struct ChunkPlace {
  int64_t chunk_id = 0;
  int64_t first_pos = 0;
  int64_t n_tokens = 0;
};

// A conversation row whose tenant the store does not hold (verify).
struct StrandedConversation {
  int64_t conversation_id = 0;
  int64_t tenant_id = 0;
};

// What nothing reaches (verify): chunks no chunk list names, by chunk id,
// and conversations of no tenant, by conversation id.
struct Strays {
  std::vector<ChunkPlace> unused_chunks;
  std::vector<StrandedConversation> conversations_of_no_tenant;
};

// A chunk used by a conversation (verify's scan of shared chunks).
struct ChunkUse {
  ChunkPlace chunk;
  int64_t conversation_id = 0;
};

// One entry of a chunk list as verify reads it, unchecked; the views are
// valid during the callback only.
struct VerifyChunkRow {
  int64_t seq = 0;
  std::optional<int64_t> chunk_id;  // none: the list names a chunk that does not exist
  int64_t first_pos = 0;
  int64_t n_tokens = 0;
  int64_t model_id = 0;
  std::string_view tokens_json;
  std::string compression;
  int64_t raw_size = 0;
  int64_t checksum = 0;
  const uint8_t* payload = nullptr;  // with payload_bytes; null with has_payload false: evicted
  size_t payload_bytes = 0;
  bool has_payload = false;
  ChunkHash key{};
  std::string precision;
  std::optional<ChunkHash> digest;  // none: written before schema 5
  // Its chunk_meta row's region (ChunkRecord::index_*), when it has a row.
  bool has_index = false;
  std::optional<std::string> index_prev;  // prev_hash's bytes; none: NULL (unknown)
  std::string index_tokens_json;
  std::optional<ChunkHash> index_chain;  // chain_hash; none: NULL
};

// A database's own consistency check.
struct IntegrityReport {
  std::string check;  // its name, for messages
  std::string text;   // "ok" when sound
};

// What one model's conversations and chunks hold (stats).
struct ModelUsageRow {
  int64_t model_id = 0;
  int64_t chunk_tokens = 0;
  int64_t record_bytes = 0;
  int64_t conversations = 0;
  int64_t tokens = 0;         // of its conversations
  int64_t chunks = 0;
  int64_t chunk_tokens_sum = 0;  // tokens of its chunks, each counted once
  int64_t stored_bytes = 0;   // payload bytes of its chunks
};

// What this catalog's tenant holds (stats), read in one snapshot.
struct TenantUsage {
  std::vector<ModelUsageRow> models;  // by model id
  int64_t evicted_chunks = 0;         // its chunks whose payload was evicted
  int64_t evicted_conversations = 0;  // its conversations that use one of those
};

// A tenant and what its conversations hold (Store::tenants).
struct TenantRow {
  std::string name;
  int64_t conversations = 0;
  int64_t stored_bytes = 0;  // payload bytes of the chunks its conversations use
  TenantLimits limits;       // as stored, unchecked (detail::checked_limits)
};

// One tenant and model's share of the store (Store::gauges).
struct GaugeUsageRow {
  std::string tenant;
  int64_t model_id = 0;
  int64_t conversations = 0;
  int64_t tokens = 0;
  int64_t stored_bytes = 0;   // payload bytes of the distinct chunks its conversations use
  int64_t evicted_bytes = 0;  // record bytes of those chunks whose payload was evicted
};

// What the whole store holds (Store::gauges), read in one snapshot.
struct GaugeUsage {
  std::vector<GaugeUsageRow> rows;  // by tenant name, then model id
  int64_t file_bytes = 0;           // as CatalogScans::file_bytes measures them, its WAL included
  int64_t wal_bytes = 0;            // of those, the write-ahead log beside the store (0 where none)
  int64_t held_chunks = 0;          // chunks writers hold mid-turn (SQLite's objects first; 0 where none)
};

// A conversation that expired (tenant retention).
struct IdleConversation {
  int64_t id = 0;
  std::string name;
  int64_t generation = 0;  // as read when it was chosen (and, by a writer, locked)
};

// A conversation's chunk, its payload's stored size and its users (eviction, expiry).
struct PayloadChunk {
  int64_t chunk_id = 0;
  int64_t bytes = 0;             // 0: evicted, or no chunk_meta row (claim_chunks)
  std::optional<int64_t> users;  // chunk-list entries naming it; none: another writer holds it
  int64_t own_entries = 0;       // of those, the entries of the conversation asked about
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CATALOG_ROWS_H
