// append_rows: the append of Store::write and of a queued turn (append.cpp's
// Appender through Store::Impl::append), which may rewrite the tail's kept
// rows: re-encoded from the store, so that positions before the caller's
// stay exactly as stored.
#include <cstring>
#include <vector>

#include "core/chunk_codec.h"
#include "store/kv_planes.h"
#include "store/store_impl.h"

namespace colikv {

using detail::PlaneList;
using detail::load_rows;

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

KeptRows kept_rows(Store::Impl& s, const std::string& id, const ModelSignature& model, int64_t base, int64_t from)
    REQUIRES(s.mu) {
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

namespace detail {

void append_rows(Store::Impl& s, const std::string& id, const ModelSignature& model, const int32_t* tokens,
                 int64_t from, int64_t len, const KvSource& kv, int64_t origin, int64_t expected_count) {
  // An append that rewrites the tail re-encodes its kept rows from the store,
  // so that [0, from) stays exactly as stored (an engine may have recomputed a
  // kept row meanwhile, e.g. the last prompt token's). A new piece reads nothing.
  KeptRows kept;
  detail::AppendRequest req;
  // Called back in the append's run, on this call's thread.
  req.rewrite_tail = [&](int64_t tail_start) REQUIRES(s.mu) { kept = kept_rows(s, id, model, tail_start, from); };
  req.expected_count = expected_count;
  req.id = id;
  req.model = model;
  req.len = len;
  req.tokens = tokens;
  const int level = s.options().zstd_level;
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

}  // namespace detail

}  // namespace colikv
