// Chunk payload codec, what encoding and decoding share: precision and
// compression names, bf16 conversion, sizes, the token checksum and the
// per-thread contexts. The encoder is chunk_encoder.cpp, the decoder
// chunk_decoder.cpp (zstd frames over the byte-shuffled planes of
// byte_shuffle.cpp); chain hashes, digests and token lists are in
// chunk_hash.cpp.
#include "core/chunk_codec.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>

#include "colikv/error.h"
#include "core/byte_order.h"
#include "core/byte_shuffle.h"
#include "core/chunk_codec_internal.h"
#include "core/crc32c.h"

namespace colikv {
namespace detail {
namespace codec {

uint32_t crc32c_tokens(uint32_t crc, const int32_t* tokens, int64_t n) {
  if (n <= 0) return crc;
  if (kLittleEndian) return crc32c(crc, tokens, static_cast<size_t>(n) * 4);
  uint8_t block[1024];
  int64_t i = 0;
  while (i < n) {
    size_t k = 0;
    for (; k < sizeof block && i < n; k += 4, ++i) {
      const uint32_t v = static_cast<uint32_t>(tokens[i]);
      block[k] = static_cast<uint8_t>(v);
      block[k + 1] = static_cast<uint8_t>(v >> 8);
      block[k + 2] = static_cast<uint8_t>(v >> 16);
      block[k + 3] = static_cast<uint8_t>(v >> 24);
    }
    crc = crc32c(crc, block, k);
  }
  return crc;
}

size_t chunk_floats(const PlaneList& planes, size_t n) {
  size_t total = 0;
  for (const PlaneRef& p : planes) total += static_cast<size_t>(p.width) * n;
  return total;
}

void check_planes(const PlaneList& planes, int64_t n_tokens, const int32_t* tokens) {
  if (n_tokens > 0 && tokens == nullptr) invalid("chunk codec: null token array for " + std::to_string(n_tokens) + " tokens");
  for (size_t k = 0; k < planes.size(); ++k) {
    const PlaneRef& p = planes[k];
    if (p.width == 0 || n_tokens == 0) continue;
    if (p.stride < p.width)
      invalid("chunk codec: plane " + std::to_string(k) + " has stride " + std::to_string(p.stride) +
              " below its width " + std::to_string(p.width));
    if (p.base == nullptr) invalid("chunk codec: plane " + std::to_string(k) + " has a null base");
    // The last float addressed, (n_tokens - 1) * stride + width, must be representable.
    int64_t last = 0;
    if (__builtin_mul_overflow(n_tokens - 1, p.stride, &last) || __builtin_add_overflow(last, p.width, &last) ||
        static_cast<uint64_t>(last) > std::numeric_limits<size_t>::max() / 4)
      invalid("chunk codec: plane " + std::to_string(k) + " spans more memory than addressable");
  }
}

ThreadCodec& thread_codec() {
  thread_local ThreadCodec codec;
  return codec;
}

void zstd_check(size_t rc, const char* what) {
  if (ZSTD_isError(rc)) throw Error(ErrorCode::kInternal, std::string("zstd ") + what + ": " + ZSTD_getErrorName(rc));
}

}  // namespace codec

using codec::invalid;

const char* precision_name(ChunkPrecision p) { return p == ChunkPrecision::kBf16 ? "bf16" : "f32"; }

const char* compression_name(bool compressed) { return compressed ? "zstd" : "none"; }

bool parse_compression(const std::string& text, bool& compressed) {
  if (text != compression_name(true) && text != compression_name(false)) return false;
  compressed = text == compression_name(true);
  return true;
}

bool parse_precision(const std::string& text, ChunkPrecision& out) {
  if (text == "f32") {
    out = ChunkPrecision::kF32;
    return true;
  }
  if (text == "bf16") {
    out = ChunkPrecision::kBf16;
    return true;
  }
  return false;
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return bf16_round(u);
}

float bf16_to_float(uint16_t b) {
  const uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

int64_t planes_raw_size(const PlaneList& planes, int64_t n_tokens) {
  if (n_tokens < 0) invalid("chunk codec: negative token count " + std::to_string(n_tokens));
  int64_t total = 0;
  for (size_t k = 0; k < planes.size(); ++k) {
    const int64_t width = planes[k].width;
    if (width < 0) invalid("chunk codec: plane " + std::to_string(k) + " has negative width " + std::to_string(width));
    int64_t bytes = 0;
    if (__builtin_mul_overflow(width, n_tokens, &bytes) || __builtin_mul_overflow(bytes, int64_t{4}, &bytes) ||
        __builtin_add_overflow(total, bytes, &total))
      invalid("chunk codec: chunk of " + std::to_string(n_tokens) + " tokens overflows its raw size");
  }
  if (static_cast<uint64_t>(total) > std::numeric_limits<size_t>::max())
    invalid("chunk codec: raw size " + std::to_string(total) + " does not fit in memory");
  return total;
}

}  // namespace detail
}  // namespace colikv
