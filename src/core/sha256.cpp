// SHA-256: portable compression function, or the x86 SHA extensions when present.
#include "core/sha256.h"

#include <cstring>

#include "core/byte_order.h"

// COLIKV_NO_SIMD builds the portable path only (to test it on x86).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(COLIKV_NO_SIMD)
#include <cpuid.h>
#include <immintrin.h>
#define COLIKV_SHA_NI 1
#endif

namespace colikv {
namespace detail {

namespace {

constexpr uint32_t kSha256K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int r) { return (x >> r) | (x << (32 - r)); }

// SHA-256's compression function over `blocks` 64-byte blocks.
void sha256_blocks_portable(uint32_t state[8], const uint8_t* p, size_t blocks) {
  for (; blocks > 0; --blocks, p += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (uint32_t{p[4 * i]} << 24) | (uint32_t{p[4 * i + 1]} << 16) | (uint32_t{p[4 * i + 2]} << 8) |
             uint32_t{p[4 * i + 3]};
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6],
             h = state[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kSha256K[i] + w[i];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
  }
}

#if defined(COLIKV_SHA_NI)
// The same with the x86 SHA extensions: content digests hash every byte an
// append writes, which the portable code does at a fraction of zstd's speed.
// State is kept as ABEF/CDGH, the order sha256rnds2 works in.
__attribute__((target("sha,sse4.1,ssse3"))) void sha256_blocks_shani(uint32_t state[8], const uint8_t* p,
                                                                      size_t blocks) {
  const __m128i kByteSwap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state)), 0xB1);  // CDAB
  __m128i state1 = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4)), 0x1B);  // EFGH
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  // ABEF
  state1 = _mm_blend_epi16(state1, tmp, 0xF0);        // CDGH
  for (; blocks > 0; --blocks, p += 64) {
    const __m128i abef = state0, cdgh = state1;
    __m128i w[4];  // message words of rounds 4g .. 4g+3, a ring of the last four groups
#pragma GCC unroll 16
    for (int g = 0; g < 16; ++g) {
      if (g < 4) {
        w[g] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * g)), kByteSwap);
      } else {
        __m128i x = _mm_sha256msg1_epu32(w[g & 3], w[(g - 3) & 3]);
        x = _mm_add_epi32(x, _mm_alignr_epi8(w[(g - 1) & 3], w[(g - 2) & 3], 4));
        w[g & 3] = _mm_sha256msg2_epu32(x, w[(g - 1) & 3]);
      }
      __m128i msg = _mm_add_epi32(w[g & 3], _mm_loadu_si128(reinterpret_cast<const __m128i*>(kSha256K + 4 * g)));
      state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
      state0 = _mm_sha256rnds2_epu32(state0, state1, _mm_shuffle_epi32(msg, 0x0E));
    }
    state0 = _mm_add_epi32(state0, abef);
    state1 = _mm_add_epi32(state1, cdgh);
  }
  tmp = _mm_shuffle_epi32(state0, 0x1B);       // FEBA
  state1 = _mm_shuffle_epi32(state1, 0xB1);    // DCHG
  state0 = _mm_blend_epi16(tmp, state1, 0xF0);  // DCBA
  state1 = _mm_alignr_epi8(state1, tmp, 8);    // ABEF
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), state0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), state1);
}

bool detect_sha_ni() {
  __builtin_cpu_init();
  unsigned a = 0, b = 0, c = 0, d = 0;
  // CPUID leaf 7, sub-leaf 0: EBX bit 29 is SHA.
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b & (1u << 29)) != 0 && __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3");
}
#endif

Sha256::Blocks sha256_blocks_best() {
#if defined(COLIKV_SHA_NI)
  static const Sha256::Blocks best = detect_sha_ni() ? sha256_blocks_shani : sha256_blocks_portable;
  return best;
#else
  return sha256_blocks_portable;
#endif
}

}  // namespace

Sha256::Sha256(Path path) : blocks_(path == Path::kPortable ? sha256_blocks_portable : sha256_blocks_best()) {}

void Sha256::update(const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_ += n;
  if (fill_ > 0) {
    const size_t take = n < 64 - fill_ ? n : 64 - fill_;
    std::memcpy(buf_ + fill_, p, take);
    fill_ += take;
    p += take;
    n -= take;
    if (fill_ < 64) return;
    blocks_(h_, buf_, 1);
    fill_ = 0;
  }
  if (n >= 64) {
    blocks_(h_, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
  }
  if (n > 0) {
    std::memcpy(buf_, p, n);
    fill_ = n;
  }
}

void Sha256::update_tokens(const int32_t* tokens, int64_t n) {
  if (n <= 0) return;
  if (kLittleEndian) {
    update(tokens, static_cast<size_t>(n) * 4);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t v = static_cast<uint32_t>(tokens[i]);
    const uint8_t b[4] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16),
                          static_cast<uint8_t>(v >> 24)};
    update(b, 4);
  }
}

void Sha256::update_text(const char* text) { update(text, std::strlen(text) + 1); }

Sha256Digest Sha256::finish() {
  const uint64_t bits = total_ * 8;
  uint8_t pad[72] = {0x80};
  // Pad to 56 mod 64, then the 64-bit big-endian message length.
  const size_t pad_len = (fill_ < 56 ? 56 - fill_ : 120 - fill_);
  for (int i = 0; i < 8; ++i) pad[pad_len + i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(pad, pad_len + 8);
  Sha256Digest out;
  for (int i = 0; i < 8; ++i) {
    out[4 * i] = static_cast<uint8_t>(h_[i] >> 24);
    out[4 * i + 1] = static_cast<uint8_t>(h_[i] >> 16);
    out[4 * i + 2] = static_cast<uint8_t>(h_[i] >> 8);
    out[4 * i + 3] = static_cast<uint8_t>(h_[i]);
  }
  return out;
}

Sha256Digest sha256(const void* data, size_t n) {
  Sha256 s;
  s.update(data, n);
  return s.finish();
}

Sha256Digest sha256_portable(const void* data, size_t n) {
  Sha256 s(Sha256::Path::kPortable);
  s.update(data, n);
  return s.finish();
}

bool sha256_hardware_available() { return sha256_blocks_best() != sha256_blocks_portable; }

}  // namespace detail
}  // namespace colikv
