// What the store needs from a database, free of any database's types: the
// rows of conversations, models and chunks, chunk lists, and transactions.
// The SQLite implementation is src/sqlite/sqlite_catalog; a second backend
// implements the same interface.
//
// The rules every method of Catalog and PrefixIndex follows, unless its
// comment says otherwise (as leveldb's env.h states its own):
// - Errors: a method throws colikv::Error only, never a backend's own
//   exception (SQLiteCpp's, ...): each backend translates its own in its own
//   files (SQLite codes, SQLSTATEs to ErrorCode). What the database raised
//   is a BackendError (backend_error.h), to which the caller adds what it
//   was doing with with_context (read_rows while it reads stored rows, where
//   a value out of range is kCorrupt); a colikv::Error of another type
//   already names its context. A value that is absent is an empty optional,
//   never an error.
// - Transactions: a read runs in the caller's snapshot when one is open
//   (begin(kRead) or begin(kWrite)), else alone; a method that writes needs the
//   write transaction (begin(kWrite)) open, and its change is undone with it.
//   Rows are returned as stored: the store checks them (a hostile store may
//   hold anything its schema allows).
// - Writers: SQLite's write transaction excludes every other writer. A
//   backend whose writers run side by side (PostgreSQL: one writer per
//   conversation, docs/postgres.md "Concurrent writers") makes the same calls
//   safe with row locks: in a write transaction find_conversation locks the
//   conversation it returns, find_chunk the chunk, and the methods that free,
//   evict or expire lock what they change before they re-check it; what such
//   a backend adds to a method's contract is said at the method.
// - Threads: a Catalog, and its PrefixIndex, is used by one thread at a time
//   (the Store's lock, StoreCall); another process or Store may write between
//   two transactions, never inside one (of the rows the transaction has locked).
#ifndef COLIKV_SRC_CATALOG_H
#define COLIKV_SRC_CATALOG_H

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog_rows.h"
#include "colikv/options.h"
#include "prefix_index.h"
#include "turn_edit.h"

namespace colikv {
namespace detail {

class Catalog {
 public:
  virtual ~Catalog() = default;

  // A read snapshot, or a write transaction (SQLite: one writer at a time;
  // PostgreSQL: one per conversation, see "Writers" above); rolled back when
  // destroyed uncommitted.
  class Transaction {
   public:
    virtual ~Transaction() = default;
    // Makes the work durable (as Options::synchronous says); throws kBusy,
    // kDiskFull, kIO, and the transaction is then rolled back.
    virtual void commit() = 0;
  };
  enum class Access { kRead, kWrite };
  // `what` names the operation in error messages. A kWrite, and each lock it
  // takes, waits up to Options::busy_timeout_ms for another writer (then kBusy). Nested calls
  // are savepoints of the open transaction: an inner rollback undoes only
  // the inner work.
  virtual std::unique_ptr<Transaction> begin(Access access, const std::string& what) = 0;
  // How many write transactions and savepoints of this catalog ended without
  // their commit. A row read inside one may be gone, and its id another
  // row's: SQLite gives a rolled-back row's id to the next row inserted. A
  // backend whose ids are never handed out twice (PostgreSQL's sequences)
  // need not count.
  virtual uint64_t write_rollbacks() const { return 0; }

  // A turn (turn_edit.h): applies `edit` whole, or throws and leaves the
  // store as it was. Outside a transaction it commits its own (a backend
  // may commit the new chunks first, each in a short transaction, and link
  // them in one more: what a reader sees changes only with that last
  // commit); inside one, it is a savepoint of it. Refused: an existing
  // conversation that is gone or not at edit.generation, a name to create
  // that is taken, a model stored meanwhile with another chunk size
  // (kConflict); what the database raises. `what` names the call in errors.
  // Returns the conversation the links went to and the new chunks' ids.
  virtual TurnResult apply(const TurnEdit& edit, const std::string& what) = 0;

  // Conversations
  // The conversation named `name`; none when there is none. In a write
  // transaction, no other writer changes it until this one ends.
  virtual std::optional<ConversationRow> find_conversation(const std::string& name) = 0;
  // Write transaction. Deletes a conversation and its chunk list (not its chunks).
  virtual void delete_conversation(int64_t conversation_id) = 0;
  // Sets a conversation's last-used time, outside any transaction, unless
  // that would wait for another writer or fail: recency is best effort, and
  // this never throws.
  virtual void touch_used_if_idle(const std::string& name, int64_t now_ms) = 0;
  // Write transaction. Sets a text column, bumps the generation and sets the
  // updated time; false when there is no such conversation.
  virtual bool set_text(const std::string& name, ConversationText column, const std::string& value,
                        int64_t now_ms) = 0;
  // info()'s row of the conversation; none when there is none.
  virtual std::optional<ConversationInfoRow> conversation_info(const std::string& name) = 0;
  // The page [offset, offset + limit) (limit < 0: all) of the conversations,
  // most recently used first.
  virtual std::vector<ConversationInfoRow> list_conversations(int64_t limit, int64_t offset) = 0;
  // How many conversations the store holds.
  virtual int64_t conversation_count() = 0;
  // Each of the token lists (JSON text) of the entries of a chunk list that
  // start before end_pos, in seq order.
  virtual void for_each_token_list(int64_t conversation_id, int64_t end_pos,
                                   const std::function<void(int64_t chunk_id, int64_t n_tokens,
                                                            std::string_view tokens_json)>& f) = 0;

  // The store
  // The store's schema version (SQLite: PRAGMA user_version; PostgreSQL: the
  // colikv_schema table's).
  virtual int schema_version() = 0;
  // Whether the backend's own JSON check (what the schema's CHECK applies)
  // accepts `text`.
  virtual bool is_json(const std::string& text) = 0;

  // Models
  // The model_id stored for a signature text; none when there is none.
  virtual std::optional<int64_t> find_model_id(const std::string& signature) = 0;
  // A model row as stored (unchecked: Store::Impl::model_by_id checks it);
  // none when there is none.
  virtual std::optional<StoredModel> read_model(int64_t model_id) = 0;
  // Write transaction. Inserts a model row (the signature must be new).
  virtual void insert_model(const ModelSignature& sig, int64_t chunk_tokens, int64_t now_ms) = 0;

  // Chunks
  // A conversation's chunk list in seq order (empty for none or no such id).
  virtual std::vector<ChunkSummary> chunk_list(int64_t conversation_id) = 0;
  // The entries of a chunk list that start before end_pos (chunks.first_pos),
  // in seq order, for a load; valid in the current transaction. A backend
  // that reads rows with their payloads reads none larger than
  // max_payload_bytes (no chunk of the model is): such a row's payload reads
  // as missing, after its recorded size (which the scan rejects first).
  // While the cursor lives, no other method may be called.
  virtual std::unique_ptr<ChunkCursor> read_chunks(int64_t conversation_id, int64_t end_pos,
                                                   int64_t max_payload_bytes) = 0;
  // A chunk's token ids as stored (JSON text); none when the chunk is missing.
  virtual std::optional<std::string> chunk_tokens_json(int64_t chunk_id) = 0;
  // A chunk's stored fields and payload; none when the chunk is missing.
  virtual std::optional<ChunkContent> read_chunk(int64_t chunk_id) = 0;
  // Content digests of the chunks of a model stored with values at chain hash `chain`.
  virtual std::vector<ChunkHash> digests_at(int64_t model_id, const ChunkHash& chain) = 0;
  // The chunk of the model stored under `key`; none when there is none. In
  // a write transaction, no other writer frees or evicts it until this one
  // ends (an evicted one: none links it meanwhile, so its values can come back).
  virtual std::optional<KeyedChunk> find_chunk(int64_t model_id, const ChunkHash& key) = 0;
  // Write transaction. Deletes those of the chunks no chunk list names,
  // committed or being linked by another writer, and that no writer holds
  // (SQLite's objects first, sqlite_turn.cpp). A backend whose writers
  // run at once may leave one that another writer holds for later (it never
  // waits for it here): free_queued_chunks, or its own commit, frees it.
  virtual void free_unused_chunks(const std::vector<int64_t>& chunk_ids) = 0;
  // Outside any transaction: frees what free_unused_chunks left for later
  // and no chunk list names by now, waiting for the writers that hold it;
  // best effort (what it cannot free stays for the next call). gc and vacuum
  // call it. SQLite has no queue: there it reclaims the held chunks of
  // writers certainly dead (reclaim_dead_writers), as its writable open does.
  virtual void free_queued_chunks() {}

  // Verify and stats: reads, in the caller's snapshot.
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
  // Chunks writers hold mid-turn (hold_chunk); 0 where none are held.
  virtual int64_t held_chunk_count() { return 0; }
  // Bytes of the write-ahead log file beside the store (in file_bytes); 0 where none.
  virtual int64_t wal_bytes() { return 0; }
  // Write transaction. Lets the server role `role` use this catalog's tenant
  // under row-level security (granted), or no longer (not granted): see
  // Store::grant_tenant. A backend without roles throws kUnsupported.
  virtual void set_tenant_role(const std::string& role, bool granted, int64_t now_ms);

  // Tenant limits (TenantLimits), of this catalog's tenant
  // The limits as stored, unchecked; a stored value that is not an integer
  // is kCorrupt.
  virtual TenantLimits tenant_limits() = 0;
  // Write transaction. Sets both limits (none: NULL).
  virtual void set_tenant_limits(const TenantLimits& limits) = 0;
  // Write transaction. Keeps other writers from setting the tenant's limits
  // until this one ends, for a read-modify-write of them; appends, which only
  // read them, are not held up. Nothing where writers serialize.
  virtual void lock_tenant_limits() {}
  // The tenant's conversations last used before used_before_ms (strictly),
  // least recently used first. In a write transaction, those another writer
  // is using are left out, and the rest locked for deleting.
  virtual std::vector<IdleConversation> idle_conversations(int64_t used_before_ms) = 0;

  // Eviction
  // Which conversations an eviction weighs and evicts: all of the store's
  // (the byte budget of Options::max_store_bytes), or this catalog's tenant's
  // (Store::gc; tenants share no chunk, so its bytes are its own).
  enum class Scope { kStore, kTenant };
  // The payload bytes of the chunks in scope: all chunks, or those the
  // tenant's conversations use.
  virtual int64_t stored_payload_bytes(Scope scope) = 0;
  // Conversations in scope, least recently used first, stepped lazily;
  // chunks (not conversations) may change while it runs.
  virtual void visit_least_recent(Scope scope, const PrefixIndex::ConversationVisitor& f) = 0;
  // A conversation's chunks that still hold values, and their payload sizes.
  virtual std::vector<PayloadChunk> payload_chunks(int64_t conversation_id) = 0;
  // Write transaction. Locks those of the chunks no other writer holds
  // (linking, freeing or evicting it) and returns them: until this
  // transaction ends, none of them is linked anew, so chunk_users counts
  // read after it stay true. The others are left alone (an eviction keeps
  // them). Where writers serialize, all of them.
  virtual std::vector<int64_t> claim_chunks(const std::vector<int64_t>& chunk_ids) { return chunk_ids; }
  // How many chunk-list entries name the chunk.
  virtual int64_t chunk_users(int64_t chunk_id) = 0;
  // Write transaction. Drops a chunk's payload; its row and token ids stay.
  virtual void evict_payload(int64_t chunk_id) = 0;
  // Chunks of this catalog's tenant whose payload was evicted.
  virtual int64_t evicted_chunk_count() = 0;
  // Conversations of this catalog's tenant with at least one evicted chunk.
  virtual int64_t evicted_conversation_count() = 0;
  // What compact did beyond the file sizes the store measures itself.
  struct CompactOutcome {
    int64_t reclaimable_bytes = -1;  // free space inside the store before it; -1: not known
    std::string held_back;           // empty, or why space it freed stays in the files for now
  };
  // Outside any transaction. Gives the store's free space back to the file
  // system. Never waits for a reader while it holds the write lock, and lets
  // writers in between steps of about step_bytes each where the backend can
  // (SQLite: incremental vacuum; a store made before it converts with one full
  // VACUUM, which writers wait for). Needs free disk space about the store's
  // size for that full VACUUM (kDiskFull).
  // progress(done, total) as it goes, in bytes given back (a server's
  // rewrite: once, at its end); may be empty.
  virtual CompactOutcome compact(const std::string& what, int64_t step_bytes,
                                 const std::function<void(int64_t, int64_t)>& progress) = 0;
  // Outside any transaction, after a gc's transaction: gives free pages back in
  // steps as compact does, without its full rewrite. Nothing for a server,
  // which manages its files.
  virtual void release_free_pages(const std::string& what, int64_t step_bytes,
                                  const std::function<void(int64_t, int64_t)>& progress) = 0;
  // After a commit that deleted rows (delete, gc): makes their bytes
  // unreadable in the store's files, as far as the backend allows (SQLite:
  // sqlite/sqlite_erase.h; PostgreSQL: VACUUM of the tables, pg_catalog.cpp). Returns
  // false when a reader holding an older snapshot kept it from finishing
  // within the busy timeout: then it is tried again by the next call and when
  // the store closes. Never throws: the delete itself has committed.
  virtual bool erase_deleted(const std::string& what) = 0;
  // Bytes the store takes on disk (SQLite: the file and its WAL; PostgreSQL:
  // its tables and indexes).
  virtual int64_t file_bytes() = 0;
  // The local files the store keeps, as suffixes of its location ("" for the
  // location itself); none for a store on a server.
  virtual std::vector<std::string> file_suffixes() const = 0;

  // The prefix index over this catalog's connection; lives as long as the
  // Catalog, read in the caller's snapshot.
  virtual PrefixIndex& prefix_index() = 0;

  // Waits for the backend's own background work that would slow the write
  // about to begin. raw_bytes: about what it writes, uncompressed (SQLite:
  // a large write waits for a running WAL checkpoint, a small one at most a
  // few ms).
  virtual void wait_before_write(int64_t raw_bytes) = 0;
};

// Opens (or creates) the store at `location` with its backend: a file path
// is SQLite's, the embedded default. Throws as Store's constructor documents.
std::unique_ptr<Catalog> open_catalog(const std::string& location, const Options& options);

// The schema version this library writes in the stores of the backend that
// `location` names (catalog_factory.cpp): PostgreSQL's for a postgresql://
// URI, SQLite's for anything else (a path, or ""). Throws kInvalidArgument
// for a URI when the PostgreSQL backend is not built.
int latest_schema_version_for(const std::string& location);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CATALOG_H
