// What the store needs from a database, free of any database's types: the
// rows of conversations, models and chunks, chunk lists, and transactions.
// The SQLite implementation is src/sqlite/sqlite_catalog; a second backend
// implements the same interface.
//
// Errors: a method throws colikv::Error, or its backend's own exception, which
// the caller turns into colikv::Error naming what it was doing (with_context).
#ifndef COLIKV_SRC_CATALOG_H
#define COLIKV_SRC_CATALOG_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chunk_codec.h"
#include "colikv/model.h"

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

class Catalog {
 public:
  virtual ~Catalog() = default;

  // A read snapshot, or the write transaction (one writer at a time); rolled
  // back when destroyed uncommitted.
  class Transaction {
   public:
    virtual ~Transaction() = default;
    virtual void commit() = 0;
  };
  enum class Access { kRead, kWrite };
  // `what` names the operation in error messages.
  virtual std::unique_ptr<Transaction> begin(Access access, const std::string& what) = 0;

  // Conversations
  virtual std::optional<ConversationRow> find_conversation(const std::string& name) = 0;
  virtual int64_t insert_conversation(const NewConversation& c) = 0;
  virtual int64_t insert_fork(const NewFork& f) = 0;
  // Deletes a conversation and its chunk list (not its chunks).
  virtual void delete_conversation(int64_t conversation_id) = 0;
  // Sets the token count, bumps the generation, and sets the updated time
  // (and the last-used time when `used`).
  virtual void set_count(int64_t conversation_id, int64_t count, int64_t now_ms, bool used = true) = 0;
  virtual void touch_used(int64_t conversation_id, int64_t now_ms) = 0;

  // Models
  virtual std::optional<int64_t> find_model_id(const std::string& signature) = 0;
  virtual std::optional<StoredModel> read_model(int64_t model_id) = 0;
  virtual void insert_model(const ModelSignature& sig, int64_t chunk_tokens, int64_t now_ms) = 0;

  // Chunks
  virtual std::vector<ChunkSummary> chunk_list(int64_t conversation_id) = 0;
  // Entries [0, n_chunks) of a chunk list, for a load; valid in the current
  // transaction.
  virtual std::unique_ptr<ChunkCursor> read_chunks(int64_t conversation_id, int64_t n_chunks) = 0;
  // A chunk's token ids as stored (JSON text); none when the chunk is missing.
  virtual std::optional<std::string> chunk_tokens_json(int64_t chunk_id) = 0;
  // None when the chunk is missing.
  virtual std::optional<ChunkContent> read_chunk(int64_t chunk_id) = 0;
  // Content digests of the chunks of a model stored with values at chain hash `chain`.
  virtual std::vector<ChunkHash> digests_at(int64_t model_id, const ChunkHash& chain) = 0;
  virtual std::optional<KeyedChunk> find_chunk(int64_t model_id, const ChunkHash& key) = 0;
  virtual int64_t insert_chunk(const ChunkRecord& c) = 0;
  // Gives an evicted chunk its values back.
  virtual void restore_payload(int64_t chunk_id, const ChunkRecord& c) = 0;
  // Sets entry seq of a conversation's chunk list.
  virtual void link_chunk(int64_t conversation_id, int64_t seq, int64_t chunk_id) = 0;
  // Adds entry seq, which must not exist yet (else the backend's constraint error).
  virtual void insert_link(int64_t conversation_id, int64_t seq, int64_t chunk_id) = 0;
  // Drops the entries from seq first_seq on.
  virtual void unlink_from(int64_t conversation_id, int64_t first_seq) = 0;
  // Deletes those of the chunks no chunk list names.
  virtual void free_unused_chunks(const std::vector<int64_t>& chunk_ids) = 0;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CATALOG_H
