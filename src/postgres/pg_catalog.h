// The Catalog (catalog.h) over a PostgreSQL connection (migrations/postgres/).
//
// Transactions have SQLite's semantics: a read is one REPEATABLE READ snapshot;
// a write takes the store's transaction-scoped advisory lock first (one writer
// per store at a time, waiting up to the busy timeout, then kBusy), so every
// statement after it sees all that earlier writers committed, and the core's
// generation check detects a racing writer exactly as with SQLite's
// BEGIN IMMEDIATE. Nested transactions are savepoints.
#ifndef COLIKV_SRC_POSTGRES_PG_CATALOG_H
#define COLIKV_SRC_POSTGRES_PG_CATALOG_H

#include <memory>
#include <string>

#include "catalog.h"
#include "colikv/options.h"
#include "postgres/pg_connection.h"

namespace colikv {
namespace detail {

class PgCatalog : public Catalog {
 public:
  // Connects to `uri` and brings its schema up to date (pg_migrations.h).
  PgCatalog(const std::string& uri, const Options& options);

  PgConnection& connection() { return conn_; }

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
  PgRows run(const char* sql, const PgParams& params, const char* what);
  void record_chunk_meta(int64_t chunk_id, const ChunkRecord& c, int64_t payload_bytes);

  PgConnection conn_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_POSTGRES_PG_CATALOG_H
