// A turn as one edit (after leveldb's WriteBatch and VersionEdit): what an
// append, a truncate, a fork, a write or a removal changes in one conversation, built by
// the store and applied by the catalog in one call (Catalog::apply). How a
// backend applies it is its own: SQLite stores a large turn's chunks first,
// each in a short transaction, and links them in one more (sqlite_turn.cpp,
// docs/design.md "Objects first"); PostgreSQL applies it in one transaction
// and links it in one statement (pg_turn.cpp).
#ifndef COLIKV_SRC_TURN_EDIT_H
#define COLIKV_SRC_TURN_EDIT_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog_rows.h"
#include "colikv/model.h"

namespace colikv {
namespace detail {

// What an edit's new chunks are stored through, in the write transaction
// that stores them: the backend's own chunk rows. The store decides which
// (a chunk found under its key, an evicted one given its values back, a new one).
class ChunkWriter {
 public:
  virtual ~ChunkWriter() = default;
  // The chunk of the model stored under `key` (Catalog::find_chunk's contract).
  virtual std::optional<KeyedChunk> find_chunk(int64_t model_id, const ChunkHash& key) = 0;
  // Stores a chunk and, unless c.defer_index, its chunk_meta row; returns its
  // chunk_id, or 0 when the key is stored already (by another writer
  // meanwhile, or before a store that inserts first): find_chunk then finds it.
  virtual int64_t insert_chunk(const ChunkRecord& c) = 0;
  // Gives an evicted chunk its values back.
  virtual void restore_payload(int64_t chunk_id, const ChunkRecord& c) = 0;
};

// One chunk an edit stored: its place in the chunk list and its id.
struct NewChunkLink {
  int64_t seq = 0;
  int64_t chunk_id = 0;
};

// The new chunks of an edit, produced one at a time in seq order, so that a
// turn's memory stays bounded by what is being encoded: the backend pulls
// them while it applies the edit.
class TurnChunks {
 public:
  virtual ~TurnChunks() = default;
  // How many, and their raw (uncompressed) bytes together.
  virtual size_t size() const = 0;
  virtual int64_t raw_bytes() const = 0;
  // Waits for the next chunk's encoding; false when every chunk was stored.
  // raw_bytes: that chunk's. Inside or outside a transaction.
  virtual bool next(int64_t& raw_bytes) = 0;
  // In a write transaction: stores the chunk next() gave through `writer`
  // (with `record`: deferring its chunk_meta row, and filling what the link
  // indexes it by), for model `model_id`.
  virtual NewChunkLink store(ChunkWriter& writer, int64_t model_id, ChunkRecord* record) = 0;
  // After the chunk is stored (and, in a transaction of its own, committed):
  // the store's test hook and progress callback.
  virtual void stored() = 0;
};

struct TurnLink {
  int64_t seq = 0;
  int64_t chunk_id = 0;
};

struct TurnEdit {
  // The conversation: an existing one, named `name`, expected at
  // `generation` (else kConflict), or `create` (the name must be free, else
  // kConflict), or a `fork` of the existing one, which the links then go to.
  std::string name;
  int64_t conversation_id = 0;
  int64_t generation = 0;
  std::optional<NewConversation> create;  // its model_id is the edit's model's
  std::optional<NewFork> fork;
  // The existing conversation is deleted with its chunk list (its chunks go
  // by `free`); a removal has nothing else: no create, fork, links, chunks,
  // cut or count (else kInternal).
  bool remove = false;
  // The model of a new conversation and of the new chunks: model_id, or 0:
  // `model` (stored with chunk_tokens when missing; one stored meanwhile with
  // another chunk size is kConflict).
  int64_t model_id = 0;
  ModelSignature model;
  int64_t chunk_tokens = 0;
  // Entries from this seq on are dropped first (-1: none).
  int64_t unlink_from = -1;
  // Existing chunks linked as they are, then the new ones (may be null).
  std::vector<TurnLink> links;
  TurnChunks* chunks = nullptr;
  // The new token count (bumps the generation, sets the updated time, and
  // the last-used time when `used`); none: the count stays (a fork's is its own).
  std::optional<int64_t> count;
  bool used = true;
  // A fork: the forked conversation's last-used time is set.
  bool touch_parent = false;
  // Chunks freed unless a chunk list still names them (Catalog::free_unused_chunks).
  std::vector<int64_t> free;
  // What the new chunks hold uncompressed, for a backend that paces large
  // writes (LocalFiles::wait_before_write); -1: no pacing.
  int64_t write_bytes = -1;
  int64_t now_ms = 0;
  // Inside an open write transaction the edit is a savepoint of it, undone
  // alone when the edit fails. False: no savepoint, for a caller whose
  // transaction is rolled back whole when any of its edits fails (a
  // tenant's retention); outside a write transaction that is kInternal.
  bool savepoint = true;
  // The store's last step in the committing transaction, given the
  // conversation the links went to (the tenant's limits); may be empty.
  std::function<void(int64_t conversation_id)> finish;
};

struct TurnResult {
  int64_t conversation_id = 0;  // the one the links went to (a fork's, a new one's)
  std::vector<int64_t> chunk_ids;  // of the new chunks, in seq order
};

class Catalog;

// Shared steps of Catalog::apply (turn_edit.cpp), in its write transaction.
// kConflict unless the edit's conversation is as it expects: an existing one
// at its generation (a fork's target name free), or a name to create free;
// kInternal for a removal with another change.
void check_turn_conversation(Catalog& catalog, const TurnEdit& edit, const std::string& what);
// The edit's model_id, or its model's, stored when missing.
int64_t turn_model_id(Catalog& catalog, const TurnEdit& edit, const std::string& what);
// kConflict: the name of the conversation the edit creates is taken (another
// writer created it meanwhile); for a backend whose insert finds it taken.
[[noreturn]] void throw_name_taken(const std::string& what);

// For tests only, not API: an append of more than one chunk whose raw bytes
// reach this stores its chunks first, each in a transaction of its own, then
// links them (docs/design.md, "Objects first"), where the backend can
// (SQLite, sqlite_turn.cpp).
int64_t& objects_first_min_bytes();

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_TURN_EDIT_H
