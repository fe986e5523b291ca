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

#if defined(COLIKV_SSE42_CRC)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7u) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  // Two independent 8-byte lanes would need a combine step; one lane already
  // runs at several GB/s, far above zstd.
  while (n >= 32) {
    uint64_t v[4];
    std::memcpy(v, p, 32);
    c = _mm_crc32_u64(c, v[0]);
    c = _mm_crc32_u64(c, v[1]);
    c = _mm_crc32_u64(c, v[2]);
    c = _mm_crc32_u64(c, v[3]);
    p += 32;
    n -= 32;
  }
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
  return ~static_cast<uint32_t>(c);
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

}  // namespace detail
}  // namespace colikv
