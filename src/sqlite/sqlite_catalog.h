// The Catalog (catalog.h) over a store's SQLite connection, which it owns
// with the SQLite-only services: hardening and migrations (open_store), the
// background WAL checkpointer.
#ifndef COLIKV_SRC_SQLITE_SQLITE_CATALOG_H
#define COLIKV_SRC_SQLITE_SQLITE_CATALOG_H

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>

#include "catalog/catalog.h"
#include "colikv/options.h"
#include "sqlite/sqlite_checkpointer.h"
#include "sqlite/sqlite_query.h"
#include "sqlite/sqlite_statement_cache.h"
#include "sqlite/sqlite_util.h"
#include "sqlite/sqlite_writer_lock.h"

namespace colikv {
namespace detail {

// For tests only, not API: when not empty, the boot id writers are recorded
// with and compared against instead of the kernel's (which decides only for
// a writers row of a library before the lock file, sqlite_held.cpp).
std::string& simulated_boot_id();

class SqliteCatalog : public Catalog, public LocalFiles, private ChunkWriter {
 public:
  // Opens (or creates) the store at path (open_store) with its background
  // checkpointer when writable.
  // Its waits for a lock and the chunks it reclaims are counted in `counters`
  // (the Store's; may be null).
  SqliteCatalog(const std::string& path, const Options& options, StoreCounters* counters = nullptr);
  ~SqliteCatalog() override;

  // The connection, for white-box tests.
  SQLite::Database& database() { return db_; }

  std::unique_ptr<Transaction> begin(Access access, const std::string& what) override;
  TurnResult apply(const TurnEdit& edit, const std::string& what) override;

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

  int64_t stored_payload_bytes(Scope scope) override;
  void visit_least_recent(Scope scope, const PrefixIndex::ConversationVisitor& f) override;
  std::vector<PayloadChunk> claim_chunks(int64_t conversation_id) override;
  void evict_payload(int64_t chunk_id) override;
  CompactOutcome compact(const std::string& what, int64_t step_bytes,
                         const std::function<void(int64_t, int64_t)>& progress) override;
  void release_free_pages(const std::string& what, int64_t step_bytes,
                          const std::function<void(int64_t, int64_t)>& progress) override;
  bool erase_deleted(const std::string& what) override;
  int64_t file_bytes() override;
  std::vector<std::string> file_suffixes() const override { return {"", "-wal", "-shm", "-journal", "-writers"}; }
  LocalFiles* local_files() override { return this; }
  TenantRoles* tenant_roles() override { return nullptr; }              // a file has no server roles

  PrefixIndex& prefix_index() override;
  void wait_before_write(int64_t raw_bytes) override;
  uint64_t write_rollbacks() const override { return write_rollbacks_.load(std::memory_order_relaxed); }

 private:
  // A statement of this catalog's, its errors named once by errors()
  // (sqlite_query.h); reading kStoredRows for a method that reads stored
  // rows. Cached: prepared once per connection (StatementCache); prepared:
  // for this use alone.
  Query cached(std::string_view sql, Reading reading = Reading::kAny) {
    return Query(statements_, sql, errors(), reading);
  }
  Query prepared(const std::string& sql, Reading reading = Reading::kAny) {
    return Query(db_, sql, errors(), reading);
  }
  std::atomic<uint64_t> write_rollbacks_{0};
  // The turn's rows (sqlite_catalog.cpp), which apply writes (sqlite_turn.cpp).
  // With `count`: as set_count(id, *count, now_ms, used) would leave it, in
  // the one row write. 0: the name is taken.
  int64_t insert_conversation(const NewConversation& c, std::optional<int64_t> count, int64_t now_ms, bool used);
  int64_t insert_fork(const NewFork& f);
  void remove_conversation(int64_t conversation_id);  // and its chunk list (not its chunks)
  void set_count(int64_t conversation_id, int64_t count, int64_t now_ms, bool used);
  void touch_used(int64_t conversation_id, int64_t now_ms);
  int64_t insert_chunk(const ChunkRecord& c) override;
  void restore_payload(int64_t chunk_id, const ChunkRecord& c) override;
  void link_chunk(int64_t conversation_id, int64_t seq, int64_t chunk_id);
  void unlink_from(int64_t conversation_id, int64_t first_seq);
  // Applying an edit (sqlite_turn.cpp): in the caller's write transaction,
  // the conversation's rows, the links, the count, the frees and the
  // store's finish; with `held`, the chunks stored and held before
  // (objects first) instead of edit.chunks.
  struct Held {
    std::vector<int64_t> ids;
    std::vector<ChunkRecord> records;
    std::vector<int64_t> seqs;
  };
  TurnResult link_turn(const TurnEdit& edit, const std::string& what, const Held* held);
  TurnResult apply_objects_first(const TurnEdit& edit, const std::string& what);
  // Objects first (docs/design.md, "Objects first"; sqlite_held.cpp): a
  // turn of several chunks stores each in a short write transaction of its
  // own, holds it under this catalog's writers row, and links them all in one
  // more. Whether it can now: writable, outside any transaction (an append
  // nested in another's transaction keeps to it).
  bool can_hold_chunks();
  // Outside any transaction: before the first chunk transaction (records
  // this writer; its chunk transactions then commit without a device flush:
  // the link's covers them).
  void begin_chunk_phase(const std::string& what);
  // Outside any transaction, never throws: after each chunk transaction has
  // committed. Starts the device write of the chunk's WAL frames, so that
  // the next flush has about one chunk's frames left to write, and leaves
  // other writers an opening to take the write lock before the next chunk.
  void chunk_committed() noexcept;
  // Outside any transaction, never throws: after the last chunk transaction,
  // flushes the turn's chunk frames, so that the link's own flush is short.
  void end_chunk_phase() noexcept;
  // Write transaction. Records a chunk this writer stored or found as held:
  // until release_held or drop_held, no other writer frees or evicts it, and
  // no read sees it unless a chunk list names it.
  void hold_chunk(int64_t chunk_id);
  // Write transaction. Gives a chunk its chunk_meta row, from `c` and the
  // stored payload's size, unless it has one.
  void index_chunk(int64_t chunk_id, const ChunkRecord& c);
  // Write transaction (the link's): kConflict saying the turn's chunks were
  // taken unless each is still held by this writer and is the content its
  // record describes (a reclaim that took this writer for dead may have
  // freed it, and another writer reused its id since).
  void check_held(const std::vector<int64_t>& chunk_ids, const std::vector<ChunkRecord>& records,
                  const std::string& what);
  // Write transaction (the link's). This writer's holds on the chunks end.
  void release_held(const std::vector<int64_t>& chunk_ids);
  // Outside any transaction, never throws: a turn failed after its chunk
  // phase. Ends this writer's holds and deletes the chunks held that no chunk
  // list names and no other writer holds; best effort.
  void drop_held() noexcept;
  std::string path_;
  Options options_;
  BusyWait busy_;  // db_'s, charged to the Store that opened this catalog
  SQLite::Database db_;
  StatementCache statements_;  // kept across calls: the prefix lookup, eviction
  std::unique_ptr<PrefixIndex> prefix_index_;  // over statements_
  bool erase_pending_ = false;  // an erase_deleted that a reader kept from finishing
  // The tenant this catalog sees (Options::tenant): its tenants.tenant_id,
  // and chunk_meta.prev_hash of its regions at position 0 (tenant_anchor).
  int64_t tenant_id_ = 0;
  std::string anchor_;
  // Uses (loads) a caller saw succeed whose last_used_ms could not be written
  // at once (another connection held the write lock), by conversation name:
  // written by this catalog's next write transaction before anything else it
  // does (so its retention and expire() see them), or at its close. Retention
  // must never take a conversation a caller was just given.
  std::map<std::string, int64_t> pending_uses_;
  // In a write transaction: writes pending_uses_ (a later time only) and empties it.
  void record_pending_uses();
  // At close, outside any transaction, never throws: the same in a write
  // transaction of its own.
  void record_pending_uses_at_close() noexcept;
  // Finds the tenant, creating it on a writable open with create_tenant_if_missing;
  // else kNotFound "no such tenant".
  void open_tenant();
  // Objects first (sqlite_held.cpp): this catalog's writers row, once it
  // held a chunk (0: none yet), whether a chunk phase relaxed synchronous,
  // and the WAL file it flushes ahead of the link (-1: none).
  int64_t writer_id_ = 0;
  // Held from the writers row's insert to its delete: while it is held,
  // no other process takes this writer for dead (sqlite_writer_lock.h).
  WriterLock writer_lock_;
  // In a transaction: whether this writer's row is still there (a reclaim
  // that took it for dead deletes it).
  bool registered();
  bool chunk_phase_relaxed_ = false;
  int wal_fd_ = -1;
  // When it last left other writers an opening, and the data_version then.
  std::chrono::steady_clock::time_point last_opening_;
  int64_t seen_data_version_ = -1;
  // PRAGMA data_version: moves when another connection commits; -1 on error.
  int64_t data_version() noexcept;
  int64_t drop_writer_holds(int64_t writer);
  // Deletes the held chunks of writers certainly dead, outside any
  // transaction; true when it deleted any (their bytes are erased).
  bool reclaim_dead_writers(const std::string& what);
  // On close: this writer's holds and row go (best effort).
  void close_writer() noexcept;
  // Declared last so that it stops before the connection closes.
  std::unique_ptr<Checkpointer> checkpointer_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_CATALOG_H
