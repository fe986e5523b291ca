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
  void touch_used_if_idle(const std::string& name, int64_t now_ms) override;
  bool set_text(const std::string& name, ConversationText column, const std::string& value, int64_t now_ms) override;
  std::optional<ConversationInfoRow> conversation_info(const std::string& name) override;
  std::vector<ConversationInfoRow> list_conversations(int64_t limit, int64_t offset) override;
  int64_t conversation_count() override;
  void for_each_token_list(int64_t conversation_id, int64_t end_pos,
                           const std::function<void(int64_t, int64_t, std::string_view)>& f) override;

  int schema_version() override;
  bool is_json(const std::string& text) override;

  std::optional<int64_t> find_model_id(const std::string& signature) override;
  std::optional<StoredModel> read_model(int64_t model_id) override;
  void insert_model(const ModelSignature& sig, int64_t chunk_tokens, int64_t now_ms) override;

  std::vector<ChunkSummary> chunk_list(int64_t conversation_id) override;
  std::unique_ptr<ChunkCursor> read_chunks(int64_t conversation_id, int64_t end_pos, int64_t max_payload_bytes) override;
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

  IntegrityReport check_integrity() override;
  std::vector<ConversationRow> conversations_to_verify(const std::string& only) override;
  void for_each_verify_row(int64_t conversation_id, const std::function<void(const VerifyChunkRow&)>& f) override;
  std::vector<LineageRow> lineage() override;
  void for_each_undigested_share(const std::function<void(const ChunkUse&)>& f) override;
  std::vector<ChunkPlace> unused_chunks() override;
  std::vector<StrandedConversation> conversations_of_no_tenant() override;
  std::vector<ModelUsageRow> model_usage() override;
  std::vector<TenantRow> tenant_usage() override;
  TenantLimits tenant_limits() override;
  void set_tenant_limits(const TenantLimits& limits) override;
  std::vector<IdleConversation> idle_conversations(int64_t used_before_ms) override;
  void set_tenant_role(const std::string& role, bool granted, int64_t now_ms) override;  // pg_tenant_roles.cpp

  int64_t stored_payload_bytes(Scope scope) override;
  void visit_least_recent(Scope scope, const PrefixIndex::ConversationVisitor& f) override;
  std::vector<PayloadChunk> payload_chunks(int64_t conversation_id) override;
  int64_t chunk_users(int64_t chunk_id) override;
  void evict_payload(int64_t chunk_id) override;
  int64_t evicted_chunk_count() override;
  int64_t evicted_conversation_count() override;
  CompactOutcome compact(const std::string& what, int64_t step_bytes) override;
  void release_free_pages(const std::string& what, int64_t step_bytes) override;
  bool erase_deleted(const std::string& what) override;
  int64_t file_bytes() override;

  PrefixIndex& prefix_index() override;
  std::vector<std::string> file_suffixes() const override { return {}; }  // the server keeps the files
  void wait_before_write() override {}  // the server has no background work the client waits for

 private:
  PgRows run(const char* sql, const PgParams& params, const char* what);
  void record_chunk_meta(int64_t chunk_id, const ChunkRecord& c, int64_t payload_bytes);

  // Finds the tenant, creating it on a writable open with create_tenant_if_missing;
  // else kNotFound "no such tenant".
  void open_tenant(const Options& options);
  // What "no such tenant" adds for a role under row-level security ("" for
  // one that sees every tenant): that only its granted tenants are there.
  std::string tenant_refusal_note();

  PgConnection conn_;
  std::unique_ptr<PrefixIndex> prefix_index_;
  // The tenant this catalog sees (Options::tenant): its tenants.tenant_id,
  // and chunk_meta.prev_hash of its regions at position 0 (tenant_anchor).
  int64_t tenant_id_ = 0;
  std::string anchor_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_POSTGRES_PG_CATALOG_H
