// The KV planes: where a chunk's values lie in the engine's buffers, in
// .coli_kv records, or packed one plane after another (kv_planes.h).
#include "store/kv_planes.h"

#include <cstring>

#include "colikv/error.h"

namespace colikv {

using detail::PlaneList;

namespace {

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

void copy_planes(const PlaneList& from, const PlaneList& to, int64_t n) {
  for (size_t p = 0; p < to.size(); ++p) {
    const size_t row = static_cast<size_t>(to[p].width) * sizeof(float);
    for (int64_t i = 0; i < n; ++i) std::memcpy(to[p].base + i * to[p].stride, from[p].base + i * from[p].stride, row);
  }
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

}  // namespace colikv
