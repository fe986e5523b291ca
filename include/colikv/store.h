// colikv/store.h: the C++ API. A Store is one database, a SQLite file (the
// embedded default) or a PostgreSQL schema, holding any number of
// conversations, each the KV cache of one chat, under a model signature.
//
// Error model: every failing call throws colikv::Error (error.h) and changes
// nothing. Thread safety: a Store may be shared by threads (calls are
// serialized on it); many Stores, in many threads or processes, may open the
// same file: readers never block, one writer at a time, and a writer waits up
// to Options::busy_timeout_ms for another's lock. A Store belongs to the
// process that opened it: in a child forked from it every call throws
// kInvalidArgument and the destructor frees nothing. A child may open a Store
// of its own only when the parent had none open at the fork (or after exec):
// a parent's thread may have held a lock of SQLite's or colikv's at the fork.
#ifndef COLIKV_STORE_H
#define COLIKV_STORE_H

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "colikv/error.h"
#include "colikv/export.h"
#include "colikv/metrics.h"
#include "colikv/model.h"
#include "colikv/options.h"

namespace colikv {

namespace detail {
struct StoreAccess;
}  // namespace detail

// The engine's KV buffers, read by append: Lc[layer] + pos*kv_lora,
// Rc[layer] + pos*qk_rope, and Ic[layer] + pos*index_hd for the layers that
// have an indexer. Lc and Rc have n_layers entries; Ic has n_layers entries,
// exactly n_indexed of them non-null (Ic itself may be null when n_indexed is 0).
struct KvSource {
  const float* const* Lc = nullptr;
  const float* const* Rc = nullptr;
  const float* const* Ic = nullptr;
};

// The same buffers, written by load.
struct KvTarget {
  float* const* Lc = nullptr;
  float* const* Rc = nullptr;
  float* const* Ic = nullptr;
};

// One conversation's row, as list() and info() return it.
struct ConversationInfo {
  std::string id;            // the caller's id
  ModelSignature model;
  std::string precision = "f32";  // "f32" (exact) or "bf16" (Options::new_conversation_precision)
  int64_t tokens = 0;        // committed token count
  std::string title;         // "" unless set
  std::string metadata;      // JSON text; "{}" unless set
  std::string parent;        // id it was forked from; "" if none or deleted
  int64_t forked_at = 0;     // tokens taken from the parent when forked
  int64_t created_ms = 0;    // Unix time in milliseconds
  int64_t updated_ms = 0;    // last append, truncate, rename or edit
  int64_t last_used_ms = 0;  // last load, append or fork from it
  int64_t raw_bytes = 0;     // its .coli_kv record bytes: tokens * record_bytes
  int64_t stored_bytes = 0;  // bytes of the chunk blobs it references (shared ones counted fully)
  // Some of its KV data was evicted under the byte budget (Options::max_store_bytes,
  // gc): its token ids are all kept; load fails with kEvicted and returns them.
  bool evicted = false;
};

struct ListOptions {
  int64_t limit = 100;  // at most this many rows; default 100
  int64_t offset = 0;   // skip this many rows first; default 0
};

// Progress of a long call: done and total in tokens.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

// One problem verify() found.
struct VerifyProblem {
  std::string conversation;  // "" for a problem of the file or of an unreferenced chunk
  int64_t chunk_seq = -1;    // index in the conversation's chunk list; -1 if none
  int64_t chunk_id = -1;     // chunks.chunk_id; -1 if none
  int64_t first_pos = -1;    // positions [first_pos, end_pos) affected; -1 if none
  int64_t end_pos = -1;
  std::string what;          // one line
};

// A warning of verify(), not a problem: a chunk written before schema 5 that
// conversations of different fork lineage share. Up to schema 4 a chunk was
// shared by its token ids alone, so their values were never compared: when
// they differed, all but the first writer load another conversation's values.
// Those values cannot be told apart or repaired; re-saving such a
// conversation from its engine (truncate to 0 and append) makes it its own.
struct UncomparedShare {
  int64_t chunk_id = -1;
  int64_t first_pos = -1;  // its positions [first_pos, end_pos)
  int64_t end_pos = -1;
  std::vector<std::string> conversations;  // those that use it, by name
};

struct VerifyReport {
  int64_t conversations = 0;  // conversations checked
  int64_t chunks = 0;         // distinct chunks read and decoded
  int64_t bytes = 0;          // decoded bytes checked
  std::string integrity;      // PRAGMA integrity_check's result ("ok" when sound)
  std::vector<VerifyProblem> problems;
  std::vector<UncomparedShare> uncompared_shares;  // warnings: they do not make ok() false
  bool ok() const { return problems.empty(); }
};

// Sizes of one model's data, or of the whole store (model.n_layers == 0).
// logical: what .coli_kv files of every conversation would take (tokens * record_bytes);
// unique: the same for distinct chunks only; stored: bytes of the distinct chunk blobs.
struct UsageStats {
  ModelSignature model;
  int64_t chunk_tokens = 0;
  int64_t conversations = 0;
  int64_t tokens = 0;
  int64_t chunks = 0;
  int64_t logical_bytes = 0;
  int64_t unique_bytes = 0;
  int64_t stored_bytes = 0;
  int64_t saved_by_sharing() const { return logical_bytes - unique_bytes; }
  int64_t saved_by_compression() const { return unique_bytes - stored_bytes; }
};

struct StoreStats {
  std::vector<UsageStats> models;  // one per model signature, in creation order
  UsageStats total;
  int64_t file_bytes = 0;  // the database file plus its WAL
  int64_t evicted_conversations = 0;  // conversations with evicted KV data (ConversationInfo::evicted)
  int64_t evicted_chunks = 0;         // chunks whose payload was evicted (token ids kept)
};

// A tenant of the store (Options::tenant) and what its conversations hold.
struct TenantInfo {
  std::string name;            // "" for the default tenant
  int64_t conversations = 0;
  int64_t stored_bytes = 0;    // payload bytes of the chunks its conversations use
  TenantLimits limits;         // its quota and retention (none by default)
};

// What match() found: the conversation holding the longest prefix of a prompt.
struct PrefixMatch {
  std::string id;        // "" when nothing matches
  int64_t tokens = 0;    // leading prompt tokens it holds; 0 when nothing matches
  // Of those, how many can be loaded (load with limit = loadable): less than
  // tokens when KV data of the match was evicted; those positions must be
  // recomputed (their token ids are the prompt's).
  int64_t loadable = 0;
  bool evicted() const { return loadable < tokens; }
};

// What an eviction (gc, or the budget after an append) did.
struct EvictionReport {
  int64_t stored_bytes_before = 0;  // chunk payload bytes before
  int64_t stored_bytes_after = 0;   // and after
  int64_t freed_bytes = 0;          // before - after
  int64_t chunks = 0;               // chunk payloads evicted
  std::vector<std::string> conversations;  // conversations that became evicted, least recently used first
  bool fits = true;  // stored_bytes_after <= the budget (false when kept data alone exceeds it)
};

// What an expiry (Store::expire, or a tenant's retention after an append) deleted.
struct ExpiryReport {
  std::vector<std::string> conversations;  // deleted whole, least recently used first
  int64_t chunks = 0;                      // chunks deleted with them (no other conversation linked them)
  int64_t freed_bytes = 0;                 // payload bytes of those chunks
};

struct VacuumReport {
  int64_t file_bytes_before = 0;  // database file plus WAL
  int64_t file_bytes_after = 0;
  // Free space inside the store when the vacuum began: what it could give
  // back. -1 when the backend does not say (a PostgreSQL store).
  int64_t reclaimable_bytes = -1;
  // Empty when the files were cut to what the store holds; otherwise why some
  // space stays in them for now (a reader's older snapshot keeps the WAL).
  std::string held_back;
};

// A store's location is a file path (SQLite, the embedded default) or a
// PostgreSQL connection URI (libpq's syntax: postgresql://USER@HOST:PORT/DB,
// or postgres://..., the scheme in any case), accepted wherever a store path
// is. Keep the password out of it: libpq reads PGPASSWORD, ~/.pgpass and
// service files (docs/postgres.md). A libpq keyword/value string
// ("host=... dbname=...") is refused with kInvalidArgument, never taken as a
// file name.
COLIKV_API bool is_postgres_location(const std::string& location);
// The location as messages show it: a URI or keyword/value string as libpq
// parses it, with every secret (password, sslpassword) shown as *** and
// control characters percent-encoded (one libpq cannot parse: its scheme
// only); a path unchanged.
COLIKV_API std::string shown_store_location(const std::string& location);
// The file a SQLite store location leads to: a `file:` URI decoded to its
// path (as Options::create_staged reads it), then symbolic links followed to
// the name they end at, which need not exist; "" for a postgresql://
// location. Throws kInvalidArgument for a `file:` URI that names another host
// or no file, or a loop of symbolic links.
COLIKV_API std::string store_file_of(const std::string& location);

// Conversation ids, titles and metadata are text without a NUL byte: every
// call given one that holds a NUL throws kInvalidArgument and changes
// nothing, on both backends (PostgreSQL's text cannot hold one).
class COLIKV_API Store {
 public:
  // Opens (or creates) the store at path (a file, or a postgresql:// URI)
  // and applies pending migrations.
  // Throws kNotFound (missing and !create_if_missing), kVersion (schema newer
  // than this library), kCorrupt (not a colikv store), kReadOnly, kIO, kBusy,
  // kInvalidArgument (a libpq keyword/value string, or a URI libpq cannot
  // parse; a postgresql:// URI when the library was built without the
  // PostgreSQL backend, COLIKV_WITH_POSTGRES=OFF, naming that option).
  // With Options::create_staged the store is new and built aside until
  // publish(): kConflict when the location's file exists, and the other
  // errors that option lists.
  explicit Store(const std::string& path, const Options& options = Options());
  // Waits for the calls other threads have in flight on this Store (one
  // blocked in append_async at the queue bound queues its turn), refusing with
  // kInvalidArgument those that start meanwhile (one that starts after the
  // destructor returned is undefined, as for any object), then commits every
  // queued turn; an error committing one is not reported: call wait() first.
  // In a forked child it waits for and frees nothing (the memory is leaked).
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;

  const std::string& path() const;
  const Options& options() const;
  // The store's schema version: PRAGMA user_version of a SQLite file, the
  // colikv_schema table's on PostgreSQL. Throws Error as a read does (kIO,
  // kCorrupt; a server's errors) naming the store.
  int schema_version() const;
  // The schema version this library writes in a SQLite file: what a new or
  // migrated store file's schema_version() is. Never throws.
  static int library_schema_version();
  // The same for the backend that `location` names (a path: SQLite's; a
  // postgresql:// URI: PostgreSQL's, which is numbered apart). Reads nothing.
  // Throws kInvalidArgument for a postgresql:// location when the library
  // was built without the PostgreSQL backend (COLIKV_WITH_POSTGRES=OFF).
  static int library_schema_version(const std::string& location);

  // For a Store opened with Options::create_staged: gives the new store its
  // name. Commits every queued turn first (as wait() does), closes the store,
  // which folds its WAL into the file, then links the file to the location's
  // name, atomically and never replacing a file (link(2); rename with
  // RENAME_NOREPLACE on a filesystem without hard links), and syncs the
  // directory. Whether it returns or throws, this Store is closed afterwards:
  // every call on it but path(), options() and the destructor fails with
  // kInvalidArgument; open the location again to use the store. On failure
  // the new store is discarded, its temporary files removed, and nothing has
  // the location's name. Throws what a queued turn's commit met (as wait()),
  // kConflict when a file of that name appeared meanwhile (it is left as it
  // is), kDiskFull when the WAL could not be folded into the file for want of
  // space (a new store needs room for its data twice until then), kIO; and
  // kInvalidArgument, changing nothing, for a Store not opened with
  // create_staged or published already.
  void publish();

  // Committed tokens of a conversation; 0 when it does not exist.
  int64_t count(const std::string& id);
  bool exists(const std::string& id);

  // Creates an empty conversation. Throws kConflict if the id exists.
  void create(const std::string& id, const ModelSignature& model,
              const std::string& title = "", const std::string& metadata = "{}");

  // Persists positions [committed, len) in one transaction, creating the
  // conversation if absent. Requires tokens[0, committed) to equal the stored
  // tokens (else kDiverged with the first differing position: truncate first),
  // the model to equal the conversation's (else kModelMismatch), every token in
  // [0, vocab) and len >= committed (else kInvalidArgument). If another writer
  // commits to the conversation meanwhile, throws kConflict. len == committed
  // is a no-op.
  void append(const std::string& id, const ModelSignature& model, const int32_t* tokens,
              int64_t len, const KvSource& kv);

  // append without waiting for the commit: validates the turn, copies
  // positions [committed, len) out of kv (committed: what is stored plus what
  // is queued for id) and returns; the caller may overwrite its buffers at
  // once. A background thread of this Store encodes and commits queued turns
  // in order, one transaction each, as append does. Throws here, queueing
  // nothing, what can be checked before queueing: kModelMismatch, kDiverged
  // (against the stored or queued tokens), kInvalidArgument, kReadOnly; and
  // the error of an earlier queued turn of id that wait() has not reported
  // yet. Blocks while the queued turns would take more than
  // Options::max_queued_bytes. An error met while committing (kDiskFull,
  // kConflict when another writer changed the conversation, ...) is reported
  // by wait(); the turns of id queued after the failed one are dropped, and
  // the store holds the last turn that committed. Every other call on id
  // (count, load, truncate, write, fork, remove, info, export, ...) first
  // waits for id's queued turns; calls on no single conversation (list,
  // stats, gc, match, import, ...) wait for all; the destructor commits
  // everything queued. A crash loses the queued turns not yet committed,
  // never part of one.
  void append_async(const std::string& id, const ModelSignature& model, const int32_t* tokens, int64_t len,
                    const KvSource& kv);

  // Waits until every turn queued for id (every conversation's, without id)
  // is committed or dropped, then throws the first error one of them met
  // since the last wait (and forgets it), or returns: every turn queued
  // before the call is then committed and as durable as Options::synchronous
  // makes a commit.
  void wait(const std::string& id);
  void wait();

  // Rewrites a conversation from position `from` on, in one transaction: keeps
  // [0, from), which must equal tokens[0, from) (else kDiverged with the first
  // differing position, and nothing changes), and replaces everything after it
  // with positions [from, len) of the caller's buffers; [0, from) keeps its
  // stored values exactly (unlike append, which re-encodes the rows of a
  // tail it re-packs into a full chunk from the caller's buffers). So a stored
  // conversation longer than the caller's, or one whose tail differs, is
  // rewritten atomically where truncate then append would commit twice.
  // append(id, ...) is write(id, ..., count(id), len, kv). Creates the
  // conversation when absent (then from must be 0). Throws kInvalidArgument
  // (from < 0, from > len, from > the committed count), and what append throws.
  void write(const std::string& id, const ModelSignature& model, const int32_t* tokens, int64_t from, int64_t len,
             const KvSource& kv);

  // Fills tokens[0, n) and the KV buffers for positions [0, n), where n is the
  // committed count, or limit when 0 <= limit < count. Returns n. Throws
  // kNotFound, kModelMismatch (naming both signatures), kTooLarge when n >
  // max_tokens, kCorrupt when a chunk fails its checks (no byte of that chunk
  // reaches the buffers; earlier chunks may have been written).
  int64_t load(const std::string& id, const ModelSignature& model, int32_t* tokens,
               int64_t max_tokens, const KvTarget& kv, int64_t limit = -1);

  // Fills positions [from, to) of the committed conversation: tokens[from, to)
  // and the KV buffers' rows from..to-1 (addressed as load addresses them);
  // nothing before `from` is written, except token ids on kEvicted. Returns
  // to - from. Throws what load throws, and kInvalidArgument unless
  // 0 <= from <= to <= the committed count.
  int64_t load_range(const std::string& id, const ModelSignature& model, int64_t from, int64_t to, int32_t* tokens,
                     const KvTarget& kv);

  // The committed token ids. Throws kNotFound, kCorrupt.
  std::vector<int32_t> tokens(const std::string& id);

  // Keeps the first len tokens (len <= count, else kInvalidArgument) and frees
  // the chunks no other conversation uses.
  void truncate(const std::string& id, int64_t len);

  // Deletes a conversation and frees the chunks no other conversation uses.
  // On SQLite, once it returns no byte it deleted is left in the store's
  // files (database, -wal): it zeroes what it frees and then checkpoints the
  // WAL into the database file and cuts it to zero bytes. A reader of another
  // connection holding an older snapshot (one that can still read the
  // conversation) keeps those bytes: remove waits up to
  // Options::busy_timeout_ms for it without holding the write lock, then
  // returns with the delete committed; the bytes go at the next remove or gc
  // or at this Store's close after that reader has let go. On PostgreSQL it
  // runs a plain VACUUM of the tables, which leaves the bytes in their free
  // space until reused or vacuum() (docs/postgres.md). Throws kNotFound,
  // kReadOnly, kBusy, kIO, kDiskFull; after the commit it throws nothing.
  void remove(const std::string& id);

  // Creates dst holding the first len tokens of src (len < 0: all of them),
  // sharing src's chunks; only the chunk the cut falls inside is re-encoded
  // (its first positions, as a tail piece).
  // Throws kNotFound (src), kConflict (dst exists), kInvalidArgument (len > count).
  void fork(const std::string& src, const std::string& dst, int64_t len = -1);

  // Gives conversation old_id the id new_id (old_id == new_id: only checks it
  // exists). Throws kNotFound (old_id), kConflict (new_id is taken),
  // kInvalidArgument (new_id empty), kReadOnly, kBusy, kIO.
  void rename(const std::string& old_id, const std::string& new_id);
  // Throws kNotFound, kReadOnly, kBusy, kIO.
  void set_title(const std::string& id, const std::string& title);
  // metadata must be valid JSON text (else kInvalidArgument). Throws kNotFound,
  // kReadOnly, kBusy, kIO.
  void set_metadata(const std::string& id, const std::string& metadata_json);

  // The conversation's row and sizes. Throws kNotFound, kCorrupt (a row no
  // colikv writes: a bad model row, counts that overflow), kIO.
  ConversationInfo info(const std::string& id);
  // Most recently used first. Throws kCorrupt, kIO as info does.
  std::vector<ConversationInfo> list(const ListOptions& options = ListOptions());
  // Conversations in the store. Throws kIO (a server's errors too).
  int64_t conversation_count();

  // Reads and checks every chunk of one conversation (or of all when id is
  // ""): checksum, content digest, decompression, sizes, token ranges,
  // chunk-list completeness against the count; and PRAGMA integrity_check for
  // the whole file. Only this Store's tenant's conversations are read; the
  // file's own checks (integrity, chunks no conversation uses, conversations
  // whose tenant the store does not hold) are the whole
  // store's whichever tenant asks. Lists the chunks shared without a content comparison
  // (UncomparedShare; of id's conversation only when id is given). Never
  // throws for problems in the data: it reports them. Throws kNotFound for a
  // missing id.
  VerifyReport verify(const std::string& id = "", const ProgressFn& progress = ProgressFn());

  // Sizes by model and in total, from one read snapshot, of this Store's
  // tenant (Options::tenant): its conversations and the chunks they use; a
  // tenant other than the default lists only the models it holds data of.
  // file_bytes is the whole store's (a tenant does not isolate the file's
  // size). Throws kCorrupt (a model row or counts no colikv writes), kIO.
  StoreStats stats();

  // Every tenant of the store, by name (bytewise), whichever tenant this
  // Store is opened for: the operator's view (colikv tenants), from one read
  // snapshot. Throws kIO.
  std::vector<TenantInfo> tenants();

  // This Store's tenant's limits (TenantLimits), as stored. Throws kCorrupt
  // (a stored limit no colikv writes: negative, not an integer), kIO.
  TenantLimits tenant_limits();
  // Replaces this Store's tenant's limits named by `fields` (both by
  // default) with those of `limits`, keeping the others as stored, in one
  // write transaction; applied from the next append or gc on (by every
  // process), nothing is evicted or deleted by this call. Throws
  // kInvalidArgument, changing nothing, for a negative max_bytes or
  // max_idle_ms among `fields`, or no field named; kReadOnly, kBusy, kIO,
  // kCorrupt (a kept field's stored value no colikv writes).
  void set_tenant_limits(const TenantLimits& limits, unsigned fields = kAllTenantLimits);
  // Deletes, whole, every conversation of this Store's tenant not used for
  // longer than max_idle_ms (now - last_used_ms > max_idle_ms), in one write
  // transaction, then erases their bytes from the store's files as remove()
  // does. Other tenants' conversations are never touched. Throws
  // kInvalidArgument (max_idle_ms < 0), kReadOnly, kBusy.
  ExpiryReport expire(int64_t max_idle_ms);
  // PostgreSQL: lets the server role `role` (an existing role; a group role
  // grants its members) read and write this Store's tenant (Options::tenant)
  // and no other, whatever client it connects with, psql included: the
  // store's tables get row-level security, turned on at the first grant
  // (docs/postgres.md, "One role per tenant"). Run by the store's owner (the
  // role owning its tables, or a superuser), who goes on seeing every tenant.
  // A role may hold several tenants; granting one it holds changes nothing.
  // In one write transaction; on failure nothing changes. Requires a
  // writable Store (open it with create_tenant_if_missing to grant a tenant
  // not made yet). Throws kUnsupported on a SQLite store (it has no roles)
  // or a server older than PostgreSQL 15; kNotFound for a role the server
  // does not have; kInvalidArgument for an empty role, or one that sees every
  // tenant anyway (a superuser, BYPASSRLS, a member of the owner); kReadOnly
  // when the caller is not the owner or the Store is read-only; kBusy, kIO.
  void grant_tenant(const std::string& role);
  // Undoes grant_tenant for this Store's tenant; once `role` holds no tenant
  // of the store, the privileges grant_tenant gave it are revoked too (also
  // any given to it by hand on those tables). Throws kNotFound when the role
  // does not exist or holds no grant of this tenant, and what grant_tenant
  // throws otherwise.
  void revoke_tenant(const std::string& role);

  // Longest-prefix lookup: the conversation of `model` holding the longest
  // prefix of tokens[0, len), and how many tokens it holds. Ties go to the most
  // recently used. Never crosses models; only equal token ids count. It
  // matches by token ids only: the conversation found may hold other values
  // for them than the caller's engine would compute (another build, a
  // non-deterministic kernel); loading it returns its own values, exactly. Evicted
  // conversations match too (their token ids are kept): PrefixMatch::loadable
  // says how much of the match can be loaded. Time grows with len (a hash and
  // an index probe per chunk of the prompt, a few probes inside the next
  // chunk), not with the number of conversations. Does not change last-used
  // times. Throws kInvalidArgument for an invalid model or a null tokens with len > 0.
  PrefixMatch match(const ModelSignature& model, const int32_t* tokens, int64_t len);

  // match() among what can be loaded: the longest prefix of tokens[0, len)
  // that some conversation holds with all of its KV data (loadable ==
  // tokens), the most recently used such one on a tie. An engine adopting a
  // prefix uses this one: the longest match may be an evicted conversation
  // while another still holds a shorter prefix with its values. Each chunk of
  // the longer match that no holder can load costs a few more probes, and
  // each probe skips the evicted holders one by one.
  PrefixMatch match_loadable(const ModelSignature& model, const int32_t* tokens, int64_t len);

  // Prefix adoption in one read snapshot: match_loadable(model, prompt, len),
  // then, when the match holds more than `from` tokens, load_range of its
  // positions [from, match.tokens) into tokens and kv (addressed as load_range
  // addresses them; nothing before `from` is written). Another writer cannot
  // change the matched conversation in between, and the loaded token ids are
  // compared with prompt[from, match.tokens) before this returns. Returns the
  // match (id "" and tokens 0 when nothing matches); it loaded
  // max(0, match.tokens - from) positions. Throws kInvalidArgument unless
  // 0 <= from <= len (or for a null prompt with len > 0, or null buffers when
  // rows are to be loaded), kCorrupt when a loaded token differs from the
  // prompt's (the prefix index disagrees with the chunks: run verify), and
  // what match_loadable and load_range throw. Does not change last-used times.
  PrefixMatch adopt(const ModelSignature& model, const int32_t* prompt, int64_t len, int64_t from, int32_t* tokens,
                    const KvTarget& kv);

  // Evicts the KV data of the least recently used conversations of this
  // Store's tenant until the payloads of the chunks they use take at most
  // max_bytes (0: evict all), in one write transaction; other tenants'
  // conversations are never evicted by it (Options::max_store_bytes, the
  // store-wide budget, evicts across tenants). Evicted conversations keep their rows, metadata and token
  // ids; a chunk's payload is freed only when no kept conversation uses it.
  // A reader that is loading meanwhile (its own snapshot) is not affected.
  // An evicted payload's pages are freed; SQLite reuses them, and after the
  // eviction's transaction gc gives them back to the filesystem in steps of
  // about a chunk each (a store an older colikv made, without incremental
  // vacuum, keeps them until vacuum() turns it on).
  // When it evicted anything, the evicted values leave the store's files as a
  // remove's do (see remove). Throws kInvalidArgument (max_bytes < 0),
  // kReadOnly, kBusy.
  EvictionReport gc(int64_t max_bytes);

  // Gives the store's free space back to the filesystem. SQLite: in write
  // transactions of about a chunk each (a writer waits for one step at most);
  // a store made without incremental vacuum is instead rewritten once by
  // VACUUM, which turns it on (writers wait for that rewrite, and it needs
  // free disk space about twice the database's size: kDiskFull says how
  // much). Then copies the WAL back and resets it without holding the write
  // lock while a reader is in the way: when a reader's older snapshot keeps
  // the space in the WAL, the report's held_back says so (not an error).
  // PostgreSQL: VACUUM FULL of each of the store's tables; a role that does
  // not own them gets kReadOnly with the server's warning, naming the tables
  // skipped. Throws kReadOnly, kBusy, kDiskFull.
  VacuumReport vacuum();

  // What this Store counted since it opened (colikv/metrics.h), for its
  // tenant; process_metrics() sums every Store of the process. Reads
  // counters only: no query, no lock a writer holds. Throws kInvalidArgument
  // in a forked child or while the Store is being closed, as every call does.
  Metrics metrics();
  // What the store holds, every tenant's (as far as a PostgreSQL role may
  // see), by tenant and model, and its files' sizes and held chunks, from
  // one read snapshot (colikv/metrics.h, Gauges). Waits for every queued
  // turn, as stats() does. Throws kCorrupt, kIO.
  Gauges gauges();

  class COLIKV_LOCAL Impl;

 private:
  friend struct detail::StoreAccess;  // the library's own modules (import, export)
  std::unique_ptr<Impl> impl_;
};

}  // namespace colikv

#endif  // COLIKV_STORE_H
