// The byte-shuffle kernels (byte_shuffle.h), with SSE2 paths on x86.
#include "core/byte_shuffle.h"

#include <algorithm>
#include <cstring>

// COLIKV_NO_SIMD builds the portable paths only (to test them on x86).
#if defined(__SSE2__) && !defined(COLIKV_NO_SIMD)
#include <emmintrin.h>
#define COLIKV_SSE2_SHUFFLE 1
#endif

namespace colikv {
namespace detail {

// Byte k of float j goes to dst[k * stream_len + j], for j in [0, n).
void shuffle_floats(const float* src, size_t n, uint8_t* dst, size_t stream_len) {
  const uint8_t* s = reinterpret_cast<const uint8_t*>(src);
  uint8_t* d0 = dst;
  uint8_t* d1 = dst + stream_len;
  uint8_t* d2 = dst + 2 * stream_len;
  uint8_t* d3 = dst + 3 * stream_len;
  size_t j = 0;
#if defined(COLIKV_SSE2_SHUFFLE)
  // 16 floats per step: four rounds of byte interleaving turn 16x4 bytes
  // (float-major) into 4x16 (byte-major). x86 is little-endian, so memory
  // byte k of a float is its little-endian byte k.
  for (; j + 16 <= n; j += 16) {
    const uint8_t* q = s + 4 * j;
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16));
    const __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 32));
    const __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 48));
    const __m128i y0 = _mm_unpacklo_epi8(x0, x2), y2 = _mm_unpackhi_epi8(x0, x2);
    const __m128i y1 = _mm_unpacklo_epi8(x1, x3), y3 = _mm_unpackhi_epi8(x1, x3);
    const __m128i z0 = _mm_unpacklo_epi8(y0, y1), z1 = _mm_unpackhi_epi8(y0, y1);
    const __m128i z2 = _mm_unpacklo_epi8(y2, y3), z3 = _mm_unpackhi_epi8(y2, y3);
    const __m128i w0 = _mm_unpacklo_epi8(z0, z2), w2 = _mm_unpackhi_epi8(z0, z2);
    const __m128i w1 = _mm_unpacklo_epi8(z1, z3), w3 = _mm_unpackhi_epi8(z1, z3);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d0 + j), _mm_unpacklo_epi8(w0, w1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d1 + j), _mm_unpackhi_epi8(w0, w1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d2 + j), _mm_unpacklo_epi8(w2, w3));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d3 + j), _mm_unpackhi_epi8(w2, w3));
  }
#endif
  for (; j < n; ++j) {
    uint32_t v;
    std::memcpy(&v, s + 4 * j, 4);
    d0[j] = static_cast<uint8_t>(v);
    d1[j] = static_cast<uint8_t>(v >> 8);
    d2[j] = static_cast<uint8_t>(v >> 16);
    d3[j] = static_cast<uint8_t>(v >> 24);
  }
}

namespace {

#if defined(COLIKV_SSE2_SHUFFLE)
// Decoded floats go to the engine's buffers, which a load fills far beyond
// the caches: streaming stores skip reading each destination line before
// overwriting it. Small runs keep plain stores (the fence costs more).
constexpr size_t kStreamMinBytes = 4096;

struct FloatStore {
  bool stream;
  void put(uint8_t* q, __m128i v) const {
    if (stream)
      _mm_stream_si128(reinterpret_cast<__m128i*>(q), v);
    else
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q), v);
  }
  // Streaming stores are weakly ordered: fenced before the floats are handed on.
  void done() const {
    if (stream) _mm_sfence();
  }
};

// Floats of dst to write one at a time before dst + 4 * j is 16-byte aligned
// (all of them when dst is not even 4-byte aligned).
size_t floats_before_aligned(const uint8_t* d, size_t n) {
  const size_t misaligned = reinterpret_cast<uintptr_t>(d) & 15u;
  if (misaligned % 4 != 0) return n;
  return std::min(n, misaligned == 0 ? size_t{0} : (16 - misaligned) / 4);
}
#endif

}  // namespace

// Inverse of shuffle_floats: float j gets byte k from stream[k][j].
void unshuffle_floats(const uint8_t* const* stream, size_t n, float* dst) {
  const uint8_t* s0 = stream[0];
  const uint8_t* s1 = stream[1];
  const uint8_t* s2 = stream[2];
  const uint8_t* s3 = stream[3];
  uint8_t* d = reinterpret_cast<uint8_t*>(dst);
  size_t j = 0;
  const auto one_float = [&](size_t i) {
    const uint32_t v = uint32_t{s0[i]} | (uint32_t{s1[i]} << 8) | (uint32_t{s2[i]} << 16) |
                       (uint32_t{s3[i]} << 24);
    std::memcpy(d + 4 * i, &v, 4);
  };
#if defined(COLIKV_SSE2_SHUFFLE)
  const FloatStore out{n * 4 >= kStreamMinBytes};
  if (out.stream)
    for (const size_t head = floats_before_aligned(d, n); j < head; ++j) one_float(j);
  // Byte-major to float-major takes only two interleaving rounds.
  for (; j + 16 <= n; j += 16) {
    const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + j));
    const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + j));
    const __m128i v2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s2 + j));
    const __m128i v3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s3 + j));
    const __m128i a0 = _mm_unpacklo_epi8(v0, v2), a2 = _mm_unpackhi_epi8(v0, v2);
    const __m128i a1 = _mm_unpacklo_epi8(v1, v3), a3 = _mm_unpackhi_epi8(v1, v3);
    uint8_t* q = d + 4 * j;
    out.put(q, _mm_unpacklo_epi8(a0, a1));
    out.put(q + 16, _mm_unpackhi_epi8(a0, a1));
    out.put(q + 32, _mm_unpacklo_epi8(a2, a3));
    out.put(q + 48, _mm_unpackhi_epi8(a2, a3));
  }
  out.done();
#endif
  for (; j < n; ++j) one_float(j);
}

// Rounds float j to bfloat16 b and stores b's low byte at dst[j], its high
// byte at dst[stream_len + j], for j in [0, n).
void shuffle_bf16(const float* src, size_t n, uint8_t* dst, size_t stream_len) {
  const uint8_t* s = reinterpret_cast<const uint8_t*>(src);
  uint8_t* d0 = dst;
  uint8_t* d1 = dst + stream_len;
  size_t j = 0;
#if defined(COLIKV_SSE2_SHUFFLE)
  const __m128i abs_mask = _mm_set1_epi32(0x7fffffff);
  const __m128i inf = _mm_set1_epi32(0x7f800000);
  const __m128i bias = _mm_set1_epi32(0x7fff);
  const __m128i one = _mm_set1_epi32(1);
  const __m128i quiet = _mm_set1_epi32(0x0040);
  const __m128i low8 = _mm_set1_epi16(0x00ff);
  auto round4 = [&](__m128i u) {
    const __m128i hi = _mm_srli_epi32(u, 16);
    const __m128i r = _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(u, bias), _mm_and_si128(hi, one)), 16);
    const __m128i nan = _mm_cmpgt_epi32(_mm_and_si128(u, abs_mask), inf);
    const __m128i v = _mm_or_si128(_mm_and_si128(nan, _mm_or_si128(hi, quiet)), _mm_andnot_si128(nan, r));
    return _mm_srai_epi32(_mm_slli_epi32(v, 16), 16);  // sign-extend: packs_epi32 keeps it exactly
  };
  for (; j + 16 <= n; j += 16) {
    const uint8_t* q = s + 4 * j;
    const __m128i a = _mm_packs_epi32(round4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))),
                                      round4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16))));
    const __m128i b = _mm_packs_epi32(round4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 32))),
                                      round4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 48))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d0 + j),
                     _mm_packus_epi16(_mm_and_si128(a, low8), _mm_and_si128(b, low8)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d1 + j), _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
  }
#endif
  for (; j < n; ++j) {
    uint32_t v;
    std::memcpy(&v, s + 4 * j, 4);
    const uint16_t b = bf16_round(v);
    d0[j] = static_cast<uint8_t>(b);
    d1[j] = static_cast<uint8_t>(b >> 8);
  }
}

// Inverse of shuffle_bf16, widening: float j = bf16 (stream[0][j] | stream[1][j] << 8) << 16.
void unshuffle_bf16(const uint8_t* const* stream, size_t n, float* dst) {
  const uint8_t* s0 = stream[0];
  const uint8_t* s1 = stream[1];
  uint8_t* d = reinterpret_cast<uint8_t*>(dst);
  size_t j = 0;
  const auto one_float = [&](size_t i) {
    const uint32_t v = (uint32_t{s0[i]} << 16) | (uint32_t{s1[i]} << 24);
    std::memcpy(d + 4 * i, &v, 4);
  };
#if defined(COLIKV_SSE2_SHUFFLE)
  const FloatStore out{n * 4 >= kStreamMinBytes};
  if (out.stream)
    for (const size_t head = floats_before_aligned(d, n); j < head; ++j) one_float(j);
  const __m128i zero = _mm_setzero_si128();
  for (; j + 16 <= n; j += 16) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + j));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + j));
    const __m128i a = _mm_unpacklo_epi8(lo, hi), b = _mm_unpackhi_epi8(lo, hi);
    uint8_t* q = d + 4 * j;
    out.put(q, _mm_unpacklo_epi16(zero, a));
    out.put(q + 16, _mm_unpackhi_epi16(zero, a));
    out.put(q + 32, _mm_unpacklo_epi16(zero, b));
    out.put(q + 48, _mm_unpackhi_epi16(zero, b));
  }
  out.done();
#endif
  for (; j < n; ++j) one_float(j);
}

}  // namespace detail
}  // namespace colikv
