// CRC-32C: slicing-by-8 tables, or the SSE4.2 instruction when present.
#include "core/crc32c.h"

#include <cstring>

// COLIKV_NO_SIMD builds the portable path only (to test it on x86).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(COLIKV_NO_SIMD)
#include <cpuid.h>
#include <immintrin.h>
#include <nmmintrin.h>
#define COLIKV_SSE42_CRC 1
#endif

namespace colikv {
namespace detail {

namespace {

inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

struct Crc32cTables {
  uint32_t t[8][256];
};

constexpr Crc32cTables make_crc32c_tables() {
  Crc32cTables r{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    r.t[0][i] = c;
  }
  for (int s = 1; s < 8; ++s) {
    for (uint32_t i = 0; i < 256; ++i) {
      const uint32_t prev = r.t[s - 1][i];
      r.t[s][i] = (prev >> 8) ^ r.t[0][prev & 0xffu];
    }
  }
  return r;
}

constexpr Crc32cTables kCrc = make_crc32c_tables();

// GF(2) arithmetic modulo the (reflected) polynomial, for joining CRCs of
// consecutive pieces (as zlib's crc32_combine does for its polynomial).
constexpr uint32_t kPoly = 0x82F63B78u;

constexpr uint32_t multiply_mod_poly(uint32_t a, uint32_t b) {
  uint32_t m = 1u << 31, p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1u) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return p;
}

struct PowersOfX {
  uint32_t x2n[32];  // x^(2^k) modulo the polynomial
};

constexpr PowersOfX make_powers_of_x() {
  PowersOfX r{};
  uint32_t p = 1u << 30;  // x^1
  r.x2n[0] = p;
  for (int k = 1; k < 32; ++k) r.x2n[k] = p = multiply_mod_poly(p, p);
  return r;
}

constexpr PowersOfX kPowers = make_powers_of_x();

// x^(n * 2^k) modulo the polynomial.
uint32_t x_to_the(uint64_t n, unsigned k) {
  uint32_t p = 1u << 31;  // x^0
  for (; n != 0; n >>= 1, ++k)
    if (n & 1u) p = multiply_mod_poly(kPowers.x2n[k & 31u], p);
  return p;
}

#if defined(COLIKV_SSE42_CRC)
// One lane: each step waits for the previous one's result.
__attribute__((target("sse4.2"))) uint64_t crc32c_lane(uint64_t c, const uint8_t* p, size_t n) {
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  return c;
}

// The instruction takes three cycles but starts one a cycle: three lanes over
// three thirds of a large buffer run about three times as fast as one, and
// their CRCs are joined at the end.
constexpr size_t kThreeLaneMinBytes = 3 * 4096;

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t crc, const uint8_t* p, size_t n) {
  if (n < kThreeLaneMinBytes) return ~static_cast<uint32_t>(crc32c_lane(~crc, p, n));
  const size_t third = n / 3 / 8 * 8;
  const uint8_t* b = p + third;
  const uint8_t* c = p + 2 * third;
  uint64_t ca = static_cast<uint32_t>(~crc), cb = 0xffffffffu, cc = 0xffffffffu;
  for (size_t i = 0; i < third; i += 8) {
    uint64_t va, vb, vc;
    std::memcpy(&va, p + i, 8);
    std::memcpy(&vb, b + i, 8);
    std::memcpy(&vc, c + i, 8);
    ca = _mm_crc32_u64(ca, va);
    cb = _mm_crc32_u64(cb, vb);
    cc = _mm_crc32_u64(cc, vc);
  }
  cc = crc32c_lane(cc, c + third, n - 3 * third);
  const uint32_t ab = crc32c_combine(~static_cast<uint32_t>(ca), ~static_cast<uint32_t>(cb), third);
  return crc32c_combine(ab, ~static_cast<uint32_t>(cc), n - 2 * third);
}

bool detect_sse42() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2") != 0;
}
#endif

uint32_t crc32c_slice8(uint32_t crc, const uint8_t* p, size_t n) {
  uint32_t c = ~crc;
  while (n >= 8) {
    const uint32_t lo = load_le32(p) ^ c;
    const uint32_t hi = load_le32(p + 4);
    c = kCrc.t[7][lo & 0xffu] ^ kCrc.t[6][(lo >> 8) & 0xffu] ^ kCrc.t[5][(lo >> 16) & 0xffu] ^
        kCrc.t[4][lo >> 24] ^ kCrc.t[3][hi & 0xffu] ^ kCrc.t[2][(hi >> 8) & 0xffu] ^
        kCrc.t[1][(hi >> 16) & 0xffu] ^ kCrc.t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = kCrc.t[0][(c ^ *p++) & 0xffu] ^ (c >> 8);
    --n;
  }
  return ~c;
}

}  // namespace

uint32_t crc32c_portable(uint32_t crc, const void* data, size_t n) {
  if (n == 0) return crc;
  return crc32c_slice8(crc, static_cast<const uint8_t*>(data), n);
}

bool crc32c_hardware_available() {
#if defined(COLIKV_SSE42_CRC)
  static const bool available = detect_sse42();
  return available;
#else
  return false;
#endif
}

uint32_t crc32c_hardware(uint32_t crc, const void* data, size_t n) {
  if (n == 0) return crc;
#if defined(COLIKV_SSE42_CRC)
  if (crc32c_hardware_available()) return crc32c_sse42(crc, static_cast<const uint8_t*>(data), n);
#endif
  return crc32c_slice8(crc, static_cast<const uint8_t*>(data), n);
}

uint32_t crc32c(uint32_t crc, const void* data, size_t n) { return crc32c_hardware(crc, data, n); }

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  return multiply_mod_poly(x_to_the(len_b, 3), crc_a) ^ crc_b;
}

}  // namespace detail
}  // namespace colikv
