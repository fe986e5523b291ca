// The KV planes of a chunk (chunk_codec.h's PlaneList) over the buffers the
// library reads and writes: the engine's, .coli_kv records, packed planes.
// Not installed.
#ifndef COLIKV_SRC_KV_PLANES_H
#define COLIKV_SRC_KV_PLANES_H

#include <cstdint>
#include <string>

#include "colikv/store.h"
#include "core/chunk_codec.h"

namespace colikv {
namespace detail {

// The planes of positions [first_pos, first_pos + n) in the engine's buffers.
// Throws kInvalidArgument naming `where` unless Lc and Rc hold a buffer for
// every layer and Ic for exactly n_indexed of them.
void check_kv_pointers(const ModelSignature& m, const void* const* lc, const void* const* rc,
                       const void* const* ic, const std::string& where);
PlaneList engine_planes(const ModelSignature& m, const KvSource& kv, int64_t first_pos);
PlaneList engine_planes(const ModelSignature& m, const KvTarget& kv, int64_t first_pos);
// The planes of n .coli_kv records laid out from `records` on.
PlaneList record_planes(const ModelSignature& m, uint8_t* records);
// Copies rows [0, n) of every plane of `from` to the same plane of `to`
// (equal plane lists: the same model's), whatever their strides.
void copy_planes(const PlaneList& from, const PlaneList& to, int64_t n);
// Planes packed one after another from `buf` (n * floats_per_token floats).
PlaneList packed_planes(const ModelSignature& m, float* buf, int64_t n);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_KV_PLANES_H
