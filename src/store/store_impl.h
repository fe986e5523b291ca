// The store's internals, shared by the library's own modules (the store_*.cpp
// files, coli_kv.cpp, copy.cpp, eviction.cpp, prefix_match.cpp). Not installed.
#ifndef COLIKV_SRC_STORE_IMPL_H
#define COLIKV_SRC_STORE_IMPL_H

#include <atomic>
#include <cassert>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store/call_gate.h"
#include "catalog/catalog.h"
#include "core/chunk_codec.h"
#include "colikv/store.h"
#include "core/thread_pool.h"
#include "core/wall_clock.h"
#include "metrics/metrics.h"
#include "catalog/staging.h"
#include "core/thread_annotations.h"

namespace colikv {

namespace detail {

class AsyncWriter;  // async_writer.h
class StoreHold;    // store_call.h
// True when this thread is in a call of s (store_call.h).
bool in_call(const Store::Impl& s) noexcept;

// A chunk produced for an append, on a worker thread.
struct ProducedChunk {
  std::vector<int32_t> tokens;  // the chunk's token ids
  EncodedChunk encoded;         // encoded.skipped: an equal chunk is stored already, nothing was compressed
  ChunkPrecision precision = ChunkPrecision::kF32;  // the conversation's: producers encode with it
  // Content digests of the chunks stored with values under this chunk's chain
  // hash: producers pass them to encode_chunk as skip_if.
  std::vector<ChunkHash> stored_digests;
};
using ChunkProducer = std::function<void(int64_t first_pos, int64_t n, ProducedChunk& out)>;

struct AppendRequest {
  std::string id;
  ModelSignature model;
  int64_t len = 0;                  // the conversation's length afterwards
  const int32_t* tokens = nullptr;  // all len tokens when known up front; null when the
                                    // producer supplies them (then the conversation must be new)
  ChunkProducer produce;            // fills positions [first_pos, first_pos + n)
  // Called before encoding starts when the append rewrites the tail's pieces
  // (chunk_layout.h): positions [tail_start, committed) are produced again.
  std::function<void(int64_t tail_start)> rewrite_tail;
  bool must_create = false;         // fail with kConflict if the id exists
  std::string title;                // for a new conversation
  std::string metadata = "{}";      // for a new conversation; valid JSON text
  ProgressFn progress;
  // Overrides Options::max_staged_bytes when >= 0 (import uses a small one so
  // that its memory stays bounded whatever the file size).
  int64_t max_staged_bytes = -1;
  // >= 0: the committed count this append expects (a queued turn's start);
  // another is kConflict, checked when the committed state is read (and,
  // through the generation, again in the transaction that links the turn).
  int64_t expected_count = -1;
};

// A stored chunk as read for a load or an export.
struct StoredChunk {
  int64_t seq = 0;
  int64_t chunk_id = 0;
  int64_t first_pos = 0;
  int64_t n_tokens = 0;  // in the chunk
  int64_t wanted = 0;    // positions of it the reader asked for (<= n_tokens)
  std::vector<int32_t> tokens;
  std::vector<uint8_t> payload;
  bool compressed = false;
  int64_t raw_size = 0;
  uint32_t checksum = 0;
  ChunkPrecision precision = ChunkPrecision::kF32;  // chunks.precision
  std::vector<uint8_t> out;  // the reader's own buffer, if it needs one
};

// Verifies and decodes a chunk into c.out as .coli_kv records (token id, then
// its rows), on a scan's worker thread: what an export writes (coli_kv.cpp).
void decode_records(const ModelSignature& m, StoredChunk& c);

struct ScanStart {
  ConversationRow conv;
  ModelRow model;
  int64_t n = 0;  // positions that will be delivered
};

// The writer of append_async over this store (store_async.cpp).
std::unique_ptr<AsyncWriter> make_async_writer(Store::Impl& s);

// What destroying a Store does (store_call.cpp): waits for the calls in
// flight on it (refusing new ones), then commits what is queued and frees it;
// in a process forked from the one that opened it, frees nothing (its threads
// and locks are the parent's) and leaks it.
void close_store(std::unique_ptr<Store::Impl>& impl) noexcept;

}  // namespace detail

class Store::Impl {
 public:
  Impl(const std::string& path, const Options& options);
  ~Impl();

  void append(const detail::AppendRequest& req) REQUIRES(mu);

  // Reads the first `limit` positions (all when limit < 0) of a conversation
  // from one read snapshot. on_start runs first; decode(chunk) runs on worker
  // threads and must verify and decode it (decode_chunk); consume(chunk) runs
  // on the calling thread in position order. When expect is not null, a
  // different model signature fails with kModelMismatch.
  void scan(const std::string& id, const ModelSignature* expect, int64_t limit,
            const std::function<void(const detail::ScanStart&)>& on_start,
            const std::function<void(detail::StoredChunk&)>& decode,
            const std::function<void(detail::StoredChunk&)>& consume) REQUIRES(mu);

  // "store <path>: conversation <id>" and the like, for messages.
  std::string where(const std::string& id = "") const;

  // Where the store is, as given to open: fixed once constructed, read on
  // any thread without a lock.
  const std::string& path() const { return path_; }
  // What the Store was opened with: fixed once constructed, read on any
  // thread without a lock (Store::options hands it out). The layout of the
  // conversations a call creates is new_layout()'s.
  const Options& options() const { return options_; }
  // Serializes calls on this Store (StoreCall); recursive, for a call made
  // from a progress callback of another call of the Store. Taken only by
  // StoreHold (StoreCall, StorePairCall) and by publish; public because the
  // annotations of the library's files name it (REQUIRES(s.mu)), which
  // clang checks for access.
  detail::RecursiveMutex mu;
  // What this Store counts (colikv/metrics.h), registered with the process's
  // totals while it is open. Atomic counters and histograms: any thread, no lock.
  detail::StoreCounters& counters() { return counters_; }
  // Counts of the call in progress: committed to counters when it returns,
  // dropped when it throws (StoreHold).
  detail::PendingCounts& pending() REQUIRES(mu) { return pending_; }
  // The precision and chunk size a conversation created in this call takes:
  // Options' as opened, unless a copy sets its source's for its call
  // (copy_conversation). Kept out of options(), which other threads read.
  struct NewLayout {
    Precision precision;
    int64_t chunk_target_bytes;
  };
  NewLayout& new_layout() REQUIRES(mu) { return new_layout_; }
  // The new store's temporary file, with Options::create_staged, which
  // publish claims (null afterwards, or without create_staged).
  detail::StagedStorePtr take_staged() REQUIRES(mu) { return std::move(staged_); }
  // Calls in flight (StoreCall, append_async, wait), which destroying the
  // Store waits for, and the process that opened it (close_store). Locks
  // its own mutex: any thread.
  detail::CallGate& gate() { return gate_; }
  // The workers of this Store's encoding and decoding: submit from any thread.
  detail::ThreadPool& pool() { return pool_; }
  // The background writer of append_async (async_writer.h), on a writable
  // store; null on a read-only one. Used by calls in the gate (gate()):
  // it is stopped (stop_async) only once the gate is closed.
  detail::AsyncWriter* async() const { return async_.get(); }
  // Publish, once the gate is closed and the queue committed: no call can
  // use the writer any more.
  void stop_async();
  // A tenant's retention deleted conversations in this call (apply_limits):
  // the outermost StoreCall erases their bytes once its transactions are done
  // (erase_if_due, which never throws).
  void erase_when_done() REQUIRES(mu) { erase_due_ = true; }
  void erase_if_due() noexcept REQUIRES(mu);
  // For code the analysis cannot follow into a call (a catalog's callback
  // into the call that runs it, on its thread): this thread is in a call of
  // this Store, so it holds mu.
  void assert_in_call() const ASSERT_CAPABILITY(mu) { assert(detail::in_call(*this)); }

  // The database, SQLite's by default, for a call: it holds mu (StoreCall).
  // None once published, when a call is refused (has_catalog).
  detail::Catalog& catalog() const REQUIRES(mu) { return *catalog_; }
  bool has_catalog() const REQUIRES(mu) { return catalog_ != nullptr; }
  void close_catalog() REQUIRES(mu) { catalog_.reset(); }

  // Helpers used by Store's methods.
  std::optional<detail::ConversationRow> find_conversation(const std::string& id) REQUIRES(mu);
  detail::ConversationRow get_conversation(const std::string& id) REQUIRES(mu);
  detail::ModelRow model_by_id(int64_t model_id) REQUIRES(mu);
  std::optional<detail::ModelRow> find_model(const ModelSignature& sig) REQUIRES(mu);
  detail::ModelRow ensure_model(const ModelSignature& sig) REQUIRES(mu);  // inside a write transaction
  // The chunk size of sig's conversations: its stored row's, or the one a
  // first append of it would choose.
  int64_t chunk_tokens_of(const ModelSignature& sig) REQUIRES(mu);
  void require_writable(const std::string& op) const;
  bool is_json(const std::string& text);
  void free_unused_chunks(const std::vector<int64_t>& chunk_ids) REQUIRES(mu);  // inside a write transaction
  // Inside a write transaction: deletes conversation c (at its generation,
  // else kConflict), its chunk list and those of its chunks no other
  // conversation links, as one edit (Catalog::apply: Store::remove, a
  // tenant's retention); returns the ids of its chunks, freed or not.
  std::vector<int64_t> delete_whole(const detail::ConversationRow& c) REQUIRES(mu);
  // The same for a tenant's retention, whose write transaction is rolled back
  // whole when it fails: no savepoint of its own. `chunks`: c's, as
  // claim_chunks gave them (no chunk list read again).
  void delete_idle(const detail::IdleConversation& c, const std::vector<detail::PayloadChunk>& chunks)
      REQUIRES(mu);
  size_t window() { return pool_.size() * 2; }
  // The chain hash before position 0 of this Store's tenant's conversations.
  detail::ChunkHash chain_seed(const std::string& signature, const std::string& precision) const {
    return detail::chain_seed(signature, precision, options_.tenant);
  }

  // Stored chunks (id, key) whose values this Store checked before linking
  // them for new content (store_append.cpp, check_linked_content): checked once,
  // not on every append that shares them. Bounded: forgotten past a limit.
  bool linked_content_checked(int64_t chunk_id, const detail::ChunkHash& key) const REQUIRES(mu) {
    return linked_checked_.count({chunk_id, key}) != 0;
  }
  void remember_linked_content(int64_t chunk_id, const detail::ChunkHash& key) REQUIRES(mu) {
    if (linked_checked_.size() >= kMaxLinkedChecked) linked_checked_.clear();
    linked_checked_.insert({chunk_id, key});
  }

 private:
  friend class detail::StoreHold;
  friend bool detail::in_call(const Impl& s) noexcept;

  // The thread in a call of this Store (holding mu in a StoreHold, store_call.h),
  // and how many calls deep: a call nested in another of this Store's on that
  // thread neither enters the gate again nor waits for the queue. Per Store,
  // not per thread: another Store's call made from inside one of this Store's
  // is an outermost call of that Store.
  std::atomic<std::thread::id> call_thread_{};
  int calls_in_ GUARDED_BY(mu) = 0;
  detail::PendingCounts pending_ GUARDED_BY(mu);  // pending()
  bool erase_due_ GUARDED_BY(mu) = false;         // erase_when_done()

  const std::string path_;
  const Options options_;
  // where()'s text for the store: built once, not on each of a call's checks.
  const std::string where_store_;
  detail::StoreCounters counters_;
  NewLayout new_layout_ GUARDED_BY(mu);  // new_layout()
  // Declared before the catalog, so that it is removed only once the
  // catalog's connections to it are closed.
  detail::StagedStorePtr staged_ GUARDED_BY(mu);
  // The database (catalog()): SQLite's by default; null once published.
  std::unique_ptr<detail::Catalog> catalog_ GUARDED_BY(mu);
  detail::CallGate gate_;
  detail::ThreadPool pool_;
  // ~Impl stops it first, so that it commits what is still queued before
  // anything it uses is torn down.
  std::unique_ptr<detail::AsyncWriter> async_;

  static constexpr size_t kMaxLinkedChecked = 1 << 16;
  std::map<int64_t, detail::ModelRow> models_by_id_ GUARDED_BY(mu);
  // The catalog's write_rollbacks() when models_by_id_ was last known good: a
  // model row read in a write that was then rolled back may be gone and its
  // id another model's.
  uint64_t models_rollbacks_ GUARDED_BY(mu) = 0;
  std::set<std::pair<int64_t, detail::ChunkHash>> linked_checked_ GUARDED_BY(mu);
};

namespace detail {

// What the store's files share (store_impl.cpp, but load_rows).

// The largest power of two of tokens whose chunk stays within target bytes.
int64_t chunk_tokens_for(const ModelSignature& m, int64_t target_bytes);
// A stored token list of expect_n ids; kCorrupt naming `where` unless its
// size is one the library writes for expect_n ids and it parses to them.
std::vector<int32_t> parse_tokens_or_throw(const char* text, int64_t bytes, int64_t expect_n,
                                           const std::string& where);
// "positions [a, b)", for messages.
std::string range_text(int64_t a, int64_t b);
[[noreturn]] void throw_negative_count(const ConversationRow& conv, const std::string& here);
// kCorrupt naming `here` unless the chunk list covers exactly [0, count) as
// chunk_layout.h says.
void check_chunk_list(const ConversationRow& conv, const ModelRow& model, const std::vector<ChunkSummary>& chunks,
                      const std::string& here);
// The token ids of entry c of conversation_id's chunk list, which must hold
// c.n_tokens of them (kCorrupt).
std::vector<int32_t> chunk_tokens_of(Catalog& catalog, int64_t conversation_id, const ChunkSummary& c,
                                     const std::string& where);

// Appends positions [from, len) of a conversation holding exactly `from`
// committed tokens, in the caller's transaction if one is open: rows of kv
// are positions origin, origin + 1, ...; when the append rewrites the tail,
// its stored rows are re-encoded from the store (store_append.cpp). With
// expected_count >= 0, a committed count other than it is kConflict
// (AppendRequest::expected_count).
void append_rows(Store::Impl& s, const std::string& id, const ModelSignature& model, const int32_t* tokens,
                 int64_t from, int64_t len, const KvSource& kv, int64_t origin, int64_t expected_count = -1)
    REQUIRES(s.mu);

// A conversation's row, model and chunk list, from one read snapshot.
struct ConversationState {
  ConversationRow conv;
  ModelRow model;
  std::vector<ChunkSummary> chunks;
};
// Reads it, the chunk list checked (check_chunk_list); kNotFound for no such id.
ConversationState read_state(Store::Impl& s, const std::string& id, const std::string& here) REQUIRES(s.mu);

// Fills positions [from, to) of a conversation into rows p - origin of the
// buffers (store_load.cpp): what load_range and a rewritten tail read.
int64_t load_rows(Store::Impl& s, const std::string& id, const ModelSignature& model, int64_t from, int64_t to,
                  int32_t* tokens, const KvTarget& kv, int64_t origin) REQUIRES(s.mu);

// A Store's internals, for the library's own modules (coli_kv.cpp) and the
// white-box tests; not part of the public header.
struct StoreAccess {
  static Store::Impl& impl(Store& store) { return *store.impl_; }
  // The store's catalog, for the white-box tests: read under the Store's
  // lock, used while no call of the Store runs on another thread.
  static Catalog& catalog(Store& store) {
    Store::Impl& s = *store.impl_;
    LockGuard<RecursiveMutex> lock(s.mu);
    return s.catalog();
  }
  // Store::Impl::append as one call of store (append.cpp).
  static void append(Store& store, const AppendRequest& req);
};

}  // namespace detail

}  // namespace colikv

#endif  // COLIKV_SRC_STORE_IMPL_H
