// Cutting a conversation: Store::truncate and Store::fork end it at a
// position, re-encoding the chunk the cut falls inside as a piece;
// Store::write cuts and appends in one transaction; Store::remove deletes it.
#include "store/write/append.h"

#include <optional>
#include <vector>

#include "catalog/backend_error.h"
#include "core/chunk_layout.h"
#include "core/chunk_codec.h"
#include "core/store_limits.h"
#include "store/upkeep/eviction.h"
#include "store/kv_planes.h"
#include "store/store_call.h"

namespace colikv {

using detail::ChunkHash;
using detail::ChunkSummary;
using detail::ConversationRow;
using detail::ModelRow;
using detail::PlaneList;
using detail::now_ms;
using detail::parse_tokens_or_throw;
using detail::chunk_tokens_of;
using detail::ConversationState;
using detail::read_state;
using detail::TailRegion;
using detail::WriteChunk;
using detail::put_chunk;

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
                            int64_t seq, int64_t keep, const ChunkHash& prev, const std::string& here) REQUIRES(s.mu) {
  PrefixChunk out;
  const std::optional<detail::ChunkContent> stored = s.catalog().read_chunk(chunk_id);
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
    out.produced.encoded = detail::values_missing_chunk(keep, model.sig.floats_per_token(), precision);
    out.hash = detail::chain_next(prev, toks.data(), keep);
    return out;
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
  out.produced.encoded = detail::encode_chunk(keep, toks.data(), packed, s.options().zstd_level, precision);
  out.hash = detail::chain_next(prev, toks.data(), keep);
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
ChunkHash chain_before(const Store::Impl& s, const ConversationState& st, size_t k) {
  return k > 0 ? st.chunks[k - 1].chain : s.chain_seed(st.model.text, st.conv.precision);
}

// The tail kept before the piece a cut at `len` makes: the pieces before it
// (at most kMaxTailPieces, each of fewer than C tokens).
TailRegion kept_tail_region(Store::Impl& s, const ConversationState& st, const Cut& cut, int64_t len,
                            const std::string& here) REQUIRES(s.mu) {
  TailRegion r;
  const int64_t C = st.model.chunk_tokens;
  r.first = detail::tail_start(len, C);
  if (r.first == cut.covered) return r;  // the piece starts the tail
  const size_t full = static_cast<size_t>(r.first / C);
  r.anchor = chain_before(s, st, full);
  for (size_t k = full; k < cut.whole; ++k) {
    const std::vector<int32_t> t = chunk_tokens_of(s.catalog(), st.conv.id, st.chunks[k], here);
    r.before.insert(r.before.end(), t.begin(), t.end());
  }
  return r;
}

// The first len - cut.covered positions of the entry the cut falls inside, as a piece.
std::optional<PrefixChunk> cut_piece(Store::Impl& s, const ConversationState& st, const Cut& cut, int64_t len,
                                     const std::string& here) REQUIRES(s.mu) {
  if (!cut.inside) return std::nullopt;
  const ChunkHash prev = chain_before(s, st, cut.whole);
  PrefixChunk piece = reencode_prefix(s, st.model, st.chunks[cut.whole].chunk_id, static_cast<int64_t>(cut.whole),
                                      len - cut.covered, prev, here);
  piece.region = kept_tail_region(s, st, cut, len, here);
  return piece;
}

// The piece cut_piece made, as an edit's one new chunk, at the cut.
class PieceChunk : public detail::TurnChunks {
 public:
  PieceChunk(Store::Impl& s, const ConversationState& st, const Cut& cut, PrefixChunk& piece, std::string here)
      : s_(s), st_(st), here_(std::move(here)) {
    w_.seq = static_cast<int64_t>(cut.whole);
    w_.first_pos = cut.covered;
    w_.hash = piece.hash;
    w_.produced = std::move(piece.produced);
    w_.prev = piece.prev;
    w_.n = static_cast<int64_t>(w_.produced.tokens.size());
    w_.region = std::move(piece.region);
  }
  size_t size() const override { return 1; }
  int64_t raw_bytes() const override { return w_.n * detail::token_raw_bytes(st_.model.sig); }
  bool next(int64_t& raw) override {
    if (taken_) return false;
    taken_ = true;
    raw = raw_bytes();
    return true;
  }
  detail::NewChunkLink store(detail::ChunkWriter& writer, int64_t, detail::ChunkRecord* record) override {
    s_.assert_in_call();  // called back by the catalog inside the piece's apply_turn
    return {w_.seq, put_chunk(s_, writer, st_.model, w_, st_.conv.precision, here_, record != nullptr, record)};
  }
  void stored() override {}

 private:
  Store::Impl& s_;
  const ConversationState& st_;
  const std::string here_;
  WriteChunk w_;
  bool taken_ = false;
};

// A cut's edit of the conversation `st` read: at its generation, of its model.
detail::TurnEdit cut_edit(const ConversationState& st) {
  detail::TurnEdit e;
  e.name = st.conv.name;
  e.conversation_id = st.conv.id;
  e.generation = st.conv.generation;
  e.model_id = st.model.id;
  e.model = st.model.sig;
  e.chunk_tokens = st.model.chunk_tokens;
  e.now_ms = now_ms();
  return e;
}

}  // namespace

void Store::truncate(const std::string& id, int64_t len) {
  detail::StoreCall::run(*impl_, id, [&](Store::Impl& s) REQUIRES(s.mu) {
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
    std::optional<PieceChunk> piece;
    if (tail) piece.emplace(s, state, cut, *tail, s.where(c.name));
    detail::TurnEdit e = cut_edit(state);
    e.unlink_from = static_cast<int64_t>(cut.whole);
    if (piece) e.chunks = &*piece;
    e.count = len;
    e.used = false;
    for (size_t k = cut.whole; k < chunks.size(); ++k) e.free.push_back(chunks[k].chunk_id);
    // The piece is new bytes (the chunk it was cut from may stay, linked by
    // a fork): the limits an append applies, never to this conversation.
    detail::apply_turn(s, e, /*limits=*/piece.has_value(), here);
  });
}

void Store::remove(const std::string& id) {
  detail::StoreCall::run(*impl_, id, [&](Store::Impl& s) REQUIRES(s.mu) {
    const std::string here = s.where(id);
    s.require_writable("delete conversation '" + id + "'");
    const auto txn = s.catalog().begin(detail::Catalog::Access::kWrite, here);
    const ConversationRow c = s.get_conversation(id);
    s.delete_whole(c);
    txn->commit();
    ++s.pending().erases;
    s.catalog().erase_deleted(here);  // its bytes, out of the store's files too
  });
}

void Store::fork(const std::string& src, const std::string& dst, int64_t len) {
  detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
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
    std::optional<PieceChunk> piece;
    if (tail) piece.emplace(s, state, cut, *tail, s.where(c.name));
    detail::TurnEdit e = cut_edit(state);
    e.fork = detail::NewFork{dst, c.id, len, e.now_ms};
    for (size_t k = 0; k < cut.whole; ++k) e.links.push_back({static_cast<int64_t>(k), chunks[k].chunk_id});
    if (piece) e.chunks = &*piece;
    e.touch_parent = true;
    // A fork that ends inside a chunk stores a piece: new bytes, under the
    // limits an append applies (never to the fork itself). One that ends at a
    // chunk boundary only links chunks the tenant holds already.
    detail::apply_turn(s, e, /*limits=*/piece.has_value(), here);
  });
}

void Store::write(const std::string& id, const ModelSignature& model, const int32_t* tokens, int64_t from, int64_t len,
                  const KvSource& kv) {
  detail::StoreCall::run(*impl_, id, [&](Store::Impl& s) REQUIRES(s.mu) {
    detail::StoreCounters::add(s.counters().appends, 1);
    const detail::LatencyTimer timer(s.counters().append_seconds);
    const std::string here = s.where(id);
    s.require_writable("write conversation '" + id + "'");
    model.validate();
    if (from < 0 || from > len)
      throw Error(ErrorCode::kInvalidArgument, here + ": write from position " + std::to_string(from) + " of " +
                                                   std::to_string(len) + " tokens is outside [0, len]");
    if (len > from)
      detail::check_kv_pointers(model, reinterpret_cast<const void* const*>(kv.Lc),
                                reinterpret_cast<const void* const*>(kv.Rc), reinterpret_cast<const void* const*>(kv.Ic),
                                here);
    // The truncate and the append below are savepoints of this one transaction:
    // a divergence or a model mismatch found by the append undoes the truncate.
    // Like an append, it waits for a running checkpoint before it begins, or the
    // WAL grows instead of starting over (and is checkpointed more often).
    if (detail::LocalFiles* files = s.catalog().local_files())
      files->wait_before_write(len > from ? (len - from) * detail::token_raw_bytes(model) : 0);
    const auto txn = s.catalog().begin(detail::Catalog::Access::kWrite, here);
    const int64_t committed = count(id);
    if (from > committed)
      throw Error(ErrorCode::kInvalidArgument, here + ": write from position " + std::to_string(from) +
                                                   " but only " + std::to_string(committed) + " tokens are committed");
    if (from < committed) truncate(id, from);
    detail::append_rows(s, id, model, tokens, from, len, kv, 0);
    txn->commit();
  });
}

}  // namespace colikv
