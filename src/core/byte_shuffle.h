// The byte shuffle of a chunk's values (docs/format.md): byte k of every
// value goes to byte stream k, so that a zstd frame sees the sign and
// exponent bytes together. Not installed.
#ifndef COLIKV_SRC_CORE_BYTE_SHUFFLE_H
#define COLIKV_SRC_CORE_BYTE_SHUFFLE_H

#include <cstddef>
#include <cstdint>

namespace colikv {
namespace detail {

// float32 bits -> bfloat16 bits, round to nearest even (NaN -> quiet NaN).
inline uint16_t bf16_round(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Byte k of float j goes to dst[k * stream_len + j], for j in [0, n).
void shuffle_floats(const float* src, size_t n, uint8_t* dst, size_t stream_len);
// Inverse of shuffle_floats: float j gets byte k from stream[k][j].
void unshuffle_floats(const uint8_t* const* stream, size_t n, float* dst);
// Rounds float j to bfloat16 b and stores b's low byte at dst[j], its high
// byte at dst[stream_len + j], for j in [0, n).
void shuffle_bf16(const float* src, size_t n, uint8_t* dst, size_t stream_len);
// Inverse of shuffle_bf16, widening: float j = bf16 (stream[0][j] | stream[1][j] << 8) << 16.
void unshuffle_bf16(const uint8_t* const* stream, size_t n, float* dst);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_BYTE_SHUFFLE_H
