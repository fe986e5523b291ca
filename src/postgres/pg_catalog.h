// The Catalog (catalog.h) over a PostgreSQL connection (migrations/postgres/).
//
// Transactions: a read is one REPEATABLE READ snapshot; a write is READ
// COMMITTED and takes the store's advisory lock shared (only a migration
// takes it exclusively), so writers of different conversations never wait
// for each other. What one store-wide writer lock gave, row locks give
// (docs/postgres.md, "Concurrent writers"; catalog.h, "Writers"):
// - find_conversation in a write transaction locks the row (FOR NO KEY
//   UPDATE): a second writer of the conversation waits, then sees the new
//   generation (the core's kConflict); a new name is a unique key, whose
//   loser gets kConflict;
// - find_chunk locks the chunk it returns (FOR SHARE; an evicted one FOR NO
//   KEY UPDATE, since its finder restores its values, and never shared
//   first, so that two restorers queue instead of deadlocking as they
//   upgrade); links of new rows hold the foreign key's KEY SHARE lock on
//   their chunks;
// - freeing never waits: it locks its candidates FOR UPDATE SKIP LOCKED and
//   deletes in the next statement (a new READ COMMITTED snapshot) those no
//   chunk list names; a candidate another writer holds goes into
//   chunks_to_free (schema 6), freed after the commit, or by the next
//   writable open, gc or vacuum, once no chunk list names it;
// - eviction claims its candidates FOR UPDATE SKIP LOCKED (a chunk another
//   writer holds is kept) before it counts their users.
// The waits follow the data: a writer waits only for writers of the same
// conversation or of the same chunks, and a freer or an evicter for none.
// A cycle the server still detects is broken by failing one transaction
// (kBusy), which changed nothing. Nested transactions are savepoints.
#ifndef COLIKV_SRC_POSTGRES_PG_CATALOG_H
#define COLIKV_SRC_POSTGRES_PG_CATALOG_H

#include <memory>
#include <string>

#include "catalog/catalog.h"
#include "colikv/options.h"
#include "postgres/pg_connection.h"

// The server's clock, in milliseconds since the epoch, as SQL: what a
// conversation's last-used time is written with and retention measures idle
// time against. The hosts sharing a store may disagree on the time; the
// server is the one clock they all see. The transaction's start time, not the
// statement's: every row one call writes gets the same time, as on SQLite
// (one now_ms per call), so a fork and the parent it touches tie, and the
// newer row, the fork, lists first.
#define COLIKV_PG_SERVER_MS "(extract(epoch FROM now()) * 1000)::bigint"

namespace colikv {
namespace detail {

class PgCatalog : public Catalog, public TenantRoles, private ChunkWriter {
 public:
  // Connects to `uri` and brings its schema up to date (pg_migrations.h).
  PgCatalog(const std::string& uri, const Options& options);

  PgConnection& connection() { return conn_; }
  // The round trips the links of turns (link_turn) have made on the
  // connection: the tests and the benchmark count them to see that a turn's
  // link stays one statement however many entries it writes.
  int64_t link_round_trips() const { return link_round_trips_; }

  std::unique_ptr<Transaction> begin(Access access, const std::string& what) override;
  TurnResult apply(const TurnEdit& edit, const std::string& what) override;  // pg_turn.cpp
  // Called by the transactions begin() returns: an outermost write
  // transaction began, or ended (committed or rolled back).
  void write_began();
  void write_ended(bool committed) noexcept;

  std::optional<ConversationRow> find_conversation(const std::string& name) override;
  void touch_used_if_idle(const std::string& name, int64_t now_ms) override;
  bool set_text(const std::string& name, ConversationText column, const std::string& value, int64_t now_ms) override;
  std::optional<ConversationInfoRow> conversation_info(const std::string& name) override;
  std::vector<ConversationInfoRow> list_conversations(int64_t limit, int64_t offset) override;
  int64_t conversation_count() override;
  void for_each_token_list(int64_t conversation_id, int64_t from_seq, int64_t end_pos,
                           const std::function<void(int64_t, int64_t, std::string_view)>& f) override;

  int schema_version() override;

  std::optional<int64_t> find_model_id(const std::string& signature) override;
  std::optional<StoredModel> read_model(int64_t model_id) override;
  void insert_model(const ModelSignature& sig, int64_t chunk_tokens, int64_t now_ms) override;

  std::vector<ChunkSummary> chunk_list(int64_t conversation_id) override;
  std::unique_ptr<ChunkCursor> read_chunks(int64_t conversation_id, int64_t end_pos, int64_t max_payload_bytes) override;
  std::optional<ChunkContent> read_chunk(int64_t chunk_id) override;
  std::vector<ChunkHash> digests_at(int64_t model_id, const ChunkHash& chain) override;
  std::optional<KeyedChunk> find_chunk(int64_t model_id, const ChunkHash& key) override;
  void free_unused_chunks(const std::vector<int64_t>& chunk_ids) override;
  void free_queued_chunks() override;

  IntegrityReport check_integrity() override;
  std::vector<ConversationRow> conversations_to_verify(const std::string& only) override;
  void for_each_verify_row(int64_t conversation_id, const std::function<void(const VerifyChunkRow&)>& f) override;
  std::vector<LineageRow> lineage() override;
  void for_each_undigested_share(const std::function<void(const ChunkUse&)>& f) override;
  Strays strays() override;
  TenantUsage usage() override;
  std::vector<TenantRow> tenant_usage() override;
  GaugeUsage gauge_usage() override;
  TenantLimits tenant_limits() override;
  TenantLimits set_tenant_limits(const TenantLimits& limits, unsigned fields) override;
  std::vector<IdleConversation> idle_conversations(int64_t used_before_ms) override;
  void set_tenant_role(const std::string& role, bool granted, int64_t now_ms) override;  // pg_tenant_roles.cpp

  int64_t stored_payload_bytes(Scope scope) override;
  void visit_least_recent(Scope scope, const PrefixIndex::ConversationVisitor& f) override;
  std::vector<PayloadChunk> claim_chunks(int64_t conversation_id) override;
  void evict_payload(int64_t chunk_id) override;
  CompactOutcome compact(const std::string& what, int64_t step_bytes,
                         const std::function<void(int64_t, int64_t)>& progress) override;
  bool erase_deleted(const std::string& what) override;
  int64_t file_bytes() override;

  PrefixIndex& prefix_index() override;
  LocalFiles* local_files() override { return nullptr; }  // the server keeps the files, and gives their pages back itself
  TenantRoles* tenant_roles() override { return this; }
  // A sequence never hands an id out twice, even one a rolled-back
  // transaction took: a row read before a rollback keeps its id to itself.
  uint64_t write_rollbacks() const override { return 0; }

 private:
  // apply's edit, in the write transaction open (pg_turn.cpp).
  TurnResult apply_edit(const TurnEdit& edit, const std::string& what);
  // The turn's rows, which apply writes (pg_turn.cpp).
  int64_t insert_conversation(const NewConversation& c);
  int64_t insert_fork(const NewFork& f);
  void remove_conversation(int64_t conversation_id);  // and its chunk list (not its chunks)
  void touch_used(int64_t conversation_id, int64_t now_ms);
  int64_t insert_chunk(const ChunkRecord& c) override;
  void restore_payload(int64_t chunk_id, const ChunkRecord& c) override;
  // In apply's transaction, one statement: drops the entries from
  // edit.unlink_from on, links `links`, and sets the count (bumping the
  // generation, which must still be `generation` unless it is negative).
  void link_turn(int64_t conversation_id, const TurnEdit& edit, const std::vector<TurnLink>& links,
                 int64_t generation);
  PgRows run(const char* sql, const PgParams& params, const char* what);
  // kConflict: a racing writer took the name of a conversation about to be created.
  [[noreturn]] void throw_name_taken();
  // A bigint[] parameter's text: {1,2,3}.
  static std::string id_array(const std::vector<int64_t>& ids);
  void record_chunk_meta(int64_t chunk_id, const ChunkRecord& c, int64_t payload_bytes);
  // Deletes those of `locked_ids` (rows this transaction has locked) that no chunk list names.
  void delete_unlinked(const std::vector<int64_t>& locked_ids);
  // Frees the chunks of chunks_to_free that no chunk list names, and drops
  // their queue rows; with `wait`, waits for a writer holding one, one chunk
  // at a time. Outside a transaction; best effort, never throws.
  void free_queued_chunks(bool wait) noexcept;

  // Finds the tenant, creating it on a writable open with create_tenant_if_missing;
  // else kNotFound "no such tenant".
  void open_tenant(const Options& options);
  // What "no such tenant" adds for a role under row-level security ("" for
  // one that sees every tenant): that only its granted tenants are there.
  std::string tenant_refusal_note();

  PgConnection conn_;
  // Inside a write transaction (begin(kWrite)): the reads that decide a write lock their rows.
  bool writing_ = false;
  // This write transaction queued chunks in chunks_to_free; free_queued_chunks is running.
  bool queued_ = false;
  bool freeing_queue_ = false;
  std::unique_ptr<PrefixIndex> prefix_index_;
  // The tenant this catalog sees (Options::tenant): its tenants.tenant_id,
  // and chunk_meta.prev_hash of its regions at position 0 (tenant_anchor).
  int64_t tenant_id_ = 0;
  std::string anchor_;
  int64_t link_round_trips_ = 0;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_POSTGRES_PG_CATALOG_H
