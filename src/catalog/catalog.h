// What the store needs from a database, free of any database's types: the
// rows of conversations, models and chunks, chunk lists, and transactions;
// with its scans, its maintenance and its prefix index.
// The SQLite implementation is src/sqlite/sqlite_catalog; a second backend
// implements the same interface.
//
// The rules every method of Catalog and PrefixIndex follows, unless its
// comment says otherwise (as leveldb's env.h states its own):
// - Errors: a method throws colikv::Error only, never a backend's own
//   exception (SQLiteCpp's, ...): each backend translates its own in its own
//   files (SQLite codes, SQLSTATEs to ErrorCode), and names it once by
//   errors() (backend_error.h): the `what` of the outermost open
//   transaction (begin's), else the store; in a read snapshot, a stored
//   value out of range is kCorrupt. So the caller adds no context at each
//   call: the `what` it begins a transaction with names the operation. A
//   value that is absent is an empty optional, never an error.
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

#include "catalog/backend_error.h"
#include "catalog/catalog_maintenance.h"
#include "catalog/catalog_rows.h"
#include "catalog/catalog_scans.h"
#include "colikv/options.h"
#include "catalog/prefix_index.h"
#include "catalog/turn_edit.h"

namespace colikv {
namespace detail {

// The rows of conversations, models and chunks, and transactions, here; the
// scans (verify, stats) in catalog_scans.h, maintenance (limits, eviction,
// compaction) in catalog_maintenance.h, the prefix index in prefix_index.h.
class Catalog : public CatalogScans, public CatalogMaintenance {
 public:
  ~Catalog() override = default;

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
  // kWriteIfFree: a kWrite that waits for no writer: null when another
  // holds the store's write lock (SQLite), and always null where writers
  // lock rows instead (PostgreSQL: whether one must be waited for shows only
  // at the row). Nested in an open transaction it is a kWrite.
  enum class Access { kRead, kWrite, kWriteIfFree };
  // `what` names the operation in error messages. A kWrite, and each lock it
  // takes, waits up to Options::busy_timeout_ms for another writer (then kBusy). Nested calls
  // are savepoints of the open transaction: an inner rollback undoes only
  // the inner work.
  virtual std::unique_ptr<Transaction> begin(Access access, const std::string& what) = 0;
  // How many write transactions and savepoints of this catalog ended without
  // their commit. A row read inside one may be gone, and its id another
  // row's: SQLite gives a rolled-back row's id to the next row inserted. A
  // backend whose ids are never handed out twice (PostgreSQL's sequences)
  // may answer 0 always.
  virtual uint64_t write_rollbacks() const = 0;

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
  // Each of the token lists (JSON text) of the entries of a chunk list from
  // seq from_seq on that start before end_pos, in seq order; an entry that
  // names a missing chunk is left out (its caller compares what it got with
  // the chunk list or the count).
  virtual void for_each_token_list(int64_t conversation_id, int64_t from_seq, int64_t end_pos,
                                   const std::function<void(int64_t chunk_id, int64_t n_tokens,
                                                            std::string_view tokens_json)>& f) = 0;

  // The store
  // The store's schema version (SQLite: PRAGMA user_version; PostgreSQL: the
  // colikv_schema table's).
  virtual int schema_version() = 0;

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

  // What this catalog's errors are named by; the store sets its name once
  // opened, the backend's begin the operation (backend_error.h).
  ErrorContext& errors() { return errors_; }
  const ErrorContext& errors() const { return errors_; }

  // The prefix index over this catalog's connection; lives as long as the
  // Catalog, read in the caller's snapshot.
  virtual PrefixIndex& prefix_index() = 0;

 private:
  ErrorContext errors_;
};

struct StoreCounters;  // metrics/metrics.h

// Opens (or creates) the store at `location` with its backend: a file path
// is SQLite's, the embedded default. Throws as Store's constructor documents.
// What its connections do for the Store that opens it (lock waits, chunks
// reclaimed) is counted in `counters`, the Store's (may be null).
std::unique_ptr<Catalog> open_catalog(const std::string& location, const Options& options,
                                      StoreCounters* counters = nullptr);

// The schema version this library writes in the stores of the backend that
// `location` names (catalog_factory.cpp): PostgreSQL's for a postgresql://
// URI, SQLite's for anything else (a path, or ""). Throws kInvalidArgument
// for a URI when the PostgreSQL backend is not built.
int latest_schema_version_for(const std::string& location);

// Whether `text` is JSON as every backend's metadata check takes it: SQLite's
// json_valid, the schema's CHECK there, and what PostgreSQL's catalog applies
// too, so that both accept exactly the same metadata (sqlite_util.cpp). Never
// throws but to allocate.
bool is_json(const std::string& text);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CATALOG_H
