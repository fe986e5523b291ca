// The largest sizes the library itself writes into a store, in one place.
// Every size read back from a store is checked against these before anything
// is allocated for it, so a store's claims cannot make a process allocate
// more than one chunk's worth per thread.
#ifndef COLIKV_SRC_CORE_STORE_LIMITS_H
#define COLIKV_SRC_CORE_STORE_LIMITS_H

#include <cstdint>

#include "colikv/model.h"

namespace colikv {
namespace detail {

// Positions per full chunk: a power of two, at most this.
constexpr int64_t kMaxChunkTokens = 1024;

// Raw (decoded f32) bytes of one chunk: Options::chunk_target_bytes is
// clamped to this, and a model whose one record exceeds it is not stored.
constexpr int64_t kMaxChunkRawBytes = int64_t{16} << 20;

// The stored payload of a chunk of `raw` bytes: zstd's frames never grow it
// by more than this, and an uncompressed chunk is exactly raw.
constexpr int64_t max_payload_bytes(int64_t raw) { return raw + raw / 64 + 4096; }

// Any one value (blob or text) in a store: a chunk payload is the largest the
// library writes. The connection's SQLITE_LIMIT_LENGTH, so that neither a
// huge stored title nor a crafted token list is ever loaded whole.
constexpr int64_t kMaxStoredValueBytes = max_payload_bytes(kMaxChunkRawBytes);

// The JSON token list of n ids as tokens_to_json writes it: "[", n ids of at
// most 10 digits, n - 1 commas, "]".
constexpr int64_t max_tokens_json_bytes(int64_t n) { return 2 + 11 * n; }

// The raw bytes of one token of model m (f32), saturating.
inline int64_t token_raw_bytes(const ModelSignature& m) {
  const int64_t f = m.floats_per_token();
  return f > INT64_MAX / 4 ? INT64_MAX : 4 * f;
}

// Whether chunk_tokens is a size the library could have chosen for model m.
inline bool chunk_tokens_allowed(const ModelSignature& m, int64_t chunk_tokens) {
  if (chunk_tokens < 1 || chunk_tokens > kMaxChunkTokens || (chunk_tokens & (chunk_tokens - 1)) != 0) return false;
  return token_raw_bytes(m) <= kMaxChunkRawBytes && chunk_tokens * token_raw_bytes(m) <= kMaxChunkRawBytes;
}

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_STORE_LIMITS_H
