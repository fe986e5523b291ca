#include "colikv/store.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "chunk_layout.h"
#include "core/chunk_codec.h"
#include "eviction.h"
#include "backend_error.h"
#include "store_impl.h"
#include "core/store_limits.h"
#include "store_location.h"

namespace colikv {

using detail::ChunkHash;
using detail::ChunkSummary;
using detail::ConversationRow;
using detail::EncodedChunk;
using detail::ModelRow;
using detail::PlaneList;
using detail::PlaneRef;
using detail::StoredChunk;
using detail::read_rows;
using detail::with_context;
using detail::check_kv_pointers;

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The largest power of two of tokens whose chunk stays within target bytes.
int64_t chunk_tokens_for(const ModelSignature& m, int64_t target_bytes) {
  const int64_t per_token = detail::token_raw_bytes(m);
  target_bytes = std::min(target_bytes, detail::kMaxChunkRawBytes);
  int64_t c = 1;
  while (c < detail::kMaxChunkTokens && (c * 2) * per_token <= target_bytes) c *= 2;
  return c;
}

using detail::key_matches;

std::vector<int32_t> parse_tokens_or_throw(const char* text, int64_t bytes, int64_t expect_n,
                                           const std::string& where) {
  std::vector<int32_t> out;
  // Sizes first: a list longer than the library writes for expect_n ids is
  // not parsed (its ids would be held in memory).
  if (expect_n < 1 || expect_n > detail::kMaxChunkTokens || bytes > detail::max_tokens_json_bytes(expect_n))
    throw Error(ErrorCode::kCorrupt, where + ": token list of " + std::to_string(bytes) + " bytes for " +
                                         std::to_string(expect_n) + " token ids is not one colikv writes");
  if (!detail::parse_tokens_json(text ? text : "", static_cast<size_t>(bytes), out) ||
      static_cast<int64_t>(out.size()) != expect_n)
    throw Error(ErrorCode::kCorrupt, where + ": token list is not a JSON array of " +
                                         std::to_string(expect_n) + " token ids");
  return out;
}

std::string range_text(int64_t a, int64_t b) {
  return "positions [" + std::to_string(a) + ", " + std::to_string(b) + ")";
}


template <class Ptr>
PlaneList engine_planes_of(const ModelSignature& m, Ptr const* lc, Ptr const* rc, Ptr const* ic, int64_t first) {
  PlaneList planes;
  planes.reserve(static_cast<size_t>(2 * m.n_layers + m.n_indexed));
  for (int l = 0; l < m.n_layers; ++l) {
    planes.push_back({const_cast<float*>(lc[l]) + first * m.kv_lora, m.kv_lora, m.kv_lora});
    planes.push_back({const_cast<float*>(rc[l]) + first * m.qk_rope, m.qk_rope, m.qk_rope});
  }
  if (m.n_indexed > 0)
    for (int l = 0; l < m.n_layers; ++l)
      if (ic[l]) planes.push_back({const_cast<float*>(ic[l]) + first * m.index_hd, m.index_hd, m.index_hd});
  return planes;
}

}  // namespace

namespace detail {

void check_kv_pointers(const ModelSignature& m, const void* const* lc, const void* const* rc,
                       const void* const* ic, const std::string& where) {
  if (!lc || !rc) throw Error(ErrorCode::kInvalidArgument, where + ": Lc and Rc must not be null");
  int64_t indexed = 0;
  for (int l = 0; l < m.n_layers; ++l) {
    if (!lc[l] || !rc[l])
      throw Error(ErrorCode::kInvalidArgument, where + ": Lc[" + std::to_string(l) + "] or Rc[" +
                                                   std::to_string(l) + "] is null");
    if (ic && ic[l]) ++indexed;
  }
  if (indexed != m.n_indexed)
    throw Error(ErrorCode::kInvalidArgument,
                where + ": Ic has " + std::to_string(indexed) + " non-null layers but the model has n_indexed=" +
                    std::to_string(m.n_indexed));
}

PlaneList engine_planes(const ModelSignature& m, const KvSource& kv, int64_t first_pos) {
  return engine_planes_of(m, kv.Lc, kv.Rc, kv.Ic, first_pos);
}

PlaneList engine_planes(const ModelSignature& m, const KvTarget& kv, int64_t first_pos) {
  return engine_planes_of(m, kv.Lc, kv.Rc, kv.Ic, first_pos);
}

PlaneList record_planes(const ModelSignature& m, uint8_t* records) {
  const int64_t stride = m.record_bytes() / 4;
  float* f = reinterpret_cast<float*>(records + 4);
  PlaneList planes;
  for (int l = 0; l < m.n_layers; ++l) {
    planes.push_back({f, m.kv_lora, stride});
    f += m.kv_lora;
    planes.push_back({f, m.qk_rope, stride});
    f += m.qk_rope;
  }
  for (int k = 0; k < m.n_indexed; ++k) {
    planes.push_back({f, m.index_hd, stride});
    f += m.index_hd;
  }
  return planes;
}

PlaneList packed_planes(const ModelSignature& m, float* buf, int64_t n) {
  PlaneList planes;
  for (int l = 0; l < m.n_layers; ++l) {
    planes.push_back({buf, m.kv_lora, m.kv_lora});
    buf += n * m.kv_lora;
    planes.push_back({buf, m.qk_rope, m.qk_rope});
    buf += n * m.qk_rope;
  }
  for (int k = 0; k < m.n_indexed; ++k) {
    planes.push_back({buf, m.index_hd, m.index_hd});
    buf += n * m.index_hd;
  }
  return planes;
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Opening

Store::Impl::Impl(const std::string& p, const Options& o)
    : path(p),
      options(o),
      catalog(detail::open_catalog(p, o)),
      pool(o.threads) {
  if (!options.read_only) async = detail::make_async_writer(*this);
}

Store::Impl::~Impl() { async.reset(); }

std::string Store::Impl::where(const std::string& id) const {
  const std::string store = "store " + detail::shown_location(path);
  return id.empty() ? store : store + ": conversation '" + id + "'";
}

bool Store::Impl::is_json(const std::string& text) {
  return with_context(where(), [&] { return catalog->is_json(text); });
}

void Store::Impl::require_writable(const std::string& op) const {
  if (options.read_only)
    throw Error(ErrorCode::kReadOnly, where() + ": " + op + ": the store is opened read-only");
}

std::optional<ConversationRow> Store::Impl::find_conversation(const std::string& id) {
  return with_context(where(id), [&] { return catalog->find_conversation(id); });
}

ConversationRow Store::Impl::get_conversation(const std::string& id) {
  auto r = find_conversation(id);
  if (!r) throw Error(ErrorCode::kNotFound, where(id) + ": no such conversation");
  return *r;
}

ModelRow Store::Impl::model_by_id(int64_t model_id) {
  auto it = models_by_id_.find(model_id);
  if (it != models_by_id_.end()) return it->second;
  const std::optional<detail::StoredModel> stored = with_context(where(), [&] { return catalog->read_model(model_id); });
  if (!stored) throw Error(ErrorCode::kCorrupt, where() + ": model row " + std::to_string(model_id) + " is missing");
  ModelRow r;
  r.id = model_id;
  r.sig = stored->sig;
  r.chunk_tokens = stored->chunk_tokens;
  r.text = r.sig.to_string();
  try {
    r.sig.validate();
  } catch (const Error& e) {
    throw Error(ErrorCode::kCorrupt, where() + ": model row " + std::to_string(model_id) + ": " + e.what());
  }
  // Everything a read allocates follows from chunk_tokens: it must be a
  // size the library itself could have chosen.
  if (!detail::chunk_tokens_allowed(r.sig, r.chunk_tokens))
    throw Error(ErrorCode::kCorrupt, where() + ": model row " + std::to_string(model_id) + ": chunk_tokens " +
                                         std::to_string(r.chunk_tokens) + " is not a chunk size colikv writes (a power of two up to " +
                                         std::to_string(detail::kMaxChunkTokens) + ", at most " +
                                         std::to_string(detail::kMaxChunkRawBytes >> 20) + " MiB a chunk)");
  if (r.text != stored->signature)
    throw Error(ErrorCode::kCorrupt, where() + ": model row " + std::to_string(model_id) +
                                         " is inconsistent (its signature text does not match its fields)");
  models_by_id_[model_id] = r;
  return r;
}

std::optional<ModelRow> Store::Impl::find_model(const ModelSignature& sig) {
  const std::optional<int64_t> id = with_context(where(), [&] { return catalog->find_model_id(sig.to_string()); });
  if (!id) return std::nullopt;
  return model_by_id(*id);
}

ModelRow Store::Impl::ensure_model(const ModelSignature& sig) {
  if (auto m = find_model(sig)) return *m;
  with_context(where(), [&] {
    catalog->insert_model(sig, chunk_tokens_for(sig, options.chunk_target_bytes), now_ms());
  });
  return *find_model(sig);
}

int64_t Store::Impl::chunk_tokens_of(const ModelSignature& sig) {
  const std::optional<detail::ModelRow> m = find_model(sig);
  return m ? m->chunk_tokens : chunk_tokens_for(sig, options.chunk_target_bytes);
}

void Store::Impl::free_unused_chunks(const std::vector<int64_t>& chunk_ids) {
  with_context(where(), [&] { catalog->free_unused_chunks(chunk_ids); });
}

// ---------------------------------------------------------------------------
// Append

namespace {

[[noreturn]] void throw_negative_count(const ConversationRow& conv, const std::string& here) {
  throw Error(ErrorCode::kCorrupt, here + ": its token count is negative (" + std::to_string(conv.count) + ")");
}

// The chunk list must cover exactly [0, count) as chunk_layout.h says: full
// chunks, then the tail's pieces. Checked before anything indexes the list by
// a position, so a count or a list altered by hand is reported, never
// followed out of bounds.
void check_chunk_list(const ConversationRow& conv, const ModelRow& model, const std::vector<ChunkSummary>& chunks,
                      const std::string& here) {
  if (conv.count < 0) throw_negative_count(conv, here);
  detail::ChunkListWalk walk(model.chunk_tokens, conv.count);
  for (const ChunkSummary& c : chunks) {
    const std::string why = walk.next(c.seq, c.first_pos, c.n_tokens);
    if (!why.empty())
      throw Error(ErrorCode::kCorrupt, here + ": chunk " + std::to_string(c.chunk_id) + " (seq " + std::to_string(c.seq) +
                                           ", " + range_text(c.first_pos, detail::saturating_add(c.first_pos, c.n_tokens)) + ") " + why);
  }
  if (walk.covered() != conv.count)
    throw Error(ErrorCode::kCorrupt, here + ": its chunks cover " + range_text(0, walk.covered()) +
                                         " but its count is " + std::to_string(conv.count));
}

std::vector<int32_t> chunk_tokens_by_id(detail::Catalog& catalog, int64_t chunk_id, int64_t n, const std::string& where) {
  const std::optional<std::string> json = catalog.chunk_tokens_json(chunk_id);
  if (!json) throw Error(ErrorCode::kCorrupt, where + ": chunk " + std::to_string(chunk_id) + " is missing");
  return parse_tokens_or_throw(json->data(), static_cast<int64_t>(json->size()), n,
                               where + ": chunk " + std::to_string(chunk_id));
}

// A conversation's row, model and chunk list, from one read snapshot.
struct ConversationState {
  ConversationRow conv;
  ModelRow model;
  std::vector<ChunkSummary> chunks;
};

ConversationState read_state(Store::Impl& s, const std::string& id, const std::string& here) {
  const auto snapshot = s.catalog->begin(detail::Catalog::Access::kRead, here);
  ConversationState st;
  st.conv = s.get_conversation(id);
  st.model = s.model_by_id(st.conv.model_id);
  st.chunks = with_context(here, [&] { return s.catalog->chunk_list(st.conv.id); });
  check_chunk_list(st.conv, st.model, st.chunks, here);
  return st;
}

// The tail before a piece that does not start it: where the tail starts,
// the chain hash there (the anchor), and its tokens up to the piece.
struct TailRegion {
  int64_t first = 0;
  ChunkHash anchor{};
  std::vector<int32_t> before;  // empty: the chunk starts its region
};

struct WriteChunk {
  int64_t seq = 0;
  int64_t first_pos = 0;
  ChunkHash hash{};  // its chain hash
  detail::ProducedChunk produced;
  ChunkHash prev{};  // the chain hash before this chunk (unused at seq 0), for chunk_meta
  int64_t n = 0;     // its tokens
  // A tail piece after others is indexed from the tail's start (ChunkRecord::index_*):
  TailRegion region;
};

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
                          const std::vector<int32_t>& tokens, const std::string& here) {
  if (s.linked_content_checked(chunk_id, r.key)) return;
  detail::Catalog& catalog = *s.catalog;
  const std::string what = here + ": stored chunk " + std::to_string(chunk_id) + " under this content's key";
  const std::optional<detail::ChunkContent> c = detail::read_rows(what, [&] { return catalog.read_chunk(chunk_id); });
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

// Stores one chunk, or finds the stored chunk with the same key (the same
// place and the same content), and returns its id; 0 when the chunk was
// skipped as stored already but is no longer there with its values (the
// caller encodes it and calls again).
int64_t put_chunk(Store::Impl& s, const ModelRow& model, const WriteChunk& w, const std::string& precision,
                  const std::string& here) {
  detail::Catalog& catalog = *s.catalog;
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
  if (const std::optional<detail::KeyedChunk> stored = catalog.find_chunk(model_id, r.key)) {
    if (token_only(e)) return stored->chunk_id;
    if (!stored->evicted) {
      check_linked_content(s, stored->chunk_id, model.sig, r, w.produced.tokens, here);
      return stored->chunk_id;
    }
    if (e.skipped) return 0;  // evicted meanwhile: the caller encodes it
    // The same content evicted: its values come back for every conversation using it.
    set_token_lists(r, w);
    catalog.restore_payload(stored->chunk_id, r);
    return stored->chunk_id;
  }
  if (e.skipped) return 0;  // vanished meanwhile: the caller re-encodes it
  set_token_lists(r, w);
  return catalog.insert_chunk(r);
}

// One append, as a list of steps: check the request, read what is committed
// (one read snapshot through the divergence check, so that a chunk it names
// cannot be freed by another writer before its tokens are compared), plan the
// chunks to write, hash them when the tokens are known up front, start
// encoding, and write everything in one transaction.
class Appender {
 public:
  Appender(Store::Impl& s, const detail::AppendRequest& req) : s_(s), req_(req), here_(s.where(req.id)) {}

  void run() {
    check_request();
    {
      const auto snapshot = s_.catalog->begin(detail::Catalog::Access::kRead, here_);
      read_committed();
      choose_layout();
      check_divergence();
    }
    if (nothing_to_write()) return;
    plan_chunks();
    if (req_.tokens) hash_planned_chunks();
    if (rewrite_tail_ && req_.rewrite_tail) req_.rewrite_tail(tail_start_);
    start_encoding();
    write_transaction();
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
  void read_committed() {
    conv_ = s_.find_conversation(req_.id);
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
    existing_ = with_context(here_, [&] { return s_.catalog->chunk_list(conv_->id); });
    check_chunk_list(*conv_, *model_, existing_, here_);
  }

  // The chunk size and precision: the stored ones, or those of a new conversation.
  void choose_layout() {
    committed_ = conv_ ? conv_->count : 0;
    if (req_.len < committed_)
      throw Error(ErrorCode::kInvalidArgument, here_ + ": append of " + std::to_string(req_.len) +
                                                   " tokens is shorter than the " + std::to_string(committed_) +
                                                   " committed; truncate first");
    chunk_tokens_ = model_ ? model_->chunk_tokens : chunk_tokens_for(req_.model, s_.options.chunk_target_bytes);
    precision_ = conv_ ? conv_->precision
                       : detail::precision_name(s_.options.new_conversation_precision == Precision::kBf16
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
  void check_divergence() {
    seed_ = detail::chain_seed(req_.model.to_string(), precision_);
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

  [[noreturn]] void throw_diverged(const ChunkSummary& c, int64_t first, int64_t n) const {
    std::vector<int32_t> stored = with_context(here_, [&] { return chunk_tokens_by_id(*s_.catalog, c.chunk_id, n, here_); });
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
  // chunks stored already.
  void hash_planned_chunks() {
    ChunkHash h = chain_;
    const auto hash_snapshot = s_.catalog->begin(detail::Catalog::Access::kRead, here_);
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
        w.produced.stored_digests = with_context(here_, [&] { return s_.catalog->digests_at(model_->id, w.hash); });
    }
  }

  // Encoding starts now on the pool and runs up to max_staged_bytes (raw) ahead
  // of the writer: it overlaps taking the write lock and writing the earlier
  // chunks. The encoder outpaces SQLite's writes (docs/benchmarks.md,
  // "bounds"), so the lock is held for about the SQL writes alone.
  void start_encoding() {
    const int64_t chunk_raw = std::max<int64_t>(1, chunk_tokens_ * 4 * req_.model.floats_per_token());
    const int64_t ahead_bytes = req_.max_staged_bytes >= 0 ? req_.max_staged_bytes : s_.options.max_staged_bytes;
    const size_t ahead =
        std::max<size_t>(s_.window(), static_cast<size_t>(std::max<int64_t>(0, ahead_bytes / chunk_raw)));
    using Jobs = detail::OrderedJobs<detail::ProducedChunk>;
    const bool on_caller = plan_.size() == 1 || planned_raw_bytes() <= kInlineEncodeBytes;
    encoded_.emplace(s_.pool, plan_.size(), ahead, [this](size_t i) { return produce(i); },
                     on_caller ? Jobs::Run::kInline : Jobs::Run::kOnPool);
  }

  // One chunk, or chunks of fewer raw bytes than this, are encoded on the
  // calling thread, before the write lock is taken as on the pool: a hand-off
  // to the pool and back costs more than encoding a few kilobytes, and one
  // chunk gains nothing from it.
  static constexpr int64_t kInlineEncodeBytes = 64 << 10;

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

  // One write transaction: chunks, chunk list and count together.
  void write_transaction() {
    s_.catalog->wait_before_write();
    const auto txn = s_.catalog->begin(detail::Catalog::Access::kWrite, here_);
    with_context(here_, [&] {
      check_generation();
      const ModelRow m = model_for_write();
      const int64_t conv_id = conv_ ? conv_->id : insert_conversation(m.id);
      write_chunks(m, conv_id);
      update_conversation(conv_id);
      // A replaced chunk stays when it is linked still: by another conversation,
      // or by this one when the same content was re-saved into it.
      s_.free_unused_chunks(replaced_chunks());
      // The byte budget: evict least recently used conversations, not this one.
      if (s_.options.max_store_bytes > 0) detail::evict_to_fit(s_, s_.options.max_store_bytes, conv_id);
    });
    txn->commit();
  }

  void check_generation() const {
    auto now_conv = s_.find_conversation(req_.id);
    // An import or copy that lost the race to create the id: retrying cannot help.
    if (now_conv && req_.must_create)
      throw Error(ErrorCode::kConflict, here_ + ": a conversation with this id exists already (another writer "
                                                "created it meanwhile)");
    if (conv_.has_value() != now_conv.has_value() || (conv_ && now_conv->generation != conv_->generation))
      throw Error(ErrorCode::kConflict, here_ + ": another writer changed the conversation while this append was "
                                                "prepared; reload and retry");
  }

  ModelRow model_for_write() const {
    ModelRow m = s_.ensure_model(req_.model);
    if (m.chunk_tokens != chunk_tokens_)
      throw Error(ErrorCode::kConflict, here_ + ": the model's chunk size was set by another writer meanwhile; retry");
    return m;
  }

  int64_t insert_conversation(int64_t model_id) const {
    return s_.catalog->insert_conversation({req_.id, model_id, precision_, req_.title, req_.metadata, now_ms()});
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

  // Stores and links each chunk as its encoding comes in, in order.
  void write_chunks(const ModelRow& model, int64_t conv_id) {
    if (rewrite_tail_) s_.catalog->unlink_from(conv_id, keep_chunks_);  // the pieces re-packed or merged
    ChunkHash h = chain_;
    while (!encoded_->done()) {
      detail::ProducedChunk r;
      WriteChunk& w = plan_[encoded_->next(r)];
      w.produced = std::move(r);
      if (!req_.tokens) {  // hashes follow the tokens the producer read
        w.prev = h;
        h = detail::chain_next(h, w.produced.tokens.data(), static_cast<int64_t>(w.produced.tokens.size()));
        w.hash = h;
      }
      s_.catalog->link_chunk(conv_id, w.seq, store_chunk(model, w));
      if (req_.progress) req_.progress(w.first_pos + static_cast<int64_t>(w.produced.tokens.size()), req_.len);
      w.produced = detail::ProducedChunk();  // bounded memory: drop it once written
    }
  }

  int64_t store_chunk(const ModelRow& model, WriteChunk& w) const {
    int64_t id = put_chunk(s_, model, w, precision_, here_);
    if (id == 0) {  // a shared chunk was freed or evicted between our read and our lock
      w.produced.stored_digests.clear();
      req_.produce(w.first_pos, static_cast<int64_t>(w.produced.tokens.size()), w.produced);
      id = put_chunk(s_, model, w, precision_, here_);
    }
    return id;
  }

  void update_conversation(int64_t conv_id) const { s_.catalog->set_count(conv_id, req_.len, now_ms()); }

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
  // Last: destroyed first, it waits for the jobs that read plan_ and req_.
  std::optional<detail::OrderedJobs<detail::ProducedChunk>> encoded_;
};

}  // namespace

void Store::Impl::append(const detail::AppendRequest& req) { Appender(*this, req).run(); }

// ---------------------------------------------------------------------------
// Scan (load, export)

namespace {

// The rows of one scan, as steps: each chunk row is checked (its place in the
// list, its tokens, its chain hash, its sizes against the model) before its
// payload is read, then decoded on the pool a window at a time and consumed
// here in position order.
class ChunkScan {
 public:
  using ChunkFn = std::function<void(StoredChunk&)>;

  ChunkScan(Store::Impl& s, const detail::ScanStart& start, const std::string& here, const ChunkFn& decode,
            const ChunkFn& consume)
      : s_(s),
        start_(start),
        here_(here),
        chunk_tokens_(start.model.chunk_tokens),
        walk_(chunk_tokens_, start.conv.count),
        decode_(decode),
        consume_(consume),
        chain_(detail::chain_seed(start.model.text, start.conv.precision)) {}

  // The jobs in flight point into owned_.
  ~ChunkScan() {
    for (auto& f : inflight_)
      if (f.second.valid()) f.second.wait();
  }

  void run() {
    const std::unique_ptr<detail::ChunkCursor> rows = s_.catalog->read_chunks(start_.conv.id, start_.n);
    detail::ChunkListRow row;
    while (rows->next(row)) {
      std::unique_ptr<StoredChunk> c = check_row(row);
      if (inflight_.size() >= s_.window()) finish_front();
      read_payload(*rows, *c);
      start_decoding(std::move(c));
    }
    if (walk_.covered() < start_.n)
      throw Error(ErrorCode::kCorrupt, here_ + ": the chunk list ends at position " + std::to_string(walk_.covered()) +
                                           " but the count is " + std::to_string(start_.conv.count));
    while (!inflight_.empty()) finish_front();
  }

 private:
  // A chunk's row, checked; its payload's size in payload_bytes_.
  std::unique_ptr<StoredChunk> check_row(const detail::ChunkListRow& row) {
    auto c = std::make_unique<StoredChunk>();
    c->seq = row.seq;
    c->chunk_id = row.chunk_id;
    c->first_pos = row.first_pos;
    c->n_tokens = row.n_tokens;
    cw_ = here_ + ": chunk " + std::to_string(c->chunk_id) + " (seq " + std::to_string(c->seq) + ", " +
          range_text(c->first_pos, detail::saturating_add(c->first_pos, c->n_tokens)) + ")";
    check_place(*c);
    c->wanted = std::min(c->n_tokens, start_.n - c->first_pos);
    c->tokens = parse_tokens_or_throw(row.tokens_json.data(), static_cast<int64_t>(row.tokens_json.size()),
                                      c->n_tokens, cw_);
    check_tokens(*c, row.key, row.digest);
    c->raw_size = row.raw_size;
    c->checksum = static_cast<uint32_t>(row.checksum);
    if (!detail::parse_precision(row.precision, c->precision))
      throw Error(ErrorCode::kCorrupt, cw_ + ": unknown precision '" + row.precision + "'");
    if (!row.payload_bytes)
      throw Error(ErrorCode::kEvicted, cw_ + ": its KV data was evicted; only its token ids are kept", c->first_pos);
    if (!detail::parse_compression(row.compression, c->compressed))
      throw Error(ErrorCode::kCorrupt, cw_ + ": unknown compression '" + row.compression + "'");
    payload_bytes_ = *row.payload_bytes;
    check_sizes(*c);
    return c;
  }

  // Full chunks, then the tail's pieces, as the count says (chunk_layout.h).
  void check_place(const StoredChunk& c) {
    const std::string why = walk_.next(c.seq, c.first_pos, c.n_tokens);
    if (!why.empty())
      throw Error(ErrorCode::kCorrupt, cw_ + ": " + why + " (the count is " + std::to_string(start_.conv.count) + ")");
  }

  // The hash chain ties each chunk to the token ids before it: a chunk list
  // pointing at another conversation's chunk is caught here, not loaded.
  void check_tokens(const StoredChunk& c, const ChunkHash& key, const std::optional<ChunkHash>& digest) {
    for (int32_t t : c.tokens)
      if (t < 0 || t >= start_.model.sig.vocab)
        throw Error(ErrorCode::kCorrupt, cw_ + ": token id " + std::to_string(t) + " is outside the vocabulary");
    chain_ = detail::chain_next(chain_, c.tokens.data(), c.n_tokens);
    if (!key_matches(key, digest, chain_))
      throw Error(ErrorCode::kCorrupt, cw_ + ": chunk hash does not match the token ids before and in it");
  }

  // Sizes are checked against the model before a byte is read, so a crafted
  // blob cannot make a load allocate more than a chunk's worth.
  void check_sizes(const StoredChunk& c) const {
    const int64_t expect_raw =
        c.n_tokens * start_.model.sig.floats_per_token() * detail::precision_value_bytes(c.precision);
    if (c.raw_size != expect_raw)
      throw Error(ErrorCode::kCorrupt, cw_ + ": raw_size is " + std::to_string(c.raw_size) + ", expected " +
                                           std::to_string(expect_raw) + " for its model and precision");
    if (payload_bytes_ > (c.compressed ? expect_raw + expect_raw / 64 + 4096 : expect_raw))
      throw Error(ErrorCode::kCorrupt, cw_ + ": payload is " + std::to_string(payload_bytes_) +
                                           " bytes, more than a " + std::to_string(expect_raw) +
                                           "-byte chunk can take");
  }

  // Into a buffer recycled from a consumed chunk.
  void read_payload(detail::ChunkCursor& rows, StoredChunk& c) {
    if (!spare_.empty()) {
      c.payload = std::move(spare_.back());
      spare_.pop_back();
    }
    rows.read_payload(c.chunk_id, payload_bytes_, c.payload, cw_);
  }

  // A lone or small chunk is decoded here when it is consumed: handing it to a
  // worker costs more than it saves (a thread wake-up, measured up to
  // milliseconds on a busy machine, against ~0.1 ms of decoding).
  void start_decoding(std::unique_ptr<StoredChunk> c) {
    StoredChunk* raw = c.get();
    owned_.push_back(std::move(c));
    auto job = [raw, decode = &decode_, cw = cw_] {
      try {
        (*decode)(*raw);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kCorrupt) throw;
        throw Error(ErrorCode::kCorrupt, cw + ": " + e.what());
      }
    };
    if (start_.n <= chunk_tokens_ || raw->raw_size < (int64_t{256} << 10))
      inflight_.emplace_back(raw, std::async(std::launch::deferred, job));
    else
      inflight_.emplace_back(raw, s_.pool.submit(job));
  }

  void finish_front() {
    inflight_.front().second.get();
    consume_(*inflight_.front().first);
    spare_.push_back(std::move(inflight_.front().first->payload));
    inflight_.pop_front();
  }

  Store::Impl& s_;
  const detail::ScanStart& start_;
  const std::string& here_;
  const int64_t chunk_tokens_;
  detail::ChunkListWalk walk_;
  const ChunkFn& decode_;
  const ChunkFn& consume_;
  ChunkHash chain_;
  std::string cw_;              // the current chunk, for messages
  int64_t payload_bytes_ = 0;   // the current chunk's payload size
  std::vector<std::unique_ptr<StoredChunk>> owned_;
  std::deque<std::pair<StoredChunk*, std::future<void>>> inflight_;
  std::vector<std::vector<uint8_t>> spare_;
};

// A scan's conversation, model and length, checked.
detail::ScanStart scan_start(Store::Impl& s, const std::string& id, const ModelSignature* expect, int64_t limit,
                             const std::string& here) {
  detail::ScanStart start;
  start.conv = s.get_conversation(id);
  start.model = s.model_by_id(start.conv.model_id);
  if (start.conv.count < 0) throw_negative_count(start.conv, here);
  if (expect && *expect != start.model.sig)
    throw Error(ErrorCode::kModelMismatch, here + ": stored for model [" + start.model.text +
                                               "], but the caller's model is [" + expect->to_string() + "]");
  start.n = (limit >= 0 && limit < start.conv.count) ? limit : start.conv.count;
  return start;
}

}  // namespace

void Store::Impl::scan(const std::string& id, const ModelSignature* expect, int64_t limit,
                       const std::function<void(const detail::ScanStart&)>& on_start,
                       const std::function<void(StoredChunk&)>& decode,
                       const std::function<void(StoredChunk&)>& consume) {
  const std::string here = where(id);
  const auto snapshot = catalog->begin(detail::Catalog::Access::kRead, here);
  const detail::ScanStart start = scan_start(*this, id, expect, limit, here);
  on_start(start);
  if (start.n == 0) return;
  read_rows(here, [&] { ChunkScan(*this, start, here, decode, consume).run(); });
}

// ---------------------------------------------------------------------------
// Store

Store::Store(const std::string& path, const Options& options) : impl_(new Impl(path, options)) {}
Store::~Store() = default;
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

const std::string& Store::path() const { return impl_->path; }
const Options& Store::options() const { return impl_->options; }

int Store::schema_version() const {
  detail::StoreCall call(*impl_, detail::StoreCall::NoWait{});  // reads no conversation
  return with_context(impl_->where(), [&] { return impl_->catalog->schema_version(); });
}

int Store::library_schema_version() { return detail::latest_schema_version(); }

int64_t Store::count(const std::string& id) {
  detail::StoreCall call(*impl_, id);
  auto c = impl_->find_conversation(id);
  return c ? c->count : 0;
}

bool Store::exists(const std::string& id) {
  detail::StoreCall call(*impl_, id);
  return impl_->find_conversation(id).has_value();
}

void Store::create(const std::string& id, const ModelSignature& model, const std::string& title,
                   const std::string& metadata) {
  detail::StoreCall call(*impl_, id);
  Impl& s = *impl_;
  detail::AppendRequest req;
  req.id = id;
  req.model = model;
  req.len = 0;
  req.must_create = true;
  req.title = title;
  req.metadata = metadata;
  if (!s.is_json(metadata)) throw Error(ErrorCode::kInvalidArgument, s.where(id) + ": metadata is not valid JSON text");
  s.append(req);  // row, title and metadata in one transaction
}

void Store::append(const std::string& id, const ModelSignature& model, const int32_t* tokens, int64_t len,
                   const KvSource& kv) {
  detail::StoreCall call(*impl_, id);
  Impl& s = *impl_;
  model.validate();
  if (len > 0)
    check_kv_pointers(model, reinterpret_cast<const void* const*>(kv.Lc), reinterpret_cast<const void* const*>(kv.Rc),
                      reinterpret_cast<const void* const*>(kv.Ic), s.where(id));
  detail::AppendRequest req;
  req.id = id;
  req.model = model;
  req.len = len;
  req.tokens = tokens;
  const int level = s.options.zstd_level;
  req.produce = [&model, &kv, level](int64_t first, int64_t n, detail::ProducedChunk& out) {
    out.encoded = detail::encode_chunk(n, out.tokens.data(), detail::engine_planes(model, kv, first), level,
                                       out.precision, &out.stored_digests);
  };
  s.append(req);
}

int64_t Store::load(const std::string& id, const ModelSignature& model, int32_t* tokens, int64_t max_tokens,
                    const KvTarget& kv, int64_t limit) {
  detail::StoreCall call(*impl_, id);
  Impl& s = *impl_;
  const std::string here = s.where(id);
  model.validate();
  int64_t n = 0;
  s.scan(
      id, &model, limit,
      [&](const detail::ScanStart& st) {
        n = st.n;
        if (n > max_tokens)
          throw Error(ErrorCode::kTooLarge, here + ": " + std::to_string(n) + " tokens do not fit the caller's maximum of " +
                                                std::to_string(max_tokens));
        if (n > 0) {
          if (!tokens) throw Error(ErrorCode::kInvalidArgument, here + ": tokens is null");
          check_kv_pointers(model, reinterpret_cast<const void* const*>(kv.Lc),
                            reinterpret_cast<const void* const*>(kv.Rc), reinterpret_cast<const void* const*>(kv.Ic),
                            here);
        }
        detail::throw_if_evicted(s, st, tokens);  // kEvicted with the token ids, before any KV byte
      },
      [&](StoredChunk& c) {
        if (c.wanted == c.n_tokens) {
          detail::decode_chunk(c.payload.data(), c.payload.size(), c.compressed, c.raw_size, c.checksum, c.n_tokens,
                               c.tokens.data(), detail::engine_planes(model, kv, c.first_pos), c.precision);
          return;
        }
        // Only a prefix of this chunk is wanted: decode it aside, copy that part.
        std::vector<float> buf(static_cast<size_t>(c.n_tokens * model.floats_per_token()));
        PlaneList packed = detail::packed_planes(model, buf.data(), c.n_tokens);
        detail::decode_chunk(c.payload.data(), c.payload.size(), c.compressed, c.raw_size, c.checksum, c.n_tokens,
                             c.tokens.data(), packed, c.precision);
        PlaneList dst = detail::engine_planes(model, kv, c.first_pos);
        for (size_t p = 0; p < dst.size(); ++p)
          std::memcpy(dst[p].base, packed[p].base, static_cast<size_t>(c.wanted * packed[p].width) * 4);
      },
      [&](StoredChunk& c) { std::copy(c.tokens.begin(), c.tokens.begin() + c.wanted, tokens + c.first_pos); });
  if (!s.options.read_only) {
    // Recency for list() and eviction. It must neither fail the load nor wait
    // for another writer's lock: it is skipped when the database is busy.
    s.catalog->touch_used_if_idle(id, now_ms());
  }
  return n;
}

std::vector<int32_t> Store::tokens(const std::string& id) {
  detail::StoreCall call(*impl_, id);
  Impl& s = *impl_;
  const std::string here = s.where(id);
  const auto snapshot = s.catalog->begin(detail::Catalog::Access::kRead, here);
  ConversationRow c = s.get_conversation(id);
  if (c.count < 0) throw_negative_count(c, here);
  // Grown by what the chunks hold, not reserved by what the count claims.
  std::vector<int32_t> out;
  read_rows(here, [&] {
    s.catalog->for_each_token_list(c.id, std::numeric_limits<int64_t>::max(), [&](int64_t chunk_id, int64_t n_tokens, std::string_view json) {
      auto t = parse_tokens_or_throw(json.data(), static_cast<int64_t>(json.size()), n_tokens,
                                     here + ": chunk " + std::to_string(chunk_id));
      out.insert(out.end(), t.begin(), t.end());
    });
  });
  if (static_cast<int64_t>(out.size()) != c.count)
    throw Error(ErrorCode::kCorrupt, here + ": its chunks hold " + std::to_string(out.size()) + " tokens but its count is " +
                                         std::to_string(c.count));
  return out;
}

namespace {

// A chunk holding the first `keep` positions of a stored chunk: re-encoded
// from its decoded content (for a truncate or a fork that ends inside it).
struct PrefixChunk {
  detail::ProducedChunk produced;
  ChunkHash hash;
  ChunkHash prev;
  TailRegion region;
};

PrefixChunk reencode_prefix(Store::Impl& s, const ModelRow& model, int64_t chunk_id,
                            int64_t seq, int64_t keep, const ChunkHash& prev, const std::string& here) {
  PrefixChunk out;
  with_context(here, [&] {
    const std::optional<detail::ChunkContent> stored = s.catalog->read_chunk(chunk_id);
    if (!stored) throw Error(ErrorCode::kCorrupt, here + ": chunk " + std::to_string(chunk_id) + " is missing");
    const int64_t n = stored->n_tokens;
    const std::string cw = here + ": chunk " + std::to_string(chunk_id) + " (seq " + std::to_string(seq) + ")";
    if (n < keep || n > model.chunk_tokens)
      throw Error(ErrorCode::kCorrupt, cw + ": holds " + std::to_string(n) + " tokens, not the " + std::to_string(keep) +
                                           " to " + std::to_string(model.chunk_tokens) + " its place needs");
    std::vector<int32_t> toks =
        parse_tokens_or_throw(stored->tokens_json.data(), static_cast<int64_t>(stored->tokens_json.size()), n, cw);
    detail::ChunkPrecision precision;
    if (!detail::parse_precision(stored->precision, precision))
      throw Error(ErrorCode::kCorrupt, cw + ": unknown precision '" + stored->precision + "'");
    out.prev = prev;
    if (!stored->payload) {  // evicted: the prefix is a token-only chunk, evicted too
      toks.resize(static_cast<size_t>(keep));
      out.produced.tokens = toks;
      out.produced.encoded.raw_size = keep * model.sig.floats_per_token() * detail::precision_value_bytes(precision);
      out.produced.encoded.digest = detail::kNoValuesDigest;
      out.hash = detail::chain_next(prev, toks.data(), keep);
      return;
    }
    std::vector<float> buf(static_cast<size_t>(n * model.sig.floats_per_token()));
    PlaneList packed = detail::packed_planes(model.sig, buf.data(), n);
    bool compressed = false;
    if (!detail::parse_compression(stored->compression, compressed))
      throw Error(ErrorCode::kCorrupt, cw + ": unknown compression '" + stored->compression + "'");
    try {
      detail::decode_chunk(stored->payload->data(), stored->payload->size(), compressed,
                           stored->raw_size, static_cast<uint32_t>(stored->checksum), n, toks.data(), packed,
                           precision);
    } catch (const Error& e) {
      throw Error(e.code(), cw + ": " + e.what());
    }
    toks.resize(static_cast<size_t>(keep));
    out.produced.tokens = toks;
    // The packed planes of the first `keep` positions have stride == width.
    out.produced.precision = precision;  // bf16 values widened and rounded again are unchanged
    out.produced.encoded = detail::encode_chunk(keep, toks.data(), packed, s.options.zstd_level, precision);
    out.hash = detail::chain_next(prev, toks.data(), keep);
  });
  return out;
}

// How a cut at position `len` splits a chunk list: the entries kept whole,
// and the one the cut falls inside, whose first positions become a piece.
struct Cut {
  size_t whole = 0;     // entries [0, whole) end at or before the cut
  int64_t covered = 0;  // where they end
  bool inside = false;  // entry `whole` starts before the cut and ends after it
};

Cut cut_at(const std::vector<ChunkSummary>& chunks, int64_t len) {
  Cut cut;
  for (; cut.whole < chunks.size(); ++cut.whole) {
    const int64_t end = chunks[cut.whole].first_pos + chunks[cut.whole].n_tokens;
    if (end > len) break;
    cut.covered = end;
  }
  cut.inside = cut.covered < len;
  return cut;
}

// The chain hash before chunk list entry k: the seed at entry 0.
ChunkHash chain_before(const ConversationState& st, size_t k) {
  return k > 0 ? st.chunks[k - 1].chain : detail::chain_seed(st.model.text, st.conv.precision);
}

// The tail kept before the piece a cut at `len` makes: the pieces before it
// (at most kMaxTailPieces, each of fewer than C tokens).
TailRegion kept_tail_region(Store::Impl& s, const ConversationState& st, const Cut& cut, int64_t len,
                            const std::string& here) {
  TailRegion r;
  const int64_t C = st.model.chunk_tokens;
  r.first = detail::tail_start(len, C);
  if (r.first == cut.covered) return r;  // the piece starts the tail
  const size_t full = static_cast<size_t>(r.first / C);
  r.anchor = chain_before(st, full);
  with_context(here, [&] {
    for (size_t k = full; k < cut.whole; ++k) {
      const std::vector<int32_t> t = chunk_tokens_by_id(*s.catalog, st.chunks[k].chunk_id, st.chunks[k].n_tokens, here);
      r.before.insert(r.before.end(), t.begin(), t.end());
    }
  });
  return r;
}

// The first len - cut.covered positions of the entry the cut falls inside, as a piece.
std::optional<PrefixChunk> cut_piece(Store::Impl& s, const ConversationState& st, const Cut& cut, int64_t len,
                                     const std::string& here) {
  if (!cut.inside) return std::nullopt;
  const ChunkHash prev = chain_before(st, cut.whole);
  PrefixChunk piece = reencode_prefix(s, st.model, st.chunks[cut.whole].chunk_id, static_cast<int64_t>(cut.whole),
                                      len - cut.covered, prev, here);
  piece.region = kept_tail_region(s, st, cut, len, here);
  return piece;
}

// Links the piece cut_piece made at the cut.
void link_cut_piece(Store::Impl& s, const ConversationState& st, const Cut& cut, PrefixChunk& piece, int64_t conv_id) {
  WriteChunk w;
  w.seq = static_cast<int64_t>(cut.whole);
  w.first_pos = cut.covered;
  w.hash = piece.hash;
  w.produced = std::move(piece.produced);
  w.prev = piece.prev;
  w.n = static_cast<int64_t>(w.produced.tokens.size());
  w.region = std::move(piece.region);
  s.catalog->insert_link(conv_id, w.seq, put_chunk(s, st.model, w, st.conv.precision, s.where(st.conv.name)));
}

}  // namespace

void Store::truncate(const std::string& id, int64_t len) {
  detail::StoreCall call(*impl_, id);
  Impl& s = *impl_;
  const std::string here = s.where(id);
  s.require_writable("truncate conversation '" + id + "'");
  ConversationState state = read_state(s, id, here);
  const ConversationRow& c = state.conv;
  const std::vector<ChunkSummary>& chunks = state.chunks;
  if (len < 0 || len > c.count)
    throw Error(ErrorCode::kInvalidArgument, here + ": cannot truncate to " + std::to_string(len) + " tokens; it holds " +
                                                 std::to_string(c.count));
  if (len == c.count) return;
  const Cut cut = cut_at(chunks, len);
  std::optional<PrefixChunk> tail = cut_piece(s, state, cut, len, here);
  const auto txn = s.catalog->begin(detail::Catalog::Access::kWrite, here);
  with_context(here, [&] {
    auto now = s.find_conversation(id);
    if (!now || now->generation != c.generation)
      throw Error(ErrorCode::kConflict, here + ": another writer changed the conversation meanwhile; retry");
    std::vector<int64_t> dropped;
    for (size_t k = cut.whole; k < chunks.size(); ++k) dropped.push_back(chunks[k].chunk_id);
    s.catalog->unlink_from(c.id, static_cast<int64_t>(cut.whole));
    if (tail) link_cut_piece(s, state, cut, *tail, c.id);
    s.catalog->set_count(c.id, len, now_ms(), /*used=*/false);
    s.free_unused_chunks(dropped);
  });
  txn->commit();
}

void Store::remove(const std::string& id) {
  detail::StoreCall call(*impl_, id);
  Impl& s = *impl_;
  const std::string here = s.where(id);
  s.require_writable("delete conversation '" + id + "'");
  const auto txn = s.catalog->begin(detail::Catalog::Access::kWrite, here);
  ConversationRow c = s.get_conversation(id);
  with_context(here, [&] {
    std::vector<int64_t> ids;
    for (const auto& ch : s.catalog->chunk_list(c.id)) ids.push_back(ch.chunk_id);
    s.catalog->delete_conversation(c.id);
    s.free_unused_chunks(ids);
  });
  txn->commit();
  s.catalog->erase_deleted(here);  // its bytes, out of the store's files too
}

void Store::fork(const std::string& src, const std::string& dst, int64_t len) {
  detail::StoreCall call(*impl_);
  Impl& s = *impl_;
  const std::string here = s.where(src);
  s.require_writable("fork conversation '" + src + "'");
  if (dst.empty()) throw Error(ErrorCode::kInvalidArgument, here + ": fork target id is empty");
  ConversationState state = read_state(s, src, here);
  const ConversationRow& c = state.conv;
  const std::vector<ChunkSummary>& chunks = state.chunks;
  if (s.find_conversation(dst))
    throw Error(ErrorCode::kConflict, s.where(dst) + ": cannot fork into it: a conversation with this id exists already");
  if (len < 0) len = c.count;
  if (len > c.count)
    throw Error(ErrorCode::kInvalidArgument, here + ": cannot fork " + std::to_string(len) + " tokens; it holds " +
                                                 std::to_string(c.count));
  const Cut cut = cut_at(chunks, len);  // the chunks before the cut are shared as they are
  std::optional<PrefixChunk> tail = cut_piece(s, state, cut, len, here);
  const auto txn = s.catalog->begin(detail::Catalog::Access::kWrite, here);
  with_context(here, [&] {
    auto now = s.find_conversation(src);
    if (!now || now->generation != c.generation)
      throw Error(ErrorCode::kConflict, here + ": another writer changed the conversation meanwhile; retry");
    if (s.find_conversation(dst))
      throw Error(ErrorCode::kConflict, s.where(dst) + ": cannot fork into it: a conversation with this id exists already");
    const int64_t t = now_ms();
    const int64_t dst_id = s.catalog->insert_fork({dst, c.id, len, t});
    for (size_t k = 0; k < cut.whole; ++k) s.catalog->insert_link(dst_id, static_cast<int64_t>(k), chunks[k].chunk_id);
    if (tail) link_cut_piece(s, state, cut, *tail, dst_id);
    s.catalog->touch_used(c.id, t);
  });
  txn->commit();
}

namespace {

void update_text_column(Store::Impl& s, const std::string& id, detail::ConversationText column,
                        const std::string& value) {
  const std::string here = s.where(id);
  s.require_writable(std::string("set ") + detail::text_column_name(column) + " of conversation '" + id + "'");
  const auto txn = s.catalog->begin(detail::Catalog::Access::kWrite, here);
  with_context(here, [&] {
    if (!s.catalog->set_text(id, column, value, now_ms()))
      throw Error(ErrorCode::kNotFound, here + ": no such conversation");
  });
  txn->commit();
}

}  // namespace

void Store::rename(const std::string& old_id, const std::string& new_id) {
  detail::StoreCall call(*impl_);
  Impl& s = *impl_;
  if (new_id.empty()) throw Error(ErrorCode::kInvalidArgument, s.where(old_id) + ": the new id is empty");
  if (old_id == new_id) {
    s.get_conversation(old_id);
    return;
  }
  s.require_writable("rename conversation '" + old_id + "'");
  s.get_conversation(old_id);
  // Checked here for a clear message; the UNIQUE constraint catches a race.
  if (s.find_conversation(new_id))
    throw Error(ErrorCode::kConflict, s.where(new_id) + ": cannot rename '" + old_id + "' to it: the id is taken");
  update_text_column(s, old_id, detail::ConversationText::kName, new_id);
}

void Store::set_title(const std::string& id, const std::string& title) {
  detail::StoreCall call(*impl_, id);
  update_text_column(*impl_, id, detail::ConversationText::kTitle, title);
}

void Store::set_metadata(const std::string& id, const std::string& metadata_json) {
  detail::StoreCall call(*impl_, id);
  Impl& s = *impl_;
  if (!s.is_json(metadata_json)) throw Error(ErrorCode::kInvalidArgument, s.where(id) + ": metadata is not valid JSON text");
  update_text_column(s, id, detail::ConversationText::kMetadata, metadata_json);
}

namespace {

// Sizes derived from a store's counts: a hostile count (one no colikv
// writes) must not overflow them, which would be undefined and then shown.
int64_t checked_product(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw Error(ErrorCode::kCorrupt, what + ": " + std::to_string(a) + " tokens of " + std::to_string(b) +
                                         " bytes overflow a 64-bit size (a count no colikv writes)");
  return out;
}

int64_t checked_sum(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw Error(ErrorCode::kCorrupt, what + ": the totals overflow a 64-bit size (counts no colikv writes)");
  return out;
}

ConversationInfo info_from_row(Store::Impl& s, detail::ConversationInfoRow&& r) {
  ConversationInfo i;
  i.id = std::move(r.name);
  ModelRow m = s.model_by_id(r.model_id);
  i.model = m.sig;
  i.tokens = r.count;
  i.title = std::move(r.title);
  i.metadata = std::move(r.metadata);
  i.parent = std::move(r.parent);
  i.forked_at = r.forked_at;
  i.created_ms = r.created_ms;
  i.updated_ms = r.updated_ms;
  i.last_used_ms = r.last_used_ms;
  i.stored_bytes = r.stored_bytes;
  i.raw_bytes = checked_product(i.tokens, m.sig.record_bytes(), s.where(i.id));
  i.evicted = r.evicted;
  i.precision = std::move(r.precision);
  return i;
}

}  // namespace

ConversationInfo Store::info(const std::string& id) {
  detail::StoreCall call(*impl_, id);
  Impl& s = *impl_;
  return read_rows(s.where(id), [&] {
    std::optional<detail::ConversationInfoRow> row = s.catalog->conversation_info(id);
    if (!row) throw Error(ErrorCode::kNotFound, s.where(id) + ": no such conversation");
    return info_from_row(s, std::move(*row));
  });
}

std::vector<ConversationInfo> Store::list(const ListOptions& options) {
  detail::StoreCall call(*impl_);
  Impl& s = *impl_;
  return read_rows(s.where(), [&] {
    std::vector<ConversationInfo> out;
    for (auto& row : s.catalog->list_conversations(options.limit, std::max<int64_t>(0, options.offset)))
      out.push_back(info_from_row(s, std::move(row)));
    return out;
  });
}

int64_t Store::conversation_count() {
  detail::StoreCall call(*impl_);
  return with_context(impl_->where(), [&] { return impl_->catalog->conversation_count(); });
}

// ---------------------------------------------------------------------------
// Verify and stats

namespace {

// Which conversation wrote the values a conversation holds at `first_pos`:
// follow its fork parents while the position lies below the fork point.
// A fork of a deleted conversation (parent_id NULL, forked_at > 0) has lost
// its lineage: its inherited chunks are given an origin of their own.
struct Lineage {
  int64_t parent = 0;  // 0: none or deleted
  int64_t forked_at = 0;
};

int64_t origin_of(const std::map<int64_t, Lineage>& lineage, int64_t conv, int64_t first_pos) {
  for (size_t hops = 0; hops <= lineage.size(); ++hops) {  // bounded: parent_id may be corrupt
    auto it = lineage.find(conv);
    if (it == lineage.end() || first_pos >= it->second.forked_at) return conv;
    if (it->second.parent == 0) return -conv;
    conv = it->second.parent;
  }
  return conv;
}

// Chunks written before schema 5 (no content digest) that still hold values
// and are used by conversations whose values come from different origins:
// schema 4 shared them by token ids alone.
std::vector<UncomparedShare> find_uncompared_shares(detail::Catalog& catalog, const std::string& only) {
  std::map<int64_t, Lineage> lineage;
  std::map<int64_t, std::string> names;
  for (detail::LineageRow& r : catalog.lineage()) {
    names[r.id] = std::move(r.name);
    lineage[r.id] = {r.parent_id, r.forked_at};
  }
  std::vector<UncomparedShare> out;
  UncomparedShare cur;
  std::set<int64_t> origins;
  auto flush = [&] {
    const bool wanted = only.empty() || std::find(cur.conversations.begin(), cur.conversations.end(), only) !=
                                            cur.conversations.end();
    if (origins.size() > 1 && wanted) {
      std::sort(cur.conversations.begin(), cur.conversations.end());
      out.push_back(cur);
    }
    cur = UncomparedShare();
    origins.clear();
  };
  catalog.for_each_undigested_share([&](const detail::ChunkUse& use) {
    if (use.chunk.chunk_id != cur.chunk_id) {
      if (cur.chunk_id >= 0) flush();
      cur.chunk_id = use.chunk.chunk_id;
      cur.first_pos = use.chunk.first_pos;
      cur.end_pos = cur.first_pos + use.chunk.n_tokens;
    }
    const int64_t conv = use.conversation_id;
    cur.conversations.push_back(names.count(conv) ? names[conv] : "#" + std::to_string(conv));
    origins.insert(origin_of(lineage, conv, cur.first_pos));
  });
  if (cur.chunk_id >= 0) flush();
  return out;
}

// A verify, as steps: the file's integrity check, each conversation's chunk
// list (place, tokens, chain hash, then each distinct chunk decoded once),
// the shares never compared by content, and chunks no conversation uses.
class Verifier {
 public:
  Verifier(Store::Impl& s, const std::string& only, const ProgressFn& progress)
      : s_(s), only_(only), progress_(progress) {}

  VerifyReport run() {
    check_integrity();
    list_conversations();
    int64_t total_tokens = 0, done_tokens = 0;
    for (auto& c : convs_) total_tokens = detail::saturating_add(total_tokens, c.count);
    for (auto& c : convs_) {
      ++report_.conversations;
      verify_conversation(c);
      done_tokens = detail::saturating_add(done_tokens, c.count);
      if (progress_) progress_(done_tokens, total_tokens);
    }
    report_.uncompared_shares = find_uncompared_shares(*s_.catalog, only_);
    if (only_.empty()) find_unused_chunks();
    return std::move(report_);
  }

 private:
  using Conv = ConversationRow;

  // Where one conversation's walk along its chunk list is.
  struct Walk {
    const Conv& conv;
    ModelRow model;
    ChunkHash chain;
    detail::ChunkListWalk layout;
    bool chain_ok = true;
    // The region the chunk is indexed by (docs/format.md, "chunk_meta").
    ChunkHash anchor{};           // the chain hash where it starts
    std::vector<int32_t> region{};  // its tokens so far: at most C
  };

  void problem(const Conv& c, int64_t seq, int64_t chunk_id, int64_t a, int64_t b, const std::string& what) {
    report_.problems.push_back({c.name, seq, chunk_id, a, b, what});
  }

  void check_integrity() {
    const detail::IntegrityReport integrity = s_.catalog->check_integrity();
    report_.integrity = integrity.text;
    if (integrity.text != "ok")
      report_.problems.push_back({"", -1, -1, -1, -1, integrity.check + ": " + integrity.text});
  }

  void list_conversations() {
    convs_ = s_.catalog->conversations_to_verify(only_);
  }

  void verify_conversation(const Conv& c) {
    if (!c.malformed.empty()) {
      problem(c, -1, -1, -1, -1, c.malformed);
      return;
    }
    ModelRow m;
    try {
      m = s_.model_by_id(c.model_id);
    } catch (const Error& e) {
      problem(c, -1, -1, 0, c.count, e.what());
      return;
    }
    Walk walk{c, m, detail::chain_seed(m.text, c.precision), detail::ChunkListWalk(m.chunk_tokens, c.count)};
    try {
      read_rows("its chunk list", [&] {
        s_.catalog->for_each_verify_row(c.id, [&](const detail::VerifyChunkRow& row) { verify_chunk_row(walk, row); });
      });
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kCorrupt) throw;
      problem(c, -1, -1, -1, -1, e.what());  // a row it cannot read: the rest of its list is not checked
      return;
    }
    const int64_t covered = walk.layout.covered();
    if (covered != c.count)
      problem(c, -1, -1, std::min(covered, c.count), std::max(covered, c.count),
              "chunks cover " + std::to_string(covered) + " positions but the count is " + std::to_string(c.count));
  }

  void verify_chunk_row(Walk& walk, const detail::VerifyChunkRow& row) {
    const Conv& c = walk.conv;
    const int64_t seq = row.seq;
    const int64_t first = row.first_pos;
    const int64_t n = row.n_tokens;
    if (!row.chunk_id) {
      problem(c, seq, -1, walk.layout.covered(), walk.layout.covered(), "the chunk list names a chunk that does not exist");
      walk.chain_ok = false;
      return;
    }
    const int64_t chunk_id = *row.chunk_id;
    const std::string misplaced = walk.layout.next(seq, first, n);
    if (!misplaced.empty() || row.model_id != c.model_id) {
      problem(c, seq, chunk_id, first, detail::saturating_add(first, std::max<int64_t>(n, 0)),
              misplaced.empty() ? "the chunk belongs to another model" : "the chunk " + misplaced);
      walk.layout.skip(seq, first, n);
      walk.chain_ok = false;
      return;
    }
    std::vector<int32_t> toks;
    const std::string_view tokens_json = row.tokens_json;
    const char* text = static_cast<int64_t>(tokens_json.size()) <= detail::max_tokens_json_bytes(n) ? tokens_json.data() : nullptr;
    if (!text || !detail::parse_tokens_json(text, tokens_json.size(), toks) ||
        static_cast<int64_t>(toks.size()) != n) {
      problem(c, seq, chunk_id, first, first + n, "token list is not a JSON array of " + std::to_string(n) + " ids");
      walk.chain_ok = false;
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      if (toks[i] < 0 || toks[i] >= walk.model.sig.vocab) {
        problem(c, seq, chunk_id, first + i, first + i + 1, "token id " + std::to_string(toks[i]) + " is outside the vocabulary");
        break;
      }
    const std::optional<ChunkHash>& digest = row.digest;
    const ChunkHash before = walk.chain;
    if (walk.chain_ok) {
      ChunkHash h = detail::chain_next(walk.chain, toks.data(), n);
      if (!key_matches(row.key, digest, h)) {
        problem(c, seq, chunk_id, first, first + n, "chunk hash does not match the token ids before and in it");
        walk.chain_ok = false;
      }
      walk.chain = h;
    }
    check_index(walk, row, before, toks);
    auto seen = chunk_result_.find(chunk_id);
    if (seen == chunk_result_.end()) seen = chunk_result_.emplace(chunk_id, check_payload(walk, row, toks)).first;
    if (!seen->second.empty()) problem(c, seq, chunk_id, first, first + n, seen->second);
  }

  // chunk_meta indexes a chunk by its region: the chain hash at the chunk
  // boundary at or before it (a tail piece: the anchor), and the token ids
  // from there to its end. Checked while the chain is known.
  void check_index(Walk& walk, const detail::VerifyChunkRow& row, const ChunkHash& before,
                   const std::vector<int32_t>& toks) {
    const int64_t C = walk.model.chunk_tokens;
    const int64_t region_first = row.first_pos / C * C;
    if (row.first_pos == region_first) {
      walk.anchor = before;
      walk.region.clear();
    }
    walk.region.insert(walk.region.end(), toks.begin(), toks.end());
    if (!walk.chain_ok || !row.has_index) return;
    const std::string anchor = region_first == 0 ? std::string()
                                                 : std::string(reinterpret_cast<const char*>(walk.anchor.data()),
                                                               walk.anchor.size());
    const int64_t end = row.first_pos + row.n_tokens;
    if (row.index_prev && *row.index_prev != anchor)
      problem(walk.conv, row.seq, *row.chunk_id, row.first_pos, end,
              "chunk_meta.prev_hash is not the chain hash at position " + std::to_string(region_first) +
                  ", where the chunk's region starts");
    const int64_t region_n = static_cast<int64_t>(walk.region.size());
    if (row.index_tokens_json != detail::tokens_to_json(walk.region.data(), region_n))
      problem(walk.conv, row.seq, *row.chunk_id, row.first_pos, end,
              "chunk_meta.tokens is not the token ids of " + range_text(region_first, end) + ", the chunk's region");
    // match finds conversations by it (and checks it against the chunk's key).
    if (row.index_chain != walk.chain)
      problem(walk.conv, row.seq, *row.chunk_id, row.first_pos, end,
              "chunk_meta.chain_hash is not the chain hash of " + range_text(0, end) + ", the chunk's end");
  }

  // A chunk's payload decoded and checked: "" when sound (or evicted: only
  // its token ids are kept, by design), else what is wrong.
  std::string check_payload(const Walk& walk, const detail::VerifyChunkRow& row, const std::vector<int32_t>& toks) {
    if (!row.has_payload) return "";
    const int64_t n = static_cast<int64_t>(toks.size());
    const std::string& comp = row.compression;
    try {
      bool compressed = false;
      if (!detail::parse_compression(comp, compressed))
        throw Error(ErrorCode::kCorrupt, "unknown compression '" + comp + "'");
      detail::ChunkPrecision precision;
      if (!detail::parse_precision(row.precision, precision))
        throw Error(ErrorCode::kCorrupt, "unknown precision '" + row.precision + "'");
      std::vector<float> buf(static_cast<size_t>(n * walk.model.sig.floats_per_token()));
      ChunkHash decoded_digest;
      detail::decode_chunk(row.payload, row.payload_bytes, compressed, row.raw_size, static_cast<uint32_t>(row.checksum),
                           n, toks.data(), detail::packed_planes(walk.model.sig, buf.data(), n), precision,
                           &decoded_digest);
      if (row.digest && decoded_digest != *row.digest)
        throw Error(ErrorCode::kCorrupt, "content digest does not match its decoded values");
      ++report_.chunks;
      report_.bytes += static_cast<int64_t>(buf.size()) * 4;
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  }

  void find_unused_chunks() {
    for (const detail::ChunkPlace& c : s_.catalog->unused_chunks())
      report_.problems.push_back({"", -1, c.chunk_id, c.first_pos, detail::saturating_add(c.first_pos, c.n_tokens),
                                  "chunk is not used by any conversation"});
  }

  Store::Impl& s_;
  const std::string& only_;
  const ProgressFn& progress_;
  VerifyReport report_;
  std::vector<Conv> convs_;
  std::map<int64_t, std::string> chunk_result_;  // chunk_id -> "" or its problem
};

// kNotFound for a missing id; a row that exists but cannot be read is the
// Verifier's to report, not an error.
void require_exists_for_verify(Store::Impl& s, const std::string& id) {
  try {
    s.get_conversation(id);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kCorrupt) throw;
  }
}

}  // namespace

VerifyReport Store::verify(const std::string& id, const ProgressFn& progress) {
  detail::StoreCall call(*impl_, id.empty() ? nullptr : &id);
  Impl& s = *impl_;
  const auto snapshot = s.catalog->begin(detail::Catalog::Access::kRead, s.where(id));
  if (!id.empty()) require_exists_for_verify(s, id);
  return read_rows(s.where(id), [&] { return Verifier(s, id, progress).run(); });
}

StoreStats Store::stats() {
  detail::StoreCall call(*impl_);
  Impl& s = *impl_;
  StoreStats out;
  const auto snapshot = s.catalog->begin(detail::Catalog::Access::kRead, s.where());
  read_rows(s.where(), [&] {
    for (const detail::ModelUsageRow& row : s.catalog->model_usage()) {
      UsageStats u;
      u.model = s.model_by_id(row.model_id).sig;
      u.chunk_tokens = row.chunk_tokens;
      // The model's own record size, not the stored column no check covers.
      const int64_t rb = u.model.record_bytes();
      const std::string what = s.where() + ": model row " + std::to_string(row.model_id);
      u.conversations = row.conversations;
      u.tokens = row.tokens;
      u.chunks = row.chunks;
      u.logical_bytes = checked_product(u.tokens, rb, what);
      u.unique_bytes = checked_product(row.chunk_tokens_sum, rb, what);
      u.stored_bytes = row.stored_bytes;
      out.total.conversations += u.conversations;
      out.total.tokens = checked_sum(out.total.tokens, u.tokens, what);
      out.total.chunks += u.chunks;
      out.total.logical_bytes = checked_sum(out.total.logical_bytes, u.logical_bytes, what);
      out.total.unique_bytes = checked_sum(out.total.unique_bytes, u.unique_bytes, what);
      out.total.stored_bytes += u.stored_bytes;
      out.models.push_back(u);
    }
    detail::fill_eviction_stats(s, out);
  });
  out.file_bytes = with_context(s.where(), [&] { return s.catalog->file_bytes(); });  // a server's query can fail
  return out;
}

}  // namespace colikv
