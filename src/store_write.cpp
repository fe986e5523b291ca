// Store::write and Store::load_range: the calls an engine makes when its
// buffers and the stored conversation part ways (a rewritten tail, rows
// adopted from another conversation). Built from the store's own steps.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/chunk_codec.h"
#include "colikv/store.h"
#include "eviction.h"
#include "backend_error.h"
#include "store_impl.h"

namespace colikv {

using detail::ChunkSummary;
using detail::ConversationRow;
using detail::ExpectedState;
using detail::PlaneList;
using detail::QueuedAppend;

namespace {

// The stored values of positions [base, from): the tail's kept rows, which
// an append that rewrites the tail re-encodes with the new rows.
struct KeptRows {
  int64_t base = 0;          // the tail's first position (a chunk boundary)
  std::vector<float> packed;  // packed_planes layout, from - base rows; empty: none
};

// A KvTarget over packed planes of n rows: what load_rows fills from position `origin` on.
struct PackedTarget {
  std::vector<float*> lc, rc, ic;
  KvTarget target;
  PackedTarget(const ModelSignature& m, float* buf, int64_t n) {
    PlaneList planes = detail::packed_planes(m, buf, n);
    for (int l = 0; l < m.n_layers; ++l) {
      lc.push_back(planes[2 * l].base);
      rc.push_back(planes[2 * l + 1].base);
      // Indexed planes go to the first n_indexed layers: the plane order is what matters.
      ic.push_back(l < m.n_indexed ? planes[2 * m.n_layers + l].base : nullptr);
    }
    target.Lc = lc.data();
    target.Rc = rc.data();
    target.Ic = ic.data();
  }
};

int64_t load_rows(Store::Impl& s, const std::string& id, const ModelSignature& model, int64_t from, int64_t to,
                  int32_t* tokens, const KvTarget& kv, int64_t origin);

KeptRows kept_rows(Store::Impl& s, const std::string& id, const ModelSignature& model, int64_t base, int64_t from) {
  KeptRows k;
  k.base = base;
  if (base == from) return k;
  k.packed.resize(static_cast<size_t>((from - base) * model.floats_per_token()));
  std::vector<int32_t> tokens(static_cast<size_t>(from - base));
  PackedTarget t(model, k.packed.data(), from - base);
  try {
    load_rows(s, id, model, base, from, tokens.data(), t.target, base);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kEvicted) throw;
    k.packed.clear();  // evicted: re-saved from the caller's buffers, as append does
  }
  return k;
}

}  // namespace

void Store::write(const std::string& id, const ModelSignature& model, const int32_t* tokens, int64_t from, int64_t len,
                  const KvSource& kv) {
  detail::StoreCall call(*impl_, id);
  Impl& s = *impl_;
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
  s.catalog->wait_before_write();
  const auto txn = s.catalog->begin(detail::Catalog::Access::kWrite, here);
  const int64_t committed = count(id);
  if (from > committed)
    throw Error(ErrorCode::kInvalidArgument, here + ": write from position " + std::to_string(from) +
                                                 " but only " + std::to_string(committed) + " tokens are committed");
  if (from < committed) truncate(id, from);
  detail::append_rows(s, id, model, tokens, from, len, kv, 0);
  txn->commit();
}

namespace detail {

void append_rows(Store::Impl& s, const std::string& id, const ModelSignature& model, const int32_t* tokens,
                 int64_t from, int64_t len, const KvSource& kv, int64_t origin) {
  // An append that rewrites the tail re-encodes its kept rows from the store,
  // so that [0, from) stays exactly as stored (an engine may have recomputed a
  // kept row meanwhile, e.g. the last prompt token's). A new piece reads nothing.
  KeptRows kept;
  detail::AppendRequest req;
  req.rewrite_tail = [&](int64_t tail_start) { kept = kept_rows(s, id, model, tail_start, from); };
  req.id = id;
  req.model = model;
  req.len = len;
  req.tokens = tokens;
  const int level = s.options.zstd_level;
  req.produce = [&](int64_t first, int64_t n, detail::ProducedChunk& out) {
    if (kept.packed.empty() || first != kept.base) {
      // An evicted full chunk before the caller's rows (a queued turn whose
      // conversation was evicted after it was queued): it stays as the
      // eviction left it, its token ids without values, and the turn commits;
      // the next turn, staged from it, saves its values again.
      if (first < origin) {
        out.encoded = detail::values_missing_chunk(n, model.floats_per_token(), out.precision);
        return;
      }
      out.encoded = detail::encode_chunk(n, out.tokens.data(), detail::engine_planes(model, kv, first - origin), level,
                                         out.precision, &out.stored_digests);
      return;
    }
    std::vector<float> buf(static_cast<size_t>(n * model.floats_per_token()));
    const PlaneList dst = detail::packed_planes(model, buf.data(), n);
    std::vector<float> kept_copy(kept.packed);
    const PlaneList old = detail::packed_planes(model, kept_copy.data(), from - first);
    const PlaneList src = detail::engine_planes(model, kv, from - origin);
    for (size_t p = 0; p < dst.size(); ++p) {
      const size_t w = static_cast<size_t>(dst[p].width);
      std::memcpy(dst[p].base, old[p].base, static_cast<size_t>(from - first) * w * 4);
      std::memcpy(dst[p].base + (from - first) * w, src[p].base, static_cast<size_t>(first + n - from) * w * 4);
    }
    out.encoded = detail::encode_chunk(n, out.tokens.data(), dst, level, out.precision, &out.stored_digests);
  };
  s.append(req);
}

namespace {

// A queued turn, on the writer thread: one transaction, as append's, that
// fails with kConflict unless the conversation holds exactly what the turn
// was validated against (another writer, or a call of this Store, changed it).
void commit_queued(Store::Impl& s, const QueuedAppend& job) {
  StoreCall call(s, StoreCall::NoWait{});
  const std::string here = s.where(job.id);
  s.catalog->wait_before_write();  // as write does: the WAL starts over instead of growing
  const auto txn = s.catalog->begin(Catalog::Access::kWrite, here);
  const std::optional<ConversationRow> conv = s.find_conversation(job.id);
  const int64_t committed = conv ? conv->count : 0;
  if (committed != job.from)
    throw Error(ErrorCode::kConflict, here + ": the queued append of positions [" + std::to_string(job.from) + ", " +
                                          std::to_string(job.len) + ") expected " + std::to_string(job.from) +
                                          " committed tokens but the store holds " + std::to_string(committed) +
                                          " (another writer changed it); reload and retry");
  const QueuedAppend::Source rows = job.source();
  append_rows(s, job.id, job.model, job.tokens.data(), job.from, job.len, rows.kv, job.staged_from);
  txn->commit();
}

// What is stored of a conversation, from one read snapshot: what append_async validates against.
ExpectedState read_expected(Store::Impl& s, const std::string& id, const ModelSignature& model) {
  StoreCall call(s, StoreCall::NoWait{});
  const std::string here = s.where(id);
  const auto snapshot = s.catalog->begin(Catalog::Access::kRead, here);
  ExpectedState st;
  const std::optional<ConversationRow> conv = s.find_conversation(id);
  if (!conv) {
    st.chunk_tokens = s.chunk_tokens_of(model);
    return st;
  }
  st.exists = true;
  const ModelRow stored = s.model_by_id(conv->model_id);
  st.model = stored.sig;
  st.chunk_tokens = stored.chunk_tokens;
  for (const ChunkSummary& c : s.catalog->chunk_list(conv->id)) {
    if (c.evicted && st.evicted_from < 0) st.evicted_from = c.first_pos;
    const std::optional<std::string> json = s.catalog->chunk_tokens_json(c.chunk_id);
    std::vector<int32_t> t;
    if (!json || !parse_tokens_json(json->data(), json->size(), t) || static_cast<int64_t>(t.size()) != c.n_tokens)
      throw Error(ErrorCode::kCorrupt, here + ": the token list of chunk " + std::to_string(c.chunk_id) +
                                           " is missing or malformed");
    st.tokens.insert(st.tokens.end(), t.begin(), t.end());
  }
  if (static_cast<int64_t>(st.tokens.size()) != conv->count)
    throw Error(ErrorCode::kCorrupt, here + ": its chunks hold " + std::to_string(st.tokens.size()) +
                                         " tokens but its count is " + std::to_string(conv->count));
  return st;
}

}  // namespace

std::unique_ptr<AsyncWriter> make_async_writer(Store::Impl& s) {
  return std::make_unique<AsyncWriter>(
      s.options.max_queued_bytes, s.pool, [&s](const QueuedAppend& job) { commit_queued(s, job); },
      [&s](const std::string& id, const ModelSignature& model) { return read_expected(s, id, model); });
}

}  // namespace detail

namespace {

void require_range(const std::string& here, int64_t from, int64_t to) {
  if (from < 0 || to < from)
    throw Error(ErrorCode::kInvalidArgument, here + ": load of positions [" + std::to_string(from) + ", " +
                                                 std::to_string(to) + ") is not a range");
}

// Copies positions [lo, hi) of a chunk decoded aside into rows lo - origin.. of the engine's buffers.
void copy_rows(const PlaneList& packed, const PlaneList& engine, int64_t chunk_first, int64_t lo, int64_t hi,
               int64_t origin) {
  for (size_t p = 0; p < engine.size(); ++p)
    std::memcpy(engine[p].base + (lo - origin) * engine[p].stride, packed[p].base + (lo - chunk_first) * packed[p].stride,
                static_cast<size_t>((hi - lo) * packed[p].width) * 4);
}

}  // namespace

namespace {

// Fills positions [from, to) of a conversation into rows p - origin of the buffers.
int64_t load_rows(Store::Impl& s, const std::string& id, const ModelSignature& model, int64_t from, int64_t to,
                  int32_t* tokens, const KvTarget& kv, int64_t origin) {
  const std::string here = s.where(id);
  s.scan(
      id, &model, to,
      [&](const detail::ScanStart& st) {
        if (st.n < to)
          throw Error(ErrorCode::kInvalidArgument, here + ": load of positions [" + std::to_string(from) + ", " +
                                                       std::to_string(to) + ") but only " + std::to_string(st.n) +
                                                       " tokens are committed");
        if (origin == 0) detail::throw_if_evicted(s, st, tokens);
        else detail::throw_if_evicted(s, st, nullptr);
      },
      [&](detail::StoredChunk& c) {
        const int64_t lo = std::max(from, c.first_pos), hi = std::min(to, c.first_pos + c.wanted);
        if (lo >= hi) return;  // before the range: its payload is not decoded
        if (lo == c.first_pos && hi == c.first_pos + c.n_tokens) {
          detail::decode_chunk(c.payload.data(), c.payload.size(), c.compressed, c.raw_size, c.checksum, c.n_tokens,
                               c.tokens.data(), detail::engine_planes(model, kv, c.first_pos - origin), c.precision);
          return;
        }
        std::vector<float> buf(static_cast<size_t>(c.n_tokens * model.floats_per_token()));
        PlaneList packed = detail::packed_planes(model, buf.data(), c.n_tokens);
        detail::decode_chunk(c.payload.data(), c.payload.size(), c.compressed, c.raw_size, c.checksum, c.n_tokens,
                             c.tokens.data(), packed, c.precision);
        copy_rows(packed, detail::engine_planes(model, kv, 0), c.first_pos, lo, hi, origin);
      },
      [&](detail::StoredChunk& c) {
        const int64_t lo = std::max(from, c.first_pos), hi = std::min(to, c.first_pos + c.wanted);
        for (int64_t p = lo; p < hi; ++p) tokens[p - origin] = c.tokens[static_cast<size_t>(p - c.first_pos)];
      });
  return to - from;
}

}  // namespace

int64_t Store::load_range(const std::string& id, const ModelSignature& model, int64_t from, int64_t to,
                          int32_t* tokens, const KvTarget& kv) {
  detail::StoreCall call(*impl_, id);
  Impl& s = *impl_;
  const std::string here = s.where(id);
  model.validate();
  require_range(here, from, to);
  if (to > from && (!tokens || !kv.Lc || !kv.Rc || (model.n_indexed > 0 && !kv.Ic)))
    throw Error(ErrorCode::kInvalidArgument, here + ": tokens, Lc, Rc (and Ic for a model with an indexer) must not be null");
  return load_rows(s, id, model, from, to, tokens, kv, 0);
}

}  // namespace colikv
