// Internal hooks of the prefix lookup (prefix_match.cpp) and of eviction under
// the byte budget (eviction.cpp), called from store.cpp. Not installed.
#ifndef COLIKV_SRC_EVICTION_H
#define COLIKV_SRC_EVICTION_H

#include <SQLiteCpp/Database.h>

#include <cstdint>
#include <string>

#include "chunk_codec.h"
#include "colikv/store.h"
#include "store_impl.h"

namespace colikv {
namespace detail {

// What chunk_meta records of a chunk.
struct ChunkMeta {
  int64_t model_id = 0;
  std::string precision;
  int64_t first_pos = 0;
  ChunkHash prev{};    // the chain hash before it (ignored when first_pos == 0)
  ChunkHash chain{};   // its own chain hash
  ChunkHash digest{};  // its content digest (kNoValuesDigest for a token-only chunk)
  std::string tokens_json;
  int64_t payload_bytes = 0;  // 0: evicted
};

// Writes the chunk_meta row of a chunk just inserted (replacing any row of a
// reused chunk_id). Inside the write transaction that inserted the chunk.
void record_chunk_meta(SQLite::Database& db, int64_t chunk_id, const ChunkMeta& meta);

// The payload of an existing chunk was (re)written: updates its payload bytes
// (writing its whole chunk_meta row if it has none).
void record_chunk_payload(SQLite::Database& db, int64_t chunk_id, const ChunkMeta& meta);

// In a load's read snapshot, before any KV byte is written: when KV data of
// positions [0, st.n) was evicted, fills tokens[0, st.n) (unless null) and
// throws Error(kEvicted) whose position() is the first position gone.
void throw_if_evicted(Store::Impl& s, const ScanStart& st, int32_t* tokens);

// Inside an open write transaction: evicts least recently used conversations'
// KV data until the chunk payloads take at most max_bytes. The conversation
// `protect_id` (a conversations.conversation_id; -1 for none) is never evicted.
EvictionReport evict_to_fit(Store::Impl& s, int64_t max_bytes, int64_t protect_id);

// Fills StoreStats::evicted_conversations and evicted_chunks (in a snapshot).
void fill_eviction_stats(Store::Impl& s, StoreStats& out);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_EVICTION_H
