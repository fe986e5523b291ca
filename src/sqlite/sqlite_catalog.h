// The Catalog (catalog.h) over a store's SQLite connection.
#ifndef COLIKV_SRC_SQLITE_SQLITE_CATALOG_H
#define COLIKV_SRC_SQLITE_SQLITE_CATALOG_H

#include <SQLiteCpp/Database.h>

#include <memory>

#include "catalog.h"

namespace colikv {
namespace detail {

class SqliteCatalog : public Catalog {
 public:
  // db must outlive the catalog.
  explicit SqliteCatalog(SQLite::Database& db) : db_(db) {}

  std::unique_ptr<Transaction> begin(Access access, const std::string& what) override;

  std::optional<ConversationRow> find_conversation(const std::string& name) override;
  int64_t insert_conversation(const NewConversation& c) override;
  int64_t insert_fork(const NewFork& f) override;
  void delete_conversation(int64_t conversation_id) override;
  void set_count(int64_t conversation_id, int64_t count, int64_t now_ms, bool used = true) override;
  void touch_used(int64_t conversation_id, int64_t now_ms) override;

  std::optional<int64_t> find_model_id(const std::string& signature) override;
  std::optional<StoredModel> read_model(int64_t model_id) override;
  void insert_model(const ModelSignature& sig, int64_t chunk_tokens, int64_t now_ms) override;

  std::vector<ChunkSummary> chunk_list(int64_t conversation_id) override;
  std::unique_ptr<ChunkCursor> read_chunks(int64_t conversation_id, int64_t n_chunks) override;
  std::optional<std::string> chunk_tokens_json(int64_t chunk_id) override;
  std::optional<ChunkContent> read_chunk(int64_t chunk_id) override;
  std::vector<ChunkHash> digests_at(int64_t model_id, const ChunkHash& chain) override;
  std::optional<KeyedChunk> find_chunk(int64_t model_id, const ChunkHash& key) override;
  int64_t insert_chunk(const ChunkRecord& c) override;
  void restore_payload(int64_t chunk_id, const ChunkRecord& c) override;
  void link_chunk(int64_t conversation_id, int64_t seq, int64_t chunk_id) override;
  void insert_link(int64_t conversation_id, int64_t seq, int64_t chunk_id) override;
  void unlink_from(int64_t conversation_id, int64_t first_seq) override;
  void free_unused_chunks(const std::vector<int64_t>& chunk_ids) override;

 private:
  SQLite::Database& db_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_CATALOG_H
