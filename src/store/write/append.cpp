// Appending: Store::create and Store::append, and the Appender that plans,
// encodes and writes an append's chunks (append_rows.cpp has the append of
// Store::write and of a queued turn, which may rewrite the tail's kept rows).
#include "store/write/append.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "catalog/backend_error.h"
#include "core/chunk_layout.h"
#include "core/chunk_codec.h"
#include "core/store_limits.h"
#include "core/text_argument.h"
#include "store/upkeep/eviction.h"
#include "store/kv_planes.h"
#include "store/store_call.h"
#include "core/test_sync_point.h"

namespace colikv {

using detail::ChunkHash;
using detail::ChunkSummary;
using detail::ConversationRow;
using detail::EncodedChunk;
using detail::ModelRow;
using detail::check_kv_pointers;
using detail::now_ms;
using detail::chunk_tokens_for;
using detail::range_text;
using detail::check_chunk_list;
using detail::chunk_tokens_of;
using detail::TailRegion;
using detail::WriteChunk;
using detail::put_chunk;
using detail::key_matches;

namespace {

// A token-only chunk: cut from an evicted one, its values are unknown.
bool token_only(const EncodedChunk& e) { return e.payload.empty() && !e.skipped; }

// The chunk's own token ids, and those of the region chunk_meta indexes it by.
void set_token_lists(detail::ChunkRecord& r, const WriteChunk& w) {
  r.tokens_json = detail::tokens_to_json(w.produced.tokens.data(), r.n_tokens);
  if (w.region.before.empty()) {
    r.index_tokens_json = r.tokens_json;
    return;
  }
  std::vector<int32_t> region = w.region.before;
  region.insert(region.end(), w.produced.tokens.begin(), w.produced.tokens.end());
  r.index_tokens_json = detail::tokens_to_json(region.data(), static_cast<int64_t>(region.size()));
}

// A stored chunk found under the key of the content about to be linked must
// hold that content. colikv never stores a key its payload disagrees with,
// but a store from elsewhere may (a load checks the key against the digest
// column, not against the decoded values): linking it would give this
// conversation values it never wrote. So its tokens and decoded digest are
// compared first; verify names the chunk.
void check_linked_content(Store::Impl& s, int64_t chunk_id, const ModelSignature& sig, const detail::ChunkRecord& r,
                          const std::vector<int32_t>& tokens, const std::string& here) REQUIRES(s.mu) {
  if (s.linked_content_checked(chunk_id, r.key)) return;
  detail::Catalog& catalog = s.catalog();
  const std::string what = here + ": stored chunk " + std::to_string(chunk_id) + " under this content's key";
  const std::optional<detail::ChunkContent> c = catalog.read_chunk(chunk_id);
  if (!c || !c->payload) return;  // freed or evicted meanwhile: the caller's find_chunk said otherwise
  const int64_t n = static_cast<int64_t>(tokens.size());
  detail::ChunkPrecision precision;
  bool compressed = false;
  ChunkHash digest{};
  if (c->n_tokens == n && c->tokens_json == detail::tokens_to_json(tokens.data(), n) &&
      detail::parse_precision(c->precision, precision) && detail::parse_compression(c->compression, compressed)) {
    std::vector<float> buf(static_cast<size_t>(n * sig.floats_per_token()));
    try {
      detail::decode_chunk(c->payload->data(), c->payload->size(), compressed, c->raw_size,
                           static_cast<uint32_t>(c->checksum), n, tokens.data(),
                           detail::packed_planes(sig, buf.data(), n), precision, &digest);
    } catch (const Error& e) {
      throw Error(ErrorCode::kCorrupt, what + ": " + e.what());
    }
    if (digest == r.digest) {
      s.remember_linked_content(chunk_id, r.key);
      return;
    }
  }
  throw Error(ErrorCode::kCorrupt, what + " holds other tokens or values (a damaged or hostile store; verify reports it)");
}

}  // namespace

namespace {

// One chunk, or chunks of fewer raw bytes than this, are encoded on the
// calling thread, before the write lock is taken as on the pool (unless
// the append is in one transaction): a hand-off to the pool and back costs
// more than encoding a few kilobytes, and one chunk gains nothing from it.
constexpr int64_t kInlineEncodeBytes = 64 << 10;

}  // namespace

namespace detail {

int64_t& one_transaction_max_bytes() {
  static int64_t bytes = kInlineEncodeBytes;  // as much as an append encodes on its calling thread
  return bytes;
}

TurnResult apply_turn(Store::Impl& s, TurnEdit& edit, bool limits, const std::string& here) {
  // The tenant's retention and quota, and the store's byte budget, in the
  // edit's committing transaction: never to the conversation it wrote.
  bool expired = false;
  if (limits) edit.finish = [&](int64_t conversation_id) REQUIRES(s.mu) { expired = apply_limits(s, conversation_id); };
  TurnResult r = s.catalog().apply(edit, here);
  // A conversation that expired is erased as remove() erases, when the
  // outermost transaction has committed (~StoreCall). Rarely: the evictions
  // are not, which would checkpoint on every append at a budget.
  if (expired) s.erase_when_done();
  return r;
}

int64_t put_chunk(Store::Impl& s, ChunkWriter& catalog, const ModelRow& model, const WriteChunk& w,
                  const std::string& precision, const std::string& here, bool defer_index, ChunkRecord* record) {
  const int64_t model_id = model.id;
  const EncodedChunk& e = w.produced.encoded;
  detail::ChunkRecord r;
  r.model_id = model_id;
  r.digest = token_only(e) ? detail::kNoValuesDigest : e.digest;
  r.key = detail::chunk_key(w.hash, r.digest);
  r.first_pos = w.first_pos;
  r.precision = precision;
  r.prev = w.prev;
  r.chain = w.hash;
  r.n_tokens = static_cast<int64_t>(w.produced.tokens.size());
  r.encoded = &e;
  const bool starts_region = w.region.before.empty();
  r.index_first = starts_region ? w.first_pos : w.region.first;
  r.index_prev = starts_region ? w.prev : w.region.anchor;
  r.defer_index = defer_index;
  if (record) {  // what the link indexes the chunk by, whether it is stored now or found
    *record = r;
    record->encoded = nullptr;
    set_token_lists(*record, w);
  }
  // Where writers run side by side (PostgreSQL), another may store the same
  // content between the lookup and the insert: its chunk is found and linked
  // on the next round. Each round needs another writer's commit; a few suffice.
  // A chunk the read snapshot saw no stored values at its chain hash for is
  // most likely new (a new conversation's own turn): inserted first, looked
  // up only when its key was stored after all.
  const bool expect_new = w.produced.stored_digests.empty() && !e.skipped;
  const uint64_t raw = static_cast<uint64_t>(r.n_tokens * model.sig.record_bytes());
  for (int round = 0; round < 8; ++round) {
    const std::optional<detail::KeyedChunk> stored =
        round == 0 && expect_new ? std::nullopt : catalog.find_chunk(model_id, r.key);
    if (stored) {
      if (token_only(e)) return stored->chunk_id;
      if (!stored->evicted) {
        check_linked_content(s, stored->chunk_id, model.sig, r, w.produced.tokens, here);
        s.pending().append_shared_bytes += raw;
        return stored->chunk_id;
      }
      if (e.skipped) return 0;  // evicted meanwhile: the caller encodes it
      // The same content evicted: its values come back for every conversation using it.
      set_token_lists(r, w);
      catalog.restore_payload(stored->chunk_id, r);
      s.pending().append_stored_bytes += e.payload.size();
      return stored->chunk_id;
    }
    if (e.skipped) return 0;  // vanished meanwhile: the caller re-encodes it
    set_token_lists(r, w);
    if (const int64_t id = catalog.insert_chunk(r)) {
      s.pending().append_stored_bytes += e.payload.size();
      return id;
    }
  }
  throw Error(ErrorCode::kBusy, here + ": other writers kept storing and freeing the chunk at " +
                                    range_text(w.first_pos, w.first_pos + r.n_tokens) + "; retry");
}

}  // namespace detail

namespace {

// One append, as a list of steps: check the request, read what is committed
// (one read snapshot through the divergence check, so that a chunk it names
// cannot be freed by another writer before its tokens are compared), plan the
// chunks to write, hash them when the tokens are known up front, start
// encoding, and write everything in one transaction. A short conversation's
// append takes every step in that one transaction (one_transaction_if_free).
class Appender : private detail::TurnChunks {
 public:
  Appender(Store::Impl& s, const detail::AppendRequest& req) : s_(s), req_(req), here_(s.where(req.id)) {}

  void run() {
    s_.assert_in_call();  // Store::Impl::append's: the analysis cannot name s_ there
    check_request();
    const auto txn = one_transaction_if_free();
    {
      // Else one snapshot for the reads and the stored digests' lookup: a read
      // transaction costs a BEGIN, a COMMIT and the WAL's locks (issue 20).
      std::unique_ptr<detail::Catalog::Transaction> snapshot;
      if (!txn) snapshot = s_.catalog().begin(detail::Catalog::Access::kRead, here_);
      read_committed();
      choose_layout();
      check_divergence();
      if (nothing_to_write()) {
        if (txn) txn->commit();  // a rollback would count as one (Catalog::write_rollbacks)
        return;
      }
      plan_chunks();
      if (req_.tokens) hash_planned_chunks();
    }
    if (rewrite_tail_ && req_.rewrite_tail) req_.rewrite_tail(tail_start_);
    start_encoding();
    apply_edit(/*in_transaction=*/txn != nullptr);
    if (txn) txn->commit();
  }

  // An append whose whole conversation holds at most
  // one_transaction_max_bytes() (raw), as a new conversation's first turns
  // do, takes every step in one write transaction when it can have one
  // without waiting for another writer (kWriteIfFree; SQLite): a read
  // snapshot of its own costs its begin, its end and their locks, more than
  // holding other writers off while these few kilobytes are read and
  // encoded (docs/benchmarks.md, "Small turns"). It is then what the steps
  // in two transactions are when no writer commits between them: as one
  // that waited for another writer would read that writer's commit and
  // answer from it (a conversation longer than this append, say, instead of
  // kConflict), one that would wait takes the two transactions. A turn a
  // backend would store objects first is never one of these. Null: read in
  // a snapshot of its own first.
  std::unique_ptr<detail::Catalog::Transaction> one_transaction_if_free() REQUIRES(s_.mu) {
    const int64_t max_bytes = std::min(detail::one_transaction_max_bytes(), detail::objects_first_min_bytes() - 1);
    if (max_bytes < 0 || req_.len > max_bytes / detail::token_raw_bytes(req_.model)) return nullptr;
    if (detail::LocalFiles* files = s_.catalog().local_files())
      files->wait_before_write(req_.len * detail::token_raw_bytes(req_.model));
    return s_.catalog().begin(detail::Catalog::Access::kWriteIfFree, here_);
  }

 private:
  void check_request() const {
    s_.require_writable("append to conversation '" + req_.id + "'");
    req_.model.validate();
    if (detail::token_raw_bytes(req_.model) > detail::kMaxChunkRawBytes)
      throw Error(ErrorCode::kInvalidArgument, here_ + ": one record of model [" + req_.model.to_string() + "] takes " +
                                                   std::to_string(detail::token_raw_bytes(req_.model)) +
                                                   " bytes, more than the " +
                                                   std::to_string(detail::kMaxChunkRawBytes >> 20) +
                                                   " MiB a stored chunk may hold");
    if (req_.id.empty()) throw Error(ErrorCode::kInvalidArgument, s_.where() + ": conversation id is empty");
    if (req_.len < 0) throw Error(ErrorCode::kInvalidArgument, here_ + ": negative length " + std::to_string(req_.len));
    if (req_.len > 0 && req_.tokens == nullptr && !req_.must_create)
      throw Error(ErrorCode::kInvalidArgument, here_ + ": tokens is null");
    if (req_.tokens)
      for (int64_t p = 0; p < req_.len; ++p)
        if (req_.tokens[p] < 0 || req_.tokens[p] >= req_.model.vocab)
          throw Error(ErrorCode::kInvalidArgument, here_ + ": token id " + std::to_string(req_.tokens[p]) +
                                                       " at position " + std::to_string(p) + " is outside [0, " +
                                                       std::to_string(req_.model.vocab) + ")");
  }

  // The conversation's row, model and chunk list, if it exists.
  void read_committed() REQUIRES(s_.mu) {
    conv_ = s_.find_conversation(req_.id);
    if (req_.expected_count >= 0 && (conv_ ? conv_->count : 0) != req_.expected_count)
      throw Error(ErrorCode::kConflict, here_ + ": the queued append of positions [" +
                                            std::to_string(req_.expected_count) + ", " + std::to_string(req_.len) +
                                            ") expected " + std::to_string(req_.expected_count) +
                                            " committed tokens but the store holds " +
                                            std::to_string(conv_ ? conv_->count : 0) +
                                            " (another writer changed it); reload and retry");
    if (conv_ && req_.must_create)
      throw Error(ErrorCode::kConflict, here_ + ": a conversation with this id exists already");
    if (!conv_) {
      model_ = s_.find_model(req_.model);
      return;
    }
    model_ = s_.model_by_id(conv_->model_id);
    if (model_->sig != req_.model)
      throw Error(ErrorCode::kModelMismatch, here_ + ": stored for model [" + model_->text +
                                                 "], but the caller's model is [" + req_.model.to_string() + "]");
    existing_ = s_.catalog().chunk_list(conv_->id);
    check_chunk_list(*conv_, *model_, existing_, here_);
  }

  // The chunk size and precision: the stored ones, or those of a new conversation.
  void choose_layout() REQUIRES(s_.mu) {
    committed_ = conv_ ? conv_->count : 0;
    if (req_.len < committed_)
      throw Error(ErrorCode::kInvalidArgument, here_ + ": append of " + std::to_string(req_.len) +
                                                   " tokens is shorter than the " + std::to_string(committed_) +
                                                   " committed; truncate first");
    chunk_tokens_ = model_ ? model_->chunk_tokens : chunk_tokens_for(req_.model, s_.new_layout().chunk_target_bytes);
    precision_ = conv_ ? conv_->precision
                       : detail::precision_name(s_.new_layout().precision == Precision::kBf16
                                                    ? detail::ChunkPrecision::kBf16
                                                    : detail::ChunkPrecision::kF32);
    if (!detail::parse_precision(precision_, chunk_precision_))
      throw Error(ErrorCode::kCorrupt, here_ + ": unknown precision '" + precision_ + "'");
    tail_start_ = detail::tail_start(committed_, chunk_tokens_);
    choose_tail_rewrite();
  }

  // The new rows become one more tail piece, and every stored chunk stays,
  // unless the tail reaches a full chunk (re-packed), would hold too many
  // pieces (merged into one), or lost a piece's values (re-saved whole).
  void choose_tail_rewrite() {
    const int64_t full = committed_ / chunk_tokens_;
    const int64_t pieces = static_cast<int64_t>(existing_.size()) - full;
    const bool grows = req_.len > committed_;
    const bool reaches_chunk = req_.len >= tail_start_ + chunk_tokens_;
    const bool too_many = grows && pieces + 1 > detail::kMaxTailPieces;
    bool piece_evicted = false;
    for (size_t k = static_cast<size_t>(full); k < existing_.size(); ++k) piece_evicted |= existing_[k].evicted;
    rewrite_tail_ = pieces > 0 && (reaches_chunk || too_many || piece_evicted);
    keep_chunks_ = rewrite_tail_ ? full : static_cast<int64_t>(existing_.size());
  }

  // The caller's tokens [0, committed) must be the stored ones: compare chunk
  // hashes, then the tokens of the first chunk that differs.
  void check_divergence() REQUIRES(s_.mu) {
    seed_ = s_.chain_seed(req_.model.to_string(), precision_);
    chain_ = seed_;
    for (size_t k = 0; k < existing_.size(); ++k) {
      const int64_t first = existing_[k].first_pos;
      const int64_t n = existing_[k].n_tokens;
      ChunkHash h = detail::chain_next(existing_chains_.empty() ? seed_ : existing_chains_.back(), req_.tokens + first, n);
      existing_chains_.push_back(h);
      if (!key_matches(existing_[k].key, existing_[k].digest, h)) throw_diverged(existing_[k], first, n);
      if (static_cast<int64_t>(k) < keep_chunks_) chain_ = h;
    }
  }

  [[noreturn]] void throw_diverged(const ChunkSummary& c, int64_t first, int64_t n) const REQUIRES(s_.mu) {
    std::vector<int32_t> stored = chunk_tokens_of(s_.catalog(), conv_->id, c, here_);
    for (int64_t i = 0; i < n; ++i)
      if (stored[i] != req_.tokens[first + i])
        throw Error(ErrorCode::kDiverged,
                    here_ + ": the caller's token at position " + std::to_string(first + i) + " is " +
                        std::to_string(req_.tokens[first + i]) + " but the stored one is " +
                        std::to_string(stored[i]) + "; truncate to " + std::to_string(first + i) +
                        " before appending",
                    first + i);
    throw Error(ErrorCode::kCorrupt, here_ + ": chunk " + std::to_string(c.chunk_id) + " (" +
                                         range_text(first, first + n) +
                                         ") does not match its hash: its token list was altered");
  }

  // Chunks whose KV data was evicted are re-saved from the caller's buffers,
  // which hold every position (an append of len == committed re-saves).
  bool nothing_to_write() const {
    bool resave = false;
    for (const ChunkSummary& c : existing_) resave |= c.evicted;
    if (resave && !req_.tokens) throw Error(ErrorCode::kInvalidArgument, here_ + ": tokens is null");
    return req_.len == committed_ && !req_.must_create && !resave;
  }

  // The evicted full chunks, then the new ones: full chunks from a chunk
  // boundary on, and what remains as one tail piece.
  void plan_chunks() {
    const int64_t full = committed_ / chunk_tokens_;
    for (int64_t k = 0; k < full; ++k)
      if (existing_[static_cast<size_t>(k)].evicted) plan_chunk(k, k * chunk_tokens_, chunk_tokens_);
    int64_t seq = keep_chunks_;
    for (int64_t first = rewrite_tail_ ? tail_start_ : committed_, n = 0; first < req_.len; first += n) {
      n = std::min(chunk_tokens_ - first % chunk_tokens_, req_.len - first);
      plan_chunk(seq++, first, n);
    }
  }

  void plan_chunk(int64_t seq, int64_t first, int64_t n) {
    WriteChunk w;
    w.seq = seq;
    w.first_pos = first;
    w.n = n;
    if (first > tail_start_ && first < tail_start_ + chunk_tokens_) w.region = stored_tail_region(first);
    plan_.push_back(std::move(w));
  }

  // A piece added after the stored ones: the stored tail before it. Only an
  // existing conversation has a tail, and its append carries the tokens.
  TailRegion stored_tail_region(int64_t first) const {
    TailRegion r;
    r.first = tail_start_;
    const int64_t full = tail_start_ / chunk_tokens_;
    r.anchor = full > 0 ? existing_chains_[static_cast<size_t>(full - 1)] : seed_;
    r.before.assign(req_.tokens + tail_start_, req_.tokens + first);
    return r;
  }

  // With tokens known up front: hash now, and let the producers skip encoding
  // chunks stored already. In the read snapshot (run).
  void hash_planned_chunks() REQUIRES(s_.mu) {
    ChunkHash h = chain_;
    for (auto& w : plan_) {
      const int64_t n = w.n;
      w.produced.tokens.assign(req_.tokens + w.first_pos, req_.tokens + w.first_pos + n);
      if (w.seq < keep_chunks_) {  // an evicted full chunk, re-saved from the caller's values
        w.prev = w.seq > 0 ? existing_chains_[w.seq - 1] : seed_;
        w.hash = existing_chains_[w.seq];
        continue;
      }
      w.prev = h;
      h = detail::chain_next(h, req_.tokens + w.first_pos, n);
      w.hash = h;
      if (model_)
        w.produced.stored_digests = s_.catalog().digests_at(model_->id, w.hash);
    }
  }

  // Encoding starts now on the pool and runs up to max_staged_bytes (raw) ahead
  // of the writer: it overlaps taking the write lock and writing the earlier
  // chunks. The encoder outpaces SQLite's writes (docs/benchmarks.md,
  // "bounds"), so the lock is held for about the SQL writes alone.
  void start_encoding() {
    const int64_t chunk_raw = std::max<int64_t>(1, chunk_tokens_ * 4 * req_.model.floats_per_token());
    const int64_t ahead_bytes = req_.max_staged_bytes >= 0 ? req_.max_staged_bytes : s_.options().max_staged_bytes;
    const size_t ahead =
        std::max<size_t>(s_.window(), static_cast<size_t>(std::max<int64_t>(0, ahead_bytes / chunk_raw)));
    using Jobs = detail::OrderedJobs<detail::ProducedChunk>;
    const bool on_caller = plan_.size() == 1 || planned_raw_bytes() <= kInlineEncodeBytes;
    encoded_.emplace(s_.pool(), plan_.size(), ahead, [this](size_t i) { return produce(i); },
                     on_caller ? Jobs::Run::kInline : Jobs::Run::kOnPool);
  }

  int64_t planned_raw_bytes() const {
    int64_t tokens = 0;
    for (const WriteChunk& w : plan_) tokens += w.n;
    return tokens * 4 * req_.model.floats_per_token();
  }

  // On a worker thread. Producers always compute the content digest; they skip
  // compressing when an equal chunk is stored at the same place already.
  detail::ProducedChunk produce(size_t i) const {
    const WriteChunk& w = plan_[i];
    detail::ProducedChunk out;
    out.tokens = w.produced.tokens;
    out.precision = chunk_precision_;
    out.stored_digests = w.produced.stored_digests;
    req_.produce(w.first_pos, w.n, out);
    return out;
  }

  // The turn as one edit (turn_edit.h), which the catalog applies whole:
  // the generation it expects (or the conversation it creates), the entries
  // a rewritten tail drops, the new chunks (this Appender, as their
  // encodings come in), the count, the replaced chunks to free, the limits.
  // in_transaction: in one_transaction_if_free's, which is rolled back whole
  // if the edit fails; else the edit commits its own.
  void apply_edit(bool in_transaction) REQUIRES(s_.mu) {
    detail::TurnEdit e;
    e.savepoint = !in_transaction;
    e.name = req_.id;
    e.now_ms = now_ms();
    if (conv_) {
      e.conversation_id = conv_->id;
      e.generation = conv_->generation;
    } else {
      e.create = detail::NewConversation{req_.id, 0, precision_, req_.title, req_.metadata, e.now_ms};
    }
    if (model_) e.model_id = model_->id;
    e.model = req_.model;
    e.chunk_tokens = chunk_tokens_;
    if (rewrite_tail_) e.unlink_from = keep_chunks_;  // the pieces re-packed or merged
    if (!plan_.empty()) e.chunks = this;
    e.count = req_.len;
    e.free = replaced_chunks();
    e.write_bytes = planned_raw_bytes();
    hashed_ = chain_;
    detail::apply_turn(s_, e, /*limits=*/true, here_);
    s_.pending().add_turn(req_.len - committed_, req_.model.record_bytes());  // counted when the call returns
  }

  // TurnChunks: the planned chunks in order, as their encodings come in.
  size_t size() const override { return plan_.size(); }
  int64_t raw_bytes() const override { return planned_raw_bytes(); }

  bool next(int64_t& raw_bytes) override {
    if (encoded_->done()) return false;
    detail::ProducedChunk r;
    WriteChunk& w = plan_[encoded_->next(r)];
    w.produced = std::move(r);
    if (!req_.tokens) {  // hashes follow the tokens the producer read
      w.prev = hashed_;
      hashed_ = detail::chain_next(hashed_, w.produced.tokens.data(), static_cast<int64_t>(w.produced.tokens.size()));
      w.hash = hashed_;
    }
    current_ = &w;
    raw_bytes = w.n * detail::token_raw_bytes(req_.model);
    return true;
  }

  detail::NewChunkLink store(detail::ChunkWriter& writer, int64_t model_id, detail::ChunkRecord* record) override {
    s_.assert_in_call();  // called back by the catalog inside apply_edit
    ModelRow m;
    if (model_) {
      m = *model_;
    } else {  // stored by this turn: the caller's model, at the chunk size chosen for it
      m.id = model_id;
      m.sig = req_.model;
      m.chunk_tokens = chunk_tokens_;
    }
    return {current_->seq, store_chunk(writer, m, *current_, record)};
  }

  void stored() override {
    WriteChunk& w = *current_;
    COLIKV_TEST_SYNC_POINT("append:chunk", detail::AppendChunkPoint{req_.id, w.seq});
    if (req_.progress) req_.progress(w.first_pos + static_cast<int64_t>(w.produced.tokens.size()), req_.len);
    w.produced = detail::ProducedChunk();  // bounded memory: drop it once written
  }

  // The chunks rewritten (the tail's pieces, evicted full chunks re-saved):
  // freed unless another conversation uses them.
  std::vector<int64_t> replaced_chunks() const {
    std::vector<int64_t> replaced;
    for (const WriteChunk& w : plan_)
      if (w.seq < keep_chunks_) replaced.push_back(existing_[static_cast<size_t>(w.seq)].chunk_id);
    for (size_t k = static_cast<size_t>(keep_chunks_); k < existing_.size(); ++k) replaced.push_back(existing_[k].chunk_id);
    return replaced;
  }

  // With `record` (objects first): the chunk's index row waits for its link.
  int64_t store_chunk(detail::ChunkWriter& writer, const ModelRow& model, WriteChunk& w,
                      detail::ChunkRecord* record) const REQUIRES(s_.mu) {
    const bool defer = record != nullptr;
    int64_t id = put_chunk(s_, writer, model, w, precision_, here_, defer, record);
    if (id == 0) {  // a shared chunk was freed or evicted between our read and our lock
      w.produced.stored_digests.clear();
      req_.produce(w.first_pos, static_cast<int64_t>(w.produced.tokens.size()), w.produced);
      id = put_chunk(s_, writer, model, w, precision_, here_, defer, record);
    }
    return id;
  }

  Store::Impl& s_;
  const detail::AppendRequest& req_;
  const std::string here_;
  // What is committed, read in one snapshot.
  std::optional<ConversationRow> conv_;
  std::optional<ModelRow> model_;
  std::vector<ChunkSummary> existing_;
  std::vector<ChunkHash> existing_chains_;  // the chain hash of each existing chunk
  // The layout of the write.
  int64_t committed_ = 0;
  int64_t chunk_tokens_ = 0;  // the model's tokens per chunk
  int64_t tail_start_ = 0;   // the first position after the committed full chunks
  bool rewrite_tail_ = false;  // the tail's pieces are re-encoded with the new rows
  int64_t keep_chunks_ = 0;  // chunks that stay as they are (seq < keep_chunks_)
  std::string precision_;
  detail::ChunkPrecision chunk_precision_ = detail::ChunkPrecision::kF32;
  ChunkHash seed_{};
  ChunkHash chain_{};  // the chain hash after the kept chunks
  std::vector<WriteChunk> plan_;
  // The chunks' hashes as they come in (when the tokens are not known up
  // front), and the chunk next() gave.
  ChunkHash hashed_{};
  WriteChunk* current_ = nullptr;
  // Last: destroyed first, it waits for the jobs that read plan_ and req_.
  std::optional<detail::OrderedJobs<detail::ProducedChunk>> encoded_;
};

}  // namespace

void detail::StoreAccess::append(Store& store, const AppendRequest& req) {
  StoreCall::run(impl(store), [&](Store::Impl& s) REQUIRES(s.mu) { s.append(req); });
}

void Store::Impl::append(const detail::AppendRequest& req) {
  detail::require_no_nul(req.id, "conversation id", where());
  detail::require_no_nul(req.title, "title", where());
  detail::require_no_nul(req.metadata, "metadata", where());
  Appender(*this, req).run();
}

void Store::create(const std::string& id, const ModelSignature& model, const std::string& title,
                   const std::string& metadata) {
  detail::StoreCall::run(*impl_, id, [&](Store::Impl& s) REQUIRES(s.mu) {
    detail::StoreCounters::add(s.counters().appends, 1);
    detail::AppendRequest req;
    req.id = id;
    req.model = model;
    req.len = 0;
    req.must_create = true;
    req.title = title;
    req.metadata = metadata;
    if (!s.is_json(metadata)) throw Error(ErrorCode::kInvalidArgument, s.where(id) + ": metadata is not valid JSON text");
    s.append(req);  // row, title and metadata in one transaction
  });
}

void Store::append(const std::string& id, const ModelSignature& model, const int32_t* tokens, int64_t len,
                   const KvSource& kv) {
  detail::StoreCall::run(*impl_, id, [&](Store::Impl& s) REQUIRES(s.mu) {
    detail::StoreCounters::add(s.counters().appends, 1);
    const detail::LatencyTimer timer(s.counters().append_seconds);
    model.validate();
    if (len > 0)
      check_kv_pointers(model, reinterpret_cast<const void* const*>(kv.Lc), reinterpret_cast<const void* const*>(kv.Rc),
                        reinterpret_cast<const void* const*>(kv.Ic), s.where(id));
    detail::AppendRequest req;
    req.id = id;
    req.model = model;
    req.len = len;
    req.tokens = tokens;
    const int level = s.options().zstd_level;
    req.produce = [&model, &kv, level](int64_t first, int64_t n, detail::ProducedChunk& out) {
      out.encoded = detail::encode_chunk(n, out.tokens.data(), detail::engine_planes(model, kv, first), level,
                                         out.precision, &out.stored_digests);
    };
    s.append(req);
  });
}

}  // namespace colikv
