// Tests of the chunk codec: CRC-32C, SHA-256 chain, shuffle layout, zstd
// round trips, corruption detection and the token JSON form.
#include <zstd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/chunk_codec.h"
#include "colikv/error.h"
#include "core/crc32c.h"
#include "core/sha256.h"
#include "test_support.h"

using colikv::Error;
using colikv::ErrorCode;
using namespace colikv::detail;

using colikv_test::bits_of;
using colikv_test::from_bits;

namespace {

// Bit-at-a-time CRC-32C, the definition itself.
uint32_t crc32c_reference(uint32_t crc, const uint8_t* p, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

std::vector<uint8_t> le_bytes(const std::vector<int32_t>& tokens) {
  std::vector<uint8_t> out;
  for (int32_t t : tokens) {
    const uint32_t u = static_cast<uint32_t>(t);
    for (int k = 0; k < 4; ++k) out.push_back(static_cast<uint8_t>(u >> (8 * k)));
  }
  return out;
}

// The payload layout written out the slow way: the floats of every plane in
// order (each plane position-major), as four byte streams over the whole chunk.
std::vector<uint8_t> reference_raw(const PlaneList& planes, int64_t n_tokens) {
  std::vector<uint32_t> values;
  for (const PlaneRef& p : planes)
    for (int64_t i = 0; i < n_tokens; ++i)
      for (int64_t j = 0; j < p.width; ++j) values.push_back(bits_of(p.base[i * p.stride + j]));
  std::vector<uint8_t> out;
  for (int k = 0; k < 4; ++k)
    for (uint32_t v : values) out.push_back(static_cast<uint8_t>(v >> (8 * k)));
  return out;
}

std::vector<uint8_t> decoded_bytes(const EncodedChunk& e) {
  if (!e.compressed) return e.payload;
  std::vector<uint8_t> raw(static_cast<size_t>(e.raw_size));
  const size_t n = ZSTD_decompress(raw.data(), raw.size(), e.payload.data(), e.payload.size());
  REQUIRE_FALSE(ZSTD_isError(n));
  REQUIRE(n == raw.size());
  return raw;
}

// A model-shaped set of planes over per-plane contiguous buffers:
// `layers` x (kv_lora, qk_rope) planes, then `indexed` index planes.
struct Planes {
  Planes(int64_t n_tokens_, std::vector<int64_t> widths_) : n_tokens(n_tokens_), widths(std::move(widths_)) {
    for (int64_t w : widths) data.emplace_back(static_cast<size_t>(w * n_tokens), 0.0f);
  }
  PlaneList list() {
    PlaneList out;
    for (size_t k = 0; k < data.size(); ++k) out.push_back(PlaneRef{data[k].data(), widths[k], widths[k]});
    return out;
  }
  void fill_bits(uint32_t value) {
    for (auto& d : data)
      for (float& f : d) f = from_bits(value);
  }
  bool operator==(const Planes& o) const {
    if (data.size() != o.data.size()) return false;
    for (size_t k = 0; k < data.size(); ++k)
      if (data[k].size() != o.data[k].size() ||
          std::memcmp(data[k].data(), o.data[k].data(), data[k].size() * 4) != 0)
        return false;
    return true;
  }
  int64_t n_tokens;
  std::vector<int64_t> widths;
  std::vector<std::vector<float>> data;
};

const std::vector<int64_t> kTinyWidths = {16, 8, 16, 8, 16, 8, 8};  // 3 layers of 16+8, one index plane of 8

// Random full-mantissa values: what real float32 KV caches look like.
void fill_random(Planes& p, uint32_t seed) {
  std::mt19937 rng(seed);
  for (auto& d : p.data)
    for (float& f : d) f = from_bits(static_cast<uint32_t>(rng()));
}

// Values that came from bf16 (low 16 bits zero), small range: compressible.
void fill_bf16_like(Planes& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& d : p.data)
    for (float& f : d) f = from_bits(bits_of(dist(rng)) & 0xffff0000u);
}

const uint32_t kSpecialBits[] = {
    0x7fc00000u,  // quiet NaN
    0x7f800001u,  // signalling NaN, minimal payload
    0x7fbfffffu,  // signalling NaN, maximal payload
    0xffc00001u,  // negative quiet NaN with payload
    0x7fffffffu, 0xffffffffu, 0x7fd23456u,
    0x80000000u,  // -0.0
    0x00000000u,
    0x00000001u,  // smallest denormal
    0x807fffffu,  // largest negative denormal
    0x00400000u,
    0x7f800000u,  // +inf
    0xff800000u,  // -inf
    0x7f7fffffu,  // FLT_MAX
    0x00800000u,  // FLT_MIN
};

void fill_special(Planes& p, uint32_t seed, bool with_random) {
  std::mt19937 rng(seed);
  const size_t n_special = sizeof kSpecialBits / sizeof kSpecialBits[0];
  size_t i = 0;
  for (auto& d : p.data)
    for (float& f : d) {
      const bool special = !with_random || (rng() % 3 == 0);
      f = special ? from_bits(kSpecialBits[i++ % n_special]) : from_bits(static_cast<uint32_t>(rng()));
    }
}

std::vector<int32_t> make_tokens(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(rng() % 150000));
  return t;
}

// Decoding must fail with kCorrupt, a message containing `what`, and leave
// every destination byte as it was.
void require_corrupt(const std::vector<uint8_t>& payload, bool compressed, int64_t raw_size, uint32_t checksum,
                     const std::vector<int32_t>& tokens, int64_t n_tokens, const std::string& what,
                     const std::vector<int64_t>& widths = kTinyWidths,
                     ChunkPrecision precision = ChunkPrecision::kF32) {
  Planes dst(n_tokens, widths);
  dst.fill_bits(0xa5a5a5a5u);
  const Planes before = dst;
  PlaneList list = dst.list();
  bool threw = false;
  try {
    decode_chunk(payload.data(), payload.size(), compressed, raw_size, checksum, n_tokens, tokens.data(), list,
                 precision);
  } catch (const Error& e) {
    threw = true;
    INFO("message: " << e.what());
    CHECK(e.code() == ErrorCode::kCorrupt);
    CHECK_THAT(e.what(), Catch::Contains(what));
  }
  CHECK(threw);
  CHECK(dst == before);
}

// Rewrites the Frame_Content_Size field of a zstd frame header in place.
void patch_frame_content_size(std::vector<uint8_t>& frame, uint64_t value) {
  REQUIRE(frame.size() > 6);
  const uint8_t fhd = frame[4];
  const int fcs_flag = fhd >> 6;
  const bool single_segment = (fhd >> 5) & 1;
  static const int kDictIdBytes[4] = {0, 1, 2, 4};
  size_t pos = 5 + (single_segment ? 0 : 1) + static_cast<size_t>(kDictIdBytes[fhd & 3]);
  REQUIRE(fcs_flag == 1);  // the tests use sizes that take the 2-byte form (value - 256)
  REQUIRE(value >= 256);
  REQUIRE(value - 256 < 65536);
  frame[pos] = static_cast<uint8_t>((value - 256) & 0xff);
  frame[pos + 1] = static_cast<uint8_t>((value - 256) >> 8);
  REQUIRE(ZSTD_getFrameContentSize(frame.data(), frame.size()) == value);
}

std::vector<uint8_t> zstd_frame(const uint8_t* data, size_t n, bool content_size) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, content_size ? 1 : 0);
  std::vector<uint8_t> out(ZSTD_compressBound(n));
  const size_t got = ZSTD_compress2(c, out.data(), out.size(), data, n);
  ZSTD_freeCCtx(c);
  REQUIRE_FALSE(ZSTD_isError(got));
  out.resize(got);
  return out;
}

// One zstd frame of a payload, as a reader without the library sees it.
struct FrameInfo {
  size_t offset = 0;          // in the payload
  size_t size = 0;            // ZSTD_findFrameCompressedSize
  size_t content = 0;         // ZSTD_getFrameContentSize
  bool raw_blocks = false;    // every block is a Raw_Block: the plane was stored, not compressed
  bool single_segment = false;
};

std::vector<FrameInfo> parse_frames(const std::vector<uint8_t>& payload) {
  std::vector<FrameInfo> out;
  size_t pos = 0;
  while (pos < payload.size()) {
    FrameInfo f;
    f.offset = pos;
    const uint8_t* p = payload.data() + pos;
    const size_t left = payload.size() - pos;
    f.size = ZSTD_findFrameCompressedSize(p, left);
    REQUIRE_FALSE(ZSTD_isError(f.size));
    const unsigned long long content = ZSTD_getFrameContentSize(p, left);
    REQUIRE(content != ZSTD_CONTENTSIZE_UNKNOWN);
    REQUIRE(content != ZSTD_CONTENTSIZE_ERROR);
    f.content = static_cast<size_t>(content);
    f.single_segment = (p[4] >> 5) & 1;
    // RFC 8878 3.1.1.1: magic, descriptor, window descriptor unless single
    // segment, dictionary id, frame content size.
    const uint8_t fhd = p[4];
    static const size_t kDid[4] = {0, 1, 2, 4};
    const size_t fcs_bytes[4] = {f.single_segment ? size_t{1} : size_t{0}, 2, 4, 8};
    const size_t header = 5 + (f.single_segment ? 0 : 1) + kDid[fhd & 3] + fcs_bytes[fhd >> 6];
    f.raw_blocks = true;
    for (size_t b = header; b < f.size;) {
      const uint32_t bh = uint32_t{p[b]} | uint32_t{p[b + 1]} << 8 | uint32_t{p[b + 2]} << 16;
      const uint32_t type = (bh >> 1) & 3;
      if (type != 0) f.raw_blocks = false;
      b += 3 + (type == 1 ? 1 : bh >> 3);  // an RLE block holds one byte
      if (bh & 1) break;
    }
    out.push_back(f);
    pos += f.size;
  }
  return out;
}

}  // namespace

// ------------------------------------------------------------------ CRC-32C

TEST_CASE("crc32c matches the published check values", "[codec]") {
  const char* check = "123456789";
  CHECK(crc32c(0, check, 9) == 0xE3069283u);
  CHECK(crc32c_portable(0, check, 9) == 0xE3069283u);
  CHECK(crc32c(0, nullptr, 0) == 0u);
  CHECK(crc32c(0x12345678u, nullptr, 0) == 0x12345678u);

  // RFC 3720 (iSCSI) appendix B.4 vectors.
  std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xff), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<uint8_t>(i);
    dec[i] = static_cast<uint8_t>(31 - i);
  }
  CHECK(crc32c(0, zeros.data(), 32) == 0x8A9136AAu);
  CHECK(crc32c(0, ones.data(), 32) == 0x62A8AB43u);
  CHECK(crc32c(0, inc.data(), 32) == 0x46DD794Eu);
  CHECK(crc32c(0, dec.data(), 32) == 0x113FDB5Cu);
  CHECK(crc32c_portable(0, dec.data(), 32) == 0x113FDB5Cu);
}

TEST_CASE("crc32c hardware, portable and bitwise paths agree and chain", "[codec]") {
  INFO("SSE4.2 available: " << crc32c_hardware_available());
  std::mt19937 rng(42);
  std::vector<uint8_t> buf(70001);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (int round = 0; round < 300; ++round) {
    const size_t offset = rng() % 16;  // unaligned starts
    size_t len = rng() % (round < 200 ? 300 : 65536);
    len |= 1;  // odd lengths
    const uint8_t* p = buf.data() + offset;
    const uint32_t seed = (round % 3 == 0) ? 0u : static_cast<uint32_t>(rng());
    const uint32_t ref = crc32c_reference(seed, p, len);
    REQUIRE(crc32c_portable(seed, p, len) == ref);
    REQUIRE(crc32c_hardware(seed, p, len) == ref);
    REQUIRE(crc32c(seed, p, len) == ref);
    // crc(crc(a), b) == crc(a || b) at any split point.
    const size_t split = rng() % (len + 1);
    REQUIRE(crc32c(crc32c(seed, p, split), p + split, len - split) == ref);
    REQUIRE(crc32c_portable(crc32c_hardware(seed, p, split), p + split, len - split) == ref);
  }
}

TEST_CASE("crc32c: large buffers (three lanes joined) agree with the definition", "[codec]") {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(400001);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  // Around the size where the lanes start, and large odd sizes at odd offsets.
  for (size_t len : {size_t{12287}, size_t{12288}, size_t{12289}, size_t{12295}, size_t{24583}, size_t{399997}}) {
    for (size_t offset : {size_t{0}, size_t{3}}) {
      INFO("length " << len << " offset " << offset);
      const uint8_t* p = buf.data() + offset;
      const uint32_t ref = crc32c_reference(0x9e3779b9u, p, len);
      CHECK(crc32c_hardware(0x9e3779b9u, p, len) == ref);
      CHECK(crc32c_portable(0x9e3779b9u, p, len) == ref);
    }
  }
}

TEST_CASE("crc32c_combine joins the CRCs of consecutive pieces", "[codec]") {
  std::mt19937 rng(11);
  std::vector<uint8_t> buf(100000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (int round = 0; round < 50; ++round) {
    const size_t len = rng() % buf.size();
    const size_t split = round == 0 ? 0 : round == 1 ? len : rng() % (len + 1);
    const uint32_t whole = crc32c_reference(0, buf.data(), len);
    const uint32_t a = crc32c(0, buf.data(), split), b = crc32c(0, buf.data() + split, len - split);
    REQUIRE(crc32c_combine(a, b, len - split) == whole);
  }
  CHECK(crc32c_combine(0x12345678u, 0, 0) == 0x12345678u);
}

// ------------------------------------------------------------------ SHA-256 and the chain

TEST_CASE("sha256 matches FIPS 180-4 vectors and block boundaries", "[codec]") {
  CHECK(hash_hex(sha256("", 0)) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hash_hex(sha256("abc", 3)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(hash_hex(sha256(two_blocks.data(), two_blocks.size())) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  CHECK(hash_hex(sha256(million.data(), million.size())) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

  // Lengths around the padding boundaries; expected values from Python hashlib
  // over bytes (i*7+3) & 255.
  const struct {
    size_t n;
    const char* hex;
  } boundary[] = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
      {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"},
  };
  for (const auto& b : boundary) {
    std::vector<uint8_t> data(b.n);
    for (size_t i = 0; i < b.n; ++i) data[i] = static_cast<uint8_t>((i * 7 + 3) & 255);
    INFO("length " << b.n);
    CHECK(hash_hex(sha256(data.data(), data.size())) == b.hex);
  }
}

TEST_CASE("sha256: the SHA-extension path agrees with the portable one", "[codec]") {
  INFO("SHA extensions " << (sha256_hardware_available() ? "used" : "not available: both paths are portable"));
  CHECK(hash_hex(sha256_portable("abc", 3)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::vector<uint8_t> data(1 << 20);
  uint32_t x = 99;
  for (auto& b : data) b = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
  for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{127}, size_t{128}, size_t{1000},
                   size_t{4096 + 17}, data.size()}) {
    INFO("length " << n);
    CHECK(sha256(data.data(), n) == sha256_portable(data.data(), n));
  }
}

TEST_CASE("content digests and chunk keys follow the documented definition", "[codec]") {
  // Expected values from Python hashlib:
  // d = sha256(b"colikv chunk content v1\0f32\0" + pack("<2i", 1, 2) + bytes([1, 2, 3]))
  // key = sha256(b"colikv chunk key v1\0" + sha256(b"x") + d)
  const int32_t toks[] = {1, 2};
  const uint8_t raw[] = {1, 2, 3};
  const ChunkHash d = content_digest(ChunkPrecision::kF32, toks, 2, raw, 3);
  CHECK(hash_hex(d) == "e8c443c9b56cc9a88ef16d5749a3079dbec6b4950d17b1da6cb4ee0e6ca552fa");
  CHECK(hash_hex(chunk_key(sha256("x", 1), d)) == "0ff03f5f4d603f213a0d3242ae3722c964c5d479661eb551451b24cbe3523d99");
  CHECK(content_digest(ChunkPrecision::kBf16, toks, 2, raw, 3) != d);
  CHECK(content_digest(ChunkPrecision::kF32, toks, 1, raw, 3) != d);
  CHECK(d != kNoValuesDigest);
}

TEST_CASE("encode_chunk digests the decoded content and skips only an equal one", "[codec]") {
  float values[4] = {1.5f, from_bits(0x7fc00001u), 0.0f, from_bits(0x00000001u)};
  const int32_t toks[2] = {5, 6};
  const PlaneList planes = {PlaneRef{values, 2, 2}};
  const EncodedChunk e = encode_chunk(2, toks, planes, 1);
  float back[4];
  ChunkHash decoded;
  decode_chunk(e.payload.data(), e.payload.size(), e.compressed, e.raw_size, e.checksum, 2, toks,
               {PlaneRef{back, 2, 2}}, ChunkPrecision::kF32, &decoded);
  CHECK(decoded == e.digest);
  CHECK_FALSE(e.skipped);

  // Any bit counts: a NaN payload, the sign of zero, a denormal.
  for (std::pair<int, uint32_t> change : {std::pair<int, uint32_t>{1, 0x7fc00002u}, {2, 0x80000000u}, {3, 0x00000002u}}) {
    float other[4];
    std::copy(values, values + 4, other);
    other[change.first] = from_bits(change.second);
    INFO("value " << change.first);
    CHECK(encode_chunk(2, toks, {PlaneRef{other, 2, 2}}, 1).digest != e.digest);
  }
  // Skipped only when the digest is listed: then nothing is compressed.
  const std::vector<ChunkHash> listed = {kNoValuesDigest, e.digest};
  const EncodedChunk s = encode_chunk(2, toks, planes, 1, ChunkPrecision::kF32, &listed);
  CHECK(s.skipped);
  CHECK(s.payload.empty());
  CHECK(s.digest == e.digest);
  const std::vector<ChunkHash> others = {kNoValuesDigest};
  CHECK_FALSE(encode_chunk(2, toks, planes, 1, ChunkPrecision::kF32, &others).skipped);

  // bf16: values that round to the same bf16 value have the same content.
  float near[4];
  std::copy(values, values + 4, near);
  near[0] = from_bits(bits_of(1.5f) + 1);
  CHECK(encode_chunk(2, toks, {PlaneRef{near, 2, 2}}, 1, ChunkPrecision::kBf16).digest ==
        encode_chunk(2, toks, planes, 1, ChunkPrecision::kBf16).digest);
  CHECK(encode_chunk(2, toks, {PlaneRef{near, 2, 2}}, 1).digest != e.digest);
}

TEST_CASE("chain hashes follow the documented definition", "[codec]") {
  // Expected values from Python hashlib:
  // sha256(b"colikv chunk chain v1\0glm-sig\0f32"), then sha256(seed + pack("<3i", 1, -2, 70000)).
  const ChunkHash seed = chain_seed("glm-sig", "f32");
  CHECK(hash_hex(seed) == "b8e5268c2f16390d4728d04f3490bae3b064d3ca00a3faf923b72cb3b86b6d3d");
  const int32_t toks[] = {1, -2, 70000};
  CHECK(hash_hex(chain_next(seed, toks, 3)) == "e146235597643b5d4933c068d2a041b4ed1d02259ae72544f6941fb908bf0a8b");
  CHECK(chain_next(seed, nullptr, 0) == sha256(seed.data(), seed.size()));
}

TEST_CASE("chain hashes separate signatures, precisions and tokens", "[codec]") {
  const ChunkHash a = chain_seed("sig-a", "f32");
  CHECK(a == chain_seed("sig-a", "f32"));
  CHECK(a != chain_seed("sig-b", "f32"));
  CHECK(a != chain_seed("sig-a", "bf16"));
  // The NUL separator keeps the two fields apart.
  CHECK(chain_seed("ab", "c") != chain_seed("a", "bc"));
  CHECK(chain_seed("", "") != chain_seed("", "f32"));

  const std::vector<int32_t> t1 = {10, 20, 30, 40};
  std::vector<int32_t> t2 = t1;
  t2[3] = 41;
  const ChunkHash h1 = chain_next(a, t1.data(), 4);
  CHECK(h1 == chain_next(chain_seed("sig-a", "f32"), t1.data(), 4));
  CHECK(h1 != chain_next(a, t2.data(), 4));
  CHECK(h1 != chain_next(a, t1.data(), 3));
  CHECK(h1 != chain_next(chain_seed("sig-b", "f32"), t1.data(), 4));
  CHECK(h1 != chain_next(chain_seed("sig-a", "f16"), t1.data(), 4));
  // Chaining is order-sensitive: [t1][t2] differs from [t2][t1].
  CHECK(chain_next(h1, t2.data(), 4) != chain_next(chain_next(a, t2.data(), 4), t1.data(), 4));

  const std::string hex = hash_hex(h1);
  REQUIRE(hex.size() == 64);
  for (char ch : hex) CHECK(((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')));
  ChunkHash fixed{};
  for (size_t i = 0; i < fixed.size(); ++i) fixed[i] = static_cast<uint8_t>(i * 8 + 1);
  CHECK(hash_hex(fixed).substr(0, 8) == "01091119");
  CHECK(hash_hex(fixed).substr(56) == "e1e9f1f9");

  CHECK_THROWS_AS(chain_next(a, t1.data(), -1), Error);
}

// ------------------------------------------------------------------ layout

TEST_CASE("payload layout of a hand-computed chunk", "[codec]") {
  // One plane, width 2, one position: floats with bytes 01 02 03 04 and
  // 05 06 07 08 (little-endian) shuffle to 01 05 02 06 03 07 04 08.
  float values[2] = {from_bits(0x04030201u), from_bits(0x08070605u)};
  const int32_t token = 0x11223344;
  PlaneList planes = {PlaneRef{values, 2, 2}};
  const EncodedChunk e = encode_chunk(1, &token, planes, 1);
  CHECK_FALSE(e.compressed);
  CHECK(e.raw_size == 8);
  CHECK(e.payload == std::vector<uint8_t>{0x01, 0x05, 0x02, 0x06, 0x03, 0x07, 0x04, 0x08});
  const uint8_t covered[] = {0x44, 0x33, 0x22, 0x11, 0x01, 0x05, 0x02, 0x06, 0x03, 0x07, 0x04, 0x08};
  CHECK(e.checksum == crc32c_reference(0, covered, sizeof covered));

  // Two planes, two positions: plane A (width 1) then plane B (width 2),
  // shuffled together: stream k holds byte k of a0 a1 b00 b01 b10 b11.
  float a[2] = {from_bits(0xa3a2a1a0u), from_bits(0xb3b2b1b0u)};
  float b[4] = {from_bits(0xc3c2c1c0u), from_bits(0xd3d2d1d0u), from_bits(0xe3e2e1e0u), from_bits(0xf3f2f1f0u)};
  const int32_t toks[2] = {-1, 7};
  PlaneList two = {PlaneRef{a, 1, 1}, PlaneRef{b, 2, 2}};
  const EncodedChunk e2 = encode_chunk(2, toks, two, 1);
  CHECK_FALSE(e2.compressed);
  CHECK(e2.raw_size == 24);
  CHECK(planes_raw_size(two, 2) == 24);
  CHECK(e2.payload == std::vector<uint8_t>{0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,   // byte 0
                                           0xa1, 0xb1, 0xc1, 0xd1, 0xe1, 0xf1,   // byte 1
                                           0xa2, 0xb2, 0xc2, 0xd2, 0xe2, 0xf2,   // byte 2
                                           0xa3, 0xb3, 0xc3, 0xd3, 0xe3, 0xf3}); // byte 3
  std::vector<uint8_t> covered2 = {0xff, 0xff, 0xff, 0xff, 0x07, 0x00, 0x00, 0x00};
  covered2.insert(covered2.end(), e2.payload.begin(), e2.payload.end());
  CHECK(e2.checksum == crc32c_reference(0, covered2.data(), covered2.size()));
}

TEST_CASE("payload layout matches the reference for many shapes, contiguous and strided", "[codec]") {
  std::mt19937 rng(7);
  for (int64_t width = 1; width <= 70; width += (width < 40 ? 1 : 7)) {
    for (int64_t n_tokens : {1, 2, 3, 5, 17}) {
      for (int64_t pad : {0, 1, 3}) {
        const int64_t stride = width + pad;
        std::vector<float> a(static_cast<size_t>(stride * n_tokens + 4)), b(static_cast<size_t>(n_tokens * 3));
        for (float& f : a) f = from_bits(static_cast<uint32_t>(rng()));
        for (float& f : b) f = from_bits(static_cast<uint32_t>(rng()));
        // Unaligned base (offset 1 float) for the strided plane.
        PlaneList planes = {PlaneRef{a.data() + 1, width, stride}, PlaneRef{b.data(), 3, 3}};
        const std::vector<int32_t> tokens = make_tokens(n_tokens, static_cast<uint32_t>(width));
        const EncodedChunk e = encode_chunk(n_tokens, tokens.data(), planes, 1);
        const std::vector<uint8_t> expected = reference_raw(planes, n_tokens);
        INFO("width " << width << " tokens " << n_tokens << " stride " << stride);
        REQUIRE(e.raw_size == static_cast<int64_t>(expected.size()));
        REQUIRE(decoded_bytes(e) == expected);
        std::vector<uint8_t> covered = le_bytes(tokens);
        covered.insert(covered.end(), expected.begin(), expected.end());
        REQUIRE(e.checksum == crc32c_reference(0, covered.data(), covered.size()));
      }
    }
  }
}

// ------------------------------------------------------------------ round trips

TEST_CASE("round trip is bit-exact for NaNs, -0, denormals and infinities", "[codec]") {
  for (bool with_random : {false, true}) {
    for (int64_t n_tokens : {1, 7, 37, 64}) {
      Planes src(n_tokens, kTinyWidths);
      fill_special(src, static_cast<uint32_t>(n_tokens), with_random);
      const std::vector<int32_t> tokens = make_tokens(n_tokens, 3);
      PlaneList sl = src.list();
      const EncodedChunk e = encode_chunk(n_tokens, tokens.data(), sl, 1);
      INFO("tokens " << n_tokens << " random " << with_random << " compressed " << e.compressed);
      CHECK(e.raw_size == planes_raw_size(sl, n_tokens));
      Planes dst(n_tokens, kTinyWidths);
      dst.fill_bits(0x12345678u);
      PlaneList dl = dst.list();
      decode_chunk(e.payload.data(), e.payload.size(), e.compressed, e.raw_size, e.checksum, n_tokens, tokens.data(),
                   dl);
      CHECK(dst == src);
    }
  }
}

TEST_CASE("strided planes round trip and leave the gaps alone", "[codec]") {
  // .coli_kv-like records: a token slot, 3 layers of 16+8 floats, 8 index floats.
  const int64_t n_tokens = 29;
  const int64_t record = 1 + 3 * (16 + 8) + 8;
  std::vector<float> recs(static_cast<size_t>(record * n_tokens));
  std::mt19937 rng(99);
  for (float& f : recs) f = from_bits(static_cast<uint32_t>(rng()));
  const auto planes_over = [&](float* base) {
    PlaneList l;
    int64_t off = 1;
    for (int64_t w : kTinyWidths) {
      l.push_back(PlaneRef{base + off, w, record});
      off += w;
    }
    return l;
  };
  const std::vector<int32_t> tokens = make_tokens(n_tokens, 5);
  PlaneList src = planes_over(recs.data());
  const EncodedChunk e = encode_chunk(n_tokens, tokens.data(), src, 1);

  // Into other records: every plane float equal, token slots untouched.
  std::vector<float> out(recs.size(), from_bits(0xdeadbeefu));
  PlaneList dst = planes_over(out.data());
  decode_chunk(e.payload.data(), e.payload.size(), e.compressed, e.raw_size, e.checksum, n_tokens, tokens.data(),
               dst);
  for (int64_t i = 0; i < n_tokens; ++i) {
    CHECK(bits_of(out[static_cast<size_t>(i * record)]) == 0xdeadbeefu);
    CHECK(std::memcmp(&out[static_cast<size_t>(i * record + 1)], &recs[static_cast<size_t>(i * record + 1)],
                      (record - 1) * 4) == 0);
  }

  // Into contiguous engine buffers: same values, and encoding those gives the same blob.
  Planes engine(n_tokens, kTinyWidths);
  PlaneList el = engine.list();
  decode_chunk(e.payload.data(), e.payload.size(), e.compressed, e.raw_size, e.checksum, n_tokens, tokens.data(), el);
  int64_t off = 1;
  for (size_t k = 0; k < kTinyWidths.size(); ++k) {
    for (int64_t i = 0; i < n_tokens; ++i)
      CHECK(std::memcmp(&engine.data[k][static_cast<size_t>(i * kTinyWidths[k])],
                        &recs[static_cast<size_t>(i * record + off)], static_cast<size_t>(kTinyWidths[k]) * 4) == 0);
    off += kTinyWidths[k];
  }
  const EncodedChunk e2 = encode_chunk(n_tokens, tokens.data(), el, 1);
  CHECK(e2.payload == e.payload);
  CHECK(e2.checksum == e.checksum);
  CHECK(e2.compressed == e.compressed);
}

TEST_CASE("compressible data is compressed, random bits are stored as is", "[codec]") {
  const int64_t n_tokens = 64;
  const std::vector<int32_t> tokens = make_tokens(n_tokens, 1);

  Planes smooth(n_tokens, kTinyWidths);
  fill_bf16_like(smooth, 11);
  PlaneList sl = smooth.list();
  const EncodedChunk c = encode_chunk(n_tokens, tokens.data(), sl, 3);
  CHECK(c.compressed);
  CHECK(static_cast<int64_t>(c.payload.size()) < c.raw_size / 2);
  // One frame per byte plane, each with its content size and no zstd checksum.
  const std::vector<FrameInfo> frames = parse_frames(c.payload);
  REQUIRE(frames.size() == 4);
  for (const FrameInfo& f : frames) {
    CHECK(f.content == static_cast<size_t>(c.raw_size / 4));
    CHECK((c.payload[f.offset + 4] & 0x04) == 0);
  }

  Planes noise(n_tokens, kTinyWidths);
  fill_random(noise, 12);
  PlaneList nl = noise.list();
  const EncodedChunk r = encode_chunk(n_tokens, tokens.data(), nl, 3);
  CHECK_FALSE(r.compressed);
  CHECK(static_cast<int64_t>(r.payload.size()) == r.raw_size);
  CHECK(r.payload == reference_raw(nl, n_tokens));

  // An empty chunk: nothing to compress, nothing to write.
  const EncodedChunk z = encode_chunk(0, nullptr, sl, 1);
  CHECK_FALSE(z.compressed);
  CHECK(z.raw_size == 0);
  CHECK(z.payload.empty());
  CHECK(z.checksum == 0u);
  decode_chunk(z.payload.data(), 0, false, 0, z.checksum, 0, nullptr, sl);
}

// ------------------------------------------------------------------ plane frames

namespace {

// Byte patterns of one byte plane, value i.
enum class Bytes { kRandom, kZero, kSkewed };

uint8_t byte_of(Bytes b, size_t i, std::mt19937& rng) {
  switch (b) {
    case Bytes::kRandom: return static_cast<uint8_t>(rng());
    case Bytes::kZero: return 0;
    case Bytes::kSkewed: return (rng() % 8 == 0) ? static_cast<uint8_t>(0x3d + i % 3) : 0x3e;  // ~0.7 bits a byte
  }
  return 0;
}

// One plane of n_tokens x width floats whose byte k follows pattern[k].
Planes planes_of_bytes(int64_t n_tokens, int64_t width, const std::vector<Bytes>& pattern, uint32_t seed) {
  Planes p(n_tokens, {width});
  std::mt19937 rng(seed);
  std::vector<float>& d = p.data[0];
  for (size_t i = 0; i < d.size(); ++i) {
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) v |= uint32_t{k < pattern.size() ? byte_of(pattern[k], i, rng) : uint8_t{0}} << (8 * k);
    d[i] = from_bits(v);
  }
  return p;
}

// bfloat16-exact values whose bf16 low byte follows lo and high byte hi.
Planes bf16_planes_of_bytes(int64_t n_tokens, int64_t width, Bytes lo, Bytes hi, uint32_t seed) {
  Planes p(n_tokens, {width});
  std::mt19937 rng(seed);
  for (size_t i = 0; i < p.data[0].size(); ++i) {
    const uint32_t l = byte_of(lo, i, rng), h = byte_of(hi, i, rng);
    p.data[0][i] = from_bits(l << 16 | h << 24);
  }
  return p;
}

// A raw frame built from RFC 8878 alone (independently of the library):
// single segment, smallest content-size field, raw blocks of at most 128 KiB.
std::vector<uint8_t> raw_frame(const uint8_t* data, size_t n) {
  std::vector<uint8_t> f = {0x28, 0xb5, 0x2f, 0xfd};
  if (n < 256) {
    f.push_back(0x20);
    f.push_back(static_cast<uint8_t>(n));
  } else if (n < 65536 + 256) {
    f.push_back(0x60);
    f.push_back(static_cast<uint8_t>((n - 256) & 0xff));
    f.push_back(static_cast<uint8_t>((n - 256) >> 8));
  } else {
    f.push_back(0xa0);
    for (int i = 0; i < 4; ++i) f.push_back(static_cast<uint8_t>(n >> (8 * i)));
  }
  size_t done = 0;
  do {
    const size_t b = std::min(n - done, size_t{131072});
    const uint32_t h = static_cast<uint32_t>(b << 3) | (done + b == n ? 1u : 0u);
    for (int i = 0; i < 3; ++i) f.push_back(static_cast<uint8_t>(h >> (8 * i)));
    f.insert(f.end(), data + done, data + done + b);
    done += b;
  } while (done < n);
  return f;
}

std::vector<uint8_t> slice(const std::vector<uint8_t>& v, size_t from, size_t n) {
  return std::vector<uint8_t>(v.begin() + static_cast<std::ptrdiff_t>(from),
                              v.begin() + static_cast<std::ptrdiff_t>(from + n));
}

std::vector<uint8_t> concat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::vector<bool> raw_pattern(const std::vector<FrameInfo>& frames) {
  std::vector<bool> out;
  for (const FrameInfo& f : frames) out.push_back(f.raw_blocks);
  return out;
}

void require_round_trip(const EncodedChunk& e, const Planes& src, const std::vector<int32_t>& tokens,
                        ChunkPrecision precision = ChunkPrecision::kF32) {
  Planes dst(src.n_tokens, src.widths);
  dst.fill_bits(0xa5a5a5a5u);
  PlaneList dl = dst.list();
  decode_chunk(e.payload.data(), e.payload.size(), e.compressed, e.raw_size, e.checksum, src.n_tokens, tokens.data(),
               dl, precision);
  CHECK(dst == src);
}

}  // namespace

TEST_CASE("plane frames: one zstd frame per f32 byte plane, raw when incompressible", "[codec]") {
  // 160 x 1024 floats: each byte plane is 163,840 bytes, so a raw frame takes
  // two blocks (131,072 + 32,768) and the trial covers only its start.
  const int64_t n = 160, width = 1024;
  const size_t len = static_cast<size_t>(n * width);
  const std::vector<int32_t> tokens = make_tokens(n, 31);
  Planes src = planes_of_bytes(n, width, {Bytes::kRandom, Bytes::kZero, Bytes::kSkewed, Bytes::kRandom}, 32);
  PlaneList sl = src.list();
  const EncodedChunk e = encode_chunk(n, tokens.data(), sl, 1);
  REQUIRE(e.compressed);
  REQUIRE(e.raw_size == static_cast<int64_t>(4 * len));
  const std::vector<uint8_t> shuffled = reference_raw(sl, n);

  const std::vector<FrameInfo> frames = parse_frames(e.payload);
  REQUIRE(frames.size() == 4);
  CHECK(raw_pattern(frames) == std::vector<bool>{true, false, false, true});
  for (const FrameInfo& f : frames) {
    CHECK(f.content == len);
    CHECK((e.payload[f.offset + 4] & 0x04) == 0);  // no zstd checksum
  }
  // The raw frames byte for byte: magic, descriptor 0xa0 (4-byte content
  // size, single segment), content size, block headers with Last_Block last.
  for (size_t k : {size_t{0}, size_t{3}}) {
    INFO("plane " << k);
    CHECK(slice(e.payload, frames[k].offset, frames[k].size) == raw_frame(shuffled.data() + k * len, len));
    CHECK(frames[k].size == 4 + 1 + 4 + 3 + 131072 + 3 + 32768);
    const uint8_t* f = e.payload.data() + frames[k].offset;
    CHECK(std::vector<uint8_t>(f, f + 12) ==
          std::vector<uint8_t>{0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0x00, 0x80, 0x02, 0x00, 0x00, 0x00, 0x10});
    CHECK(std::vector<uint8_t>(f + 12 + 131072, f + 15 + 131072) == std::vector<uint8_t>{0x01, 0x00, 0x04});
  }
  CHECK(frames[1].size < 100);      // zeros
  CHECK(frames[2].size < len / 4);  // ~0.7 bits a byte
  CHECK(e.payload.size() == frames[3].offset + frames[3].size);

  // Concatenated frames are one zstd stream: plain ZSTD_decompress (what
  // `zstd -d` does) yields the shuffled bytes.
  CHECK(decoded_bytes(e) == shuffled);
  require_round_trip(e, src, tokens);

  // Compressible byte 0 and 3, random middle bytes: the other way round.
  Planes mid = planes_of_bytes(n, width, {Bytes::kSkewed, Bytes::kRandom, Bytes::kRandom, Bytes::kZero}, 33);
  PlaneList ml = mid.list();
  const EncodedChunk m = encode_chunk(n, tokens.data(), ml, 1);
  REQUIRE(m.compressed);
  CHECK(raw_pattern(parse_frames(m.payload)) == std::vector<bool>{false, true, true, false});
  CHECK(decoded_bytes(m) == reference_raw(ml, n));
  require_round_trip(m, mid, tokens);

  // Other levels are stock zstd per plane: same frame structure.
  const EncodedChunk m3 = encode_chunk(n, tokens.data(), ml, 3);
  CHECK(raw_pattern(parse_frames(m3.payload)) == std::vector<bool>{false, true, true, false});
  require_round_trip(m3, mid, tokens);
}

TEST_CASE("plane frames: small planes take the short content-size fields", "[codec]") {
  // 300-byte planes: 2-byte content size (300 - 256); 200-byte planes: 1 byte.
  for (int64_t width : {100, 200}) {
    const int64_t n = width == 100 ? 3 : 1;
    const size_t len = static_cast<size_t>(n * width);
    const std::vector<int32_t> tokens = make_tokens(n, 41);
    Planes src = planes_of_bytes(n, width, {Bytes::kRandom, Bytes::kZero, Bytes::kZero, Bytes::kZero}, 42);
    PlaneList sl = src.list();
    const EncodedChunk e = encode_chunk(n, tokens.data(), sl, 1);
    INFO("plane bytes " << len);
    REQUIRE(e.compressed);
    const std::vector<FrameInfo> frames = parse_frames(e.payload);
    REQUIRE(frames.size() == 4);
    CHECK(raw_pattern(frames) == std::vector<bool>{true, false, false, false});
    const std::vector<uint8_t> shuffled = reference_raw(sl, n);
    CHECK(slice(e.payload, 0, frames[0].size) == raw_frame(shuffled.data(), len));
    if (len == 300) CHECK(slice(e.payload, 4, 3) == std::vector<uint8_t>{0x60, 44, 0});
    if (len == 200) CHECK(slice(e.payload, 4, 2) == std::vector<uint8_t>{0x20, 200});
    CHECK(slice(e.payload, frames[0].size - len - 3, 3) == std::vector<uint8_t>{
                                                              static_cast<uint8_t>((len << 3 | 1) & 0xff),
                                                              static_cast<uint8_t>((len << 3) >> 8), 0});
    CHECK(decoded_bytes(e) == shuffled);
    require_round_trip(e, src, tokens);
  }
}

TEST_CASE("plane frames: bf16 chunks have two planes", "[codec]") {
  const int64_t n = 160, width = 1024;
  const size_t len = static_cast<size_t>(n * width);
  const std::vector<int32_t> tokens = make_tokens(n, 51);
  const struct {
    Bytes lo, hi;
    std::vector<bool> raw;
  } cases[] = {
      {Bytes::kRandom, Bytes::kSkewed, {true, false}},
      {Bytes::kZero, Bytes::kSkewed, {false, false}},
      {Bytes::kSkewed, Bytes::kRandom, {false, true}},
  };
  for (const auto& c : cases) {
    Planes src = bf16_planes_of_bytes(n, width, c.lo, c.hi, 52);
    PlaneList sl = src.list();
    const EncodedChunk e = encode_chunk(n, tokens.data(), sl, 1, ChunkPrecision::kBf16);
    REQUIRE(e.compressed);
    REQUIRE(e.raw_size == static_cast<int64_t>(2 * len));
    const std::vector<FrameInfo> frames = parse_frames(e.payload);
    REQUIRE(frames.size() == 2);
    CHECK(raw_pattern(frames) == c.raw);
    CHECK(frames[0].content == len);
    CHECK(frames[1].content == len);
    // The shuffled bytes: low bytes of the bf16 values, then high bytes.
    const std::vector<uint8_t> shuffled = decoded_bytes(e);
    for (size_t i = 0; i < len; i += 997) {
      const uint32_t bits = bits_of(src.data[0][i]);
      CHECK(shuffled[i] == static_cast<uint8_t>(bits >> 16));
      CHECK(shuffled[len + i] == static_cast<uint8_t>(bits >> 24));
    }
    require_round_trip(e, src, tokens, ChunkPrecision::kBf16);
  }
}

TEST_CASE("plane frames: an all-zero chunk is four tiny compressed frames", "[codec]") {
  const int64_t n = 160, width = 1024;
  const std::vector<int32_t> tokens = make_tokens(n, 61);
  Planes src(n, {width});  // zeros
  PlaneList sl = src.list();
  const EncodedChunk e = encode_chunk(n, tokens.data(), sl, 1);
  REQUIRE(e.compressed);
  const std::vector<FrameInfo> frames = parse_frames(e.payload);
  REQUIRE(frames.size() == 4);
  CHECK(raw_pattern(frames) == std::vector<bool>(4, false));
  CHECK(e.payload.size() < 200);
  require_round_trip(e, src, tokens);
  const EncodedChunk b = encode_chunk(n, tokens.data(), sl, 1, ChunkPrecision::kBf16);
  CHECK(parse_frames(b.payload).size() == 2);
  require_round_trip(b, src, tokens, ChunkPrecision::kBf16);
}

TEST_CASE("decoding into large planes at any float alignment writes exactly the planes", "[codec]") {
  // Planes of kilobytes are written with streaming stores from a 16-byte
  // boundary on: every start offset, both precisions, the floats around each
  // plane left alone.
  const int64_t n_tokens = 16, width = 520;
  for (ChunkPrecision precision : {ChunkPrecision::kF32, ChunkPrecision::kBf16}) {
    for (int64_t shift = 0; shift < 4; ++shift) {
      INFO("precision " << precision_name(precision) << ", planes start " << shift << " floats past 16 bytes");
      Planes src(n_tokens, {width, 64});
      // Activation-like: the low bytes are raw frames, the top ones compress.
      std::mt19937 rng(static_cast<uint32_t>(shift));
      std::normal_distribution<float> dist(0.0f, 1.0f);
      for (auto& d : src.data)
        for (float& f : d)
          f = precision == ChunkPrecision::kBf16 ? from_bits(bits_of(dist(rng)) & 0xffff0000u) : dist(rng);
      const std::vector<int32_t> tokens = make_tokens(n_tokens, 9);
      PlaneList sl = src.list();
      const EncodedChunk e = encode_chunk(n_tokens, tokens.data(), sl, 1, precision);
      REQUIRE(e.compressed);
      const std::vector<bool> raw = raw_pattern(parse_frames(e.payload));
      REQUIRE(raw.front());
      REQUIRE_FALSE(raw.back());

      const size_t plane0 = static_cast<size_t>(width * n_tokens), plane1 = static_cast<size_t>(64 * n_tokens);
      alignas(16) static float out[8 + 16 * 520 + 16 * 64 + 8];
      std::fill(std::begin(out), std::end(out), from_bits(0xdeadbeefu));
      float* base0 = out + 4 + shift;
      float* base1 = base0 + plane0 + 1;  // the second plane starts one float later still
      PlaneList dl = {PlaneRef{base0, width, width}, PlaneRef{base1, 64, 64}};
      ChunkHash digest{};  // over the raw payload put back together from its pieces
      decode_chunk(e.payload.data(), e.payload.size(), e.compressed, e.raw_size, e.checksum, n_tokens,
                   tokens.data(), dl, precision, &digest);
      CHECK(digest == e.digest);
      CHECK(std::memcmp(base0, src.data[0].data(), plane0 * 4) == 0);
      CHECK(std::memcmp(base1, src.data[1].data(), plane1 * 4) == 0);
      for (float* f = out; f < base0; ++f) CHECK(bits_of(*f) == 0xdeadbeefu);
      CHECK(bits_of(base0[plane0]) == 0xdeadbeefu);
      for (float* f = base1 + plane1; f < std::end(out); ++f) CHECK(bits_of(*f) == 0xdeadbeefu);
    }
  }
}

TEST_CASE("a payload written before plane frames (one frame for the chunk) still decodes", "[codec]") {
  const int64_t n = 64;
  const std::vector<int32_t> tokens = make_tokens(n, 71);
  Planes src(n, kTinyWidths);
  fill_bf16_like(src, 72);
  PlaneList sl = src.list();
  for (ChunkPrecision precision : {ChunkPrecision::kF32, ChunkPrecision::kBf16}) {
    const EncodedChunk e = encode_chunk(n, tokens.data(), sl, 1, precision);
    const std::vector<uint8_t> shuffled = decoded_bytes(e);
    // What the earlier encoder stored: ZSTD_compress of the whole shuffled chunk.
    std::vector<uint8_t> old(ZSTD_compressBound(shuffled.size()));
    const size_t got = ZSTD_compress(old.data(), old.size(), shuffled.data(), shuffled.size(), 1);
    REQUIRE_FALSE(ZSTD_isError(got));
    old.resize(got);
    REQUIRE(parse_frames(old).size() == 1);
    Planes dst(n, kTinyWidths);
    PlaneList dl = dst.list();
    decode_chunk(old.data(), old.size(), true, e.raw_size, e.checksum, n, tokens.data(), dl, precision);
    if (precision == ChunkPrecision::kF32) CHECK(dst == src);  // bf16-like values are exact in bf16 too
    if (precision == ChunkPrecision::kBf16) CHECK(dst == src);
  }
}

TEST_CASE("corrupt plane-frame payloads are kCorrupt naming the frame", "[codec]") {
  // Four plane frames built here (raw, compressed, compressed, raw), so that
  // the cases depend on the format only, not on the encoder's choices.
  const int64_t n = 160, width = 1024;
  const std::vector<int64_t> widths = {width};
  const size_t len = static_cast<size_t>(n * width);
  const std::vector<int32_t> tokens = make_tokens(n, 81);
  Planes src = planes_of_bytes(n, width, {Bytes::kRandom, Bytes::kZero, Bytes::kSkewed, Bytes::kRandom}, 82);
  PlaneList sl = src.list();
  const std::vector<uint8_t> shuffled = reference_raw(sl, n);
  EncodedChunk e;
  e.raw_size = static_cast<int64_t>(4 * len);
  std::vector<uint8_t> covered = le_bytes(tokens);
  covered.insert(covered.end(), shuffled.begin(), shuffled.end());
  e.checksum = crc32c(0, covered.data(), covered.size());
  e.compressed = true;
  e.payload = concat({raw_frame(shuffled.data(), len), zstd_frame(shuffled.data() + len, len, true),
                      zstd_frame(shuffled.data() + 2 * len, len, true), raw_frame(shuffled.data() + 3 * len, len)});
  const std::vector<FrameInfo> fr = parse_frames(e.payload);
  REQUIRE(fr.size() == 4);
  REQUIRE(raw_pattern(fr) == std::vector<bool>{true, false, false, true});
  const auto frame = [&](size_t k) { return slice(e.payload, fr[k].offset, fr[k].size); };
  const auto at = [&](size_t k) { return "zstd frame " + std::to_string(k) + " at byte " + std::to_string(fr[k].offset); };
  const auto corrupt_with = [&](const std::vector<uint8_t>& payload, const std::string& what) {
    require_corrupt(payload, true, e.raw_size, e.checksum, tokens, n, what, widths);
  };
  // The frames as built decode; each case below differs from them in one thing.
  CHECK(decoded_bytes(e) == shuffled);
  require_round_trip(e, src, tokens);

  SECTION("a truncated frame") {
    corrupt_with(slice(e.payload, 0, fr[1].offset + fr[1].size / 2), at(1) + ": zstd: ");
    corrupt_with(slice(e.payload, 0, e.payload.size() - 1), at(3) + ": zstd: ");
    corrupt_with(slice(e.payload, 0, fr[2].offset + 5), at(2) + ": header is malformed or truncated");
    corrupt_with(slice(e.payload, 0, fr[3].offset + 2), at(3) + ": not a zstd frame (2 bytes after frame 2)");
    // Cut at a frame boundary: every frame is whole, but one is missing.
    corrupt_with(slice(e.payload, 0, fr[3].offset),
                 "zstd frames declare " + std::to_string(3 * len) + " bytes in all, expected " +
                     std::to_string(4 * len) + " (3 frames)");
    // Every cut within 32 bytes of a frame's start or end, every cut of the
    // small frame 1, and every 13th cut inside frame 2 (a cut there is a
    // truncated compressed frame wherever it falls; each cut decodes the raw
    // frame 0 first, which is what made every one of them slow under the
    // sanitizers).
    const auto near_edge = [&](size_t cut) {
      for (const FrameInfo& f : fr)
        if (cut + 32 > f.offset && cut < f.offset + 32) return true;
      return cut + 32 > e.payload.size();
    };
    for (size_t cut = 0; cut < e.payload.size(); ++cut) {
      const bool in_frame1 = cut >= fr[1].offset && cut < fr[2].offset;
      const bool in_frame2 = cut >= fr[2].offset && cut < fr[3].offset;
      if (!near_edge(cut) && !in_frame1 && !(in_frame2 && cut % 13 == 0)) continue;
      INFO("cut at " << cut);
      corrupt_with(slice(e.payload, 0, cut), cut < 4 ? "not a zstd frame" : "zstd frame");
    }
  }
  SECTION("raw frames are read where they lie: any other frame of the same bytes decodes the same") {
    // Raw blocks behind a Window_Descriptor (no single segment), and behind a
    // zstd checksum: not the library's raw frames, so zstd decodes them.
    std::vector<uint8_t> windowed = {0x28, 0xb5, 0x2f, 0xfd, 0x80, 0x58};  // 4-byte size, window 2 MiB
    for (int i = 0; i < 4; ++i) windowed.push_back(static_cast<uint8_t>(len >> (8 * i)));
    const std::vector<uint8_t> f0 = frame(0);
    windowed.insert(windowed.end(), f0.begin() + 9, f0.end());  // its blocks
    EncodedChunk w = e;
    w.payload = concat({windowed, frame(1), frame(2), frame(3)});
    require_round_trip(w, src, tokens);
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    std::vector<uint8_t> summed(ZSTD_compressBound(len));
    summed.resize(ZSTD_compress2(c, summed.data(), summed.size(), shuffled.data() + 3 * len, len));
    ZSTD_freeCCtx(c);
    w.payload = concat({frame(0), frame(1), frame(2), summed});
    require_round_trip(w, src, tokens);
  }
  SECTION("a raw frame's blocks are checked as zstd checks them") {
    // A changed byte in a raw block: the checksum.
    std::vector<uint8_t> flipped = e.payload;
    flipped[fr[3].offset + 12 + 1000] ^= 0x01;
    corrupt_with(flipped, "checksum mismatch");
    // A block type other than Raw_Block (RLE_Block: one byte for the block's
    // size), so the frame ends early and the next one is not a frame.
    std::vector<uint8_t> rle = frame(0);
    rle[9] |= 0x02;
    corrupt_with(concat({rle, frame(1), frame(2), frame(3)}), "zstd frame 1 at byte 17: not a zstd frame");
    // One block past the format's 128 KiB (both blocks of frame 0 as one):
    // left to zstd, which takes raw blocks of any size within the content.
    std::vector<uint8_t> big = slice(e.payload, 0, 9);
    const uint32_t h = static_cast<uint32_t>(len << 3) | 1u;
    for (int i = 0; i < 3; ++i) big.push_back(static_cast<uint8_t>(h >> (8 * i)));
    big.insert(big.end(), shuffled.begin(), shuffled.begin() + static_cast<std::ptrdiff_t>(len));
    EncodedChunk b = e;
    b.payload = concat({big, frame(1), frame(2), frame(3)});
    require_round_trip(b, src, tokens);
  }
  SECTION("frame sizes that do not add up") {
    // Plane 2 one byte short: the four frames declare one byte too few.
    corrupt_with(concat({frame(0), frame(1), raw_frame(shuffled.data() + 2 * len, len - 1), frame(3)}),
                 "zstd frames declare " + std::to_string(4 * len - 1) + " bytes in all, expected " +
                     std::to_string(4 * len) + " (4 frames)");
    // Plane 2 one byte long: frame 3 then declares more than is left.
    std::vector<uint8_t> longer(shuffled.begin() + static_cast<std::ptrdiff_t>(2 * len),
                                shuffled.begin() + static_cast<std::ptrdiff_t>(3 * len));
    longer.push_back(0);
    const std::vector<uint8_t> f2 = raw_frame(longer.data(), longer.size());
    corrupt_with(concat({frame(0), frame(1), f2, frame(3)}),
                 "zstd frame 3 at byte " + std::to_string(fr[2].offset + f2.size()) + " declares " +
                     std::to_string(len) + " bytes, more than the " + std::to_string(len - 1) +
                     " left of the expected " + std::to_string(4 * len));
    // One frame for the whole chunk, then more frames.
    corrupt_with(concat({raw_frame(shuffled.data(), 4 * len), frame(0)}), "bytes after its last zstd frame");
    // A single frame for less than the chunk.
    corrupt_with(raw_frame(shuffled.data(), 4 * len - 10), "bytes in all, expected " + std::to_string(4 * len) + " (1 frame)");
  }
  SECTION("a frame that does not declare its content size") {
    const std::vector<uint8_t> no_size = zstd_frame(shuffled.data() + len, len, false);
    corrupt_with(concat({frame(0), no_size, frame(2), frame(3)}),
                 at(1) + " does not declare its content size, expected " + std::to_string(4 * len) +
                     " bytes in all");
    // The same frame with its size is fine.
    const std::vector<uint8_t> good = concat({frame(0), zstd_frame(shuffled.data() + len, len, true), frame(2), frame(3)});
    Planes dst(n, widths);
    PlaneList dl = dst.list();
    decode_chunk(good.data(), good.size(), true, e.raw_size, e.checksum, n, tokens.data(), dl);
    CHECK(dst == src);
  }
  SECTION("bytes after the last frame") {
    std::vector<uint8_t> extra = e.payload;
    extra.insert(extra.end(), {0x28, 0xb5, 0x2f});
    corrupt_with(extra, "3 bytes after its last zstd frame (" + at(3) + " ends at byte " +
                            std::to_string(e.payload.size()) + ")");
    // Even a well-formed empty frame.
    corrupt_with(concat({e.payload, raw_frame(shuffled.data(), 0)}), "9 bytes after its last zstd frame");
    // A skippable frame in between is not a plane frame.
    const std::vector<uint8_t> skippable = {0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0};
    corrupt_with(concat({frame(0), skippable, frame(1), frame(2), frame(3)}), at(1) + ": not a zstd frame");
  }
  SECTION("a raw block header claiming more than is there") {
    // The last block of the last frame claims 16 bytes more than the payload has.
    std::vector<uint8_t> bad = e.payload;
    const size_t h = fr[3].offset + 12 + 131072;  // header of its second block (32,768 bytes, last)
    REQUIRE(bad[h] == 0x01);
    const uint32_t claim = (32768 + 16) << 3 | 1;
    bad[h] = static_cast<uint8_t>(claim);
    bad[h + 1] = static_cast<uint8_t>(claim >> 8);
    bad[h + 2] = static_cast<uint8_t>(claim >> 16);
    corrupt_with(bad, at(3) + ": zstd: ");
    // The first block of the first frame claims 16 bytes more (past 128 KiB):
    // it overlaps what follows; whatever is found there, it is corrupt.
    std::vector<uint8_t> first = e.payload;
    const uint32_t claim0 = (131072 + 16) << 3;
    first[9] = static_cast<uint8_t>(claim0);
    first[10] = static_cast<uint8_t>(claim0 >> 8);
    first[11] = static_cast<uint8_t>(claim0 >> 16);
    corrupt_with(first, "zstd frame");
    // A frame whose only block claims more than its declared content.
    std::vector<uint8_t> small = raw_frame(shuffled.data(), 200);
    small[6] = static_cast<uint8_t>((201 << 3 | 1) & 0xff);
    small[7] = static_cast<uint8_t>((201 << 3) >> 8);
    corrupt_with(concat({small, slice(shuffled, 200, 1), raw_frame(shuffled.data() + 200, 4 * len - 200)}),
                 "zstd frame 0 at byte 0");
  }
  SECTION("a changed byte in a raw frame's data") {
    std::vector<uint8_t> bad = e.payload;
    bad[fr[3].offset + 12 + 1000] ^= 0x40;
    corrupt_with(bad, "checksum mismatch");
  }
}

TEST_CASE("encode and decode are thread-safe", "[codec]") {
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      for (int round = 0; round < 25; ++round) {
        const int64_t n = 8 + (t * 25 + round) % 40;
        Planes src(n, kTinyWidths);
        if (round % 2) fill_random(src, static_cast<uint32_t>(t * 1000 + round));
        else fill_bf16_like(src, static_cast<uint32_t>(t * 1000 + round));
        const std::vector<int32_t> tokens = make_tokens(n, static_cast<uint32_t>(round));
        PlaneList sl = src.list();
        const EncodedChunk e = encode_chunk(n, tokens.data(), sl, 1 + round % 3);
        Planes dst(n, kTinyWidths);
        PlaneList dl = dst.list();
        decode_chunk(e.payload.data(), e.payload.size(), e.compressed, e.raw_size, e.checksum, n, tokens.data(), dl);
        if (!(dst == src)) ++failures[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == std::vector<int>(4, 0));
}

// ------------------------------------------------------------------ corruption

TEST_CASE("corrupt payloads are detected before any plane byte is written", "[codec]") {
  const int64_t n = 24;
  const std::vector<int32_t> tokens = make_tokens(n, 21);

  Planes smooth(n, kTinyWidths);
  fill_bf16_like(smooth, 22);
  PlaneList sl = smooth.list();
  const EncodedChunk c = encode_chunk(n, tokens.data(), sl, 1);
  REQUIRE(c.compressed);

  Planes noise(n, kTinyWidths);
  fill_random(noise, 23);
  PlaneList nl = noise.list();
  const EncodedChunk u = encode_chunk(n, tokens.data(), nl, 1);
  REQUIRE_FALSE(u.compressed);

  SECTION("every single-bit flip of a compressed payload") {
    // A few bits of a zstd frame do not change what it decodes to (e.g.
    // unused header or padding bits); such a flip must decode to the
    // original values. Every other flip must be rejected untouched.
    size_t harmless = 0, flips = 0;
    for (size_t i = 0; i < c.payload.size(); ++i) {
      for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x10}, uint8_t{0x80}}) {
        std::vector<uint8_t> bad = c.payload;
        bad[i] ^= mask;
        ++flips;
        INFO("byte " << i << " of " << bad.size() << " mask " << int{mask});
        Planes dst(n, kTinyWidths);
        dst.fill_bits(0xa5a5a5a5u);
        const Planes before = dst;
        PlaneList dl = dst.list();
        try {
          decode_chunk(bad.data(), bad.size(), true, c.raw_size, c.checksum, n, tokens.data(), dl);
          ++harmless;
          REQUIRE(dst == smooth);
        } catch (const Error& e) {
          REQUIRE(e.code() == ErrorCode::kCorrupt);
          REQUIRE(dst == before);
        }
      }
    }
    CHECK(harmless * 100 < flips);
  }
  SECTION("a flipped byte in an uncompressed payload") {
    for (size_t i : {size_t{0}, u.payload.size() / 2, u.payload.size() - 1}) {
      std::vector<uint8_t> bad = u.payload;
      bad[i] ^= 0x10;
      require_corrupt(bad, false, u.raw_size, u.checksum, tokens, n, "checksum mismatch");
    }
  }
  SECTION("a wrong raw size") {
    require_corrupt(c.payload, true, c.raw_size + 4, c.checksum, tokens, n, "raw size is");
    require_corrupt(u.payload, false, u.raw_size - 4, u.checksum, tokens, n, "raw size is");
    require_corrupt(u.payload, false, -1, u.checksum, tokens, n, "raw size is -1 bytes");
  }
  SECTION("a truncated payload") {
    std::vector<uint8_t> tc(c.payload.begin(), c.payload.end() - 1);
    require_corrupt(tc, true, c.raw_size, c.checksum, tokens, n, "zstd");
    std::vector<uint8_t> head(c.payload.begin(), c.payload.begin() + 3);
    require_corrupt(head, true, c.raw_size, c.checksum, tokens, n, "not a zstd frame");
    require_corrupt({}, true, c.raw_size, c.checksum, tokens, n, "not a zstd frame");
    std::vector<uint8_t> tu(u.payload.begin(), u.payload.end() - 1);
    require_corrupt(tu, false, u.raw_size, u.checksum, tokens, n, "(stored uncompressed)");
  }
  SECTION("extra bytes after the frame or the raw payload") {
    std::vector<uint8_t> ec = c.payload;
    ec.push_back(0);
    require_corrupt(ec, true, c.raw_size, c.checksum, tokens, n, "1 bytes after its last zstd frame (zstd frame 3 at byte");
    std::vector<uint8_t> eu = u.payload;
    eu.push_back(0);
    require_corrupt(eu, false, u.raw_size, u.checksum, tokens, n, "(stored uncompressed)");
  }
  SECTION("the wrong compressed flag") {
    require_corrupt(u.payload, true, u.raw_size, u.checksum, tokens, n, "not a zstd frame");
    require_corrupt(c.payload, false, c.raw_size, c.checksum, tokens, n, "(stored uncompressed)");
  }
  SECTION("a wrong checksum") {
    require_corrupt(c.payload, true, c.raw_size, c.checksum ^ 1u, tokens, n, "checksum mismatch: stored 0x");
    require_corrupt(u.payload, false, u.raw_size, c.checksum ^ 0x80000000u, tokens, n, "checksum mismatch");
  }
  SECTION("a changed token") {
    std::vector<int32_t> other = tokens;
    other[5] += 1;
    require_corrupt(c.payload, true, c.raw_size, c.checksum, other, n, "checksum mismatch");
    require_corrupt(u.payload, false, u.raw_size, u.checksum, other, n, "checksum mismatch");
  }
  SECTION("frames whose declared content size is wrong or missing") {
    const std::vector<uint8_t> raw = decoded_bytes(c);
    std::vector<uint8_t> longer = raw;
    longer.resize(raw.size() + 64, 0);
    require_corrupt(zstd_frame(longer.data(), longer.size(), true), true, c.raw_size, c.checksum, tokens, n,
                    "zstd frame 0 at byte 0 declares " + std::to_string(longer.size()) + " bytes, expected " +
                        std::to_string(raw.size()));
    require_corrupt(zstd_frame(raw.data(), raw.size() - 4, true), true, c.raw_size, c.checksum, tokens, n,
                    "zstd frames declare " + std::to_string(raw.size() - 4) + " bytes in all, expected " +
                        std::to_string(raw.size()) + " (1 frame)");
    require_corrupt(zstd_frame(raw.data(), raw.size(), false), true, c.raw_size, c.checksum, tokens, n,
                    "zstd frame 0 at byte 0 does not declare its content size");
    // The same frame with its content size is accepted: the three above fail for their header alone.
    const std::vector<uint8_t> good = zstd_frame(raw.data(), raw.size(), true);
    Planes dst(n, kTinyWidths);
    PlaneList dl = dst.list();
    decode_chunk(good.data(), good.size(), true, c.raw_size, c.checksum, n, tokens.data(), dl);
    CHECK(dst == smooth);
  }
  SECTION("a frame whose header understates its content is bounded by raw_size") {
    const std::vector<uint8_t> raw = decoded_bytes(c);
    std::vector<uint8_t> longer = raw;
    longer.resize(raw.size() + 4096, 0x5a);
    std::vector<uint8_t> lying = zstd_frame(longer.data(), longer.size(), true);
    patch_frame_content_size(lying, raw.size());
    require_corrupt(lying, true, c.raw_size, c.checksum, tokens, n, "zstd frame 0 at byte 0: zstd: ");
    std::vector<uint8_t> shorter = zstd_frame(raw.data(), raw.size() - 400, true);
    patch_frame_content_size(shorter, raw.size());
    require_corrupt(shorter, true, c.raw_size, c.checksum, tokens, n, "");
  }
}

TEST_CASE("bad plane descriptors are invalid arguments, not corruption", "[codec]") {
  std::vector<float> buf(64);
  const int32_t toks[4] = {1, 2, 3, 4};
  PlaneList narrow = {PlaneRef{buf.data(), 8, 4}};
  CHECK_THROWS_AS(encode_chunk(4, toks, narrow, 1), Error);
  try {
    encode_chunk(4, toks, narrow, 1);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
  }
  PlaneList ok = {PlaneRef{buf.data(), 8, 8}};
  try {
    encode_chunk(-1, toks, ok, 1);
    FAIL("negative token count accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
  }
  PlaneList null_base = {PlaneRef{nullptr, 8, 8}};
  CHECK_THROWS_AS(encode_chunk(4, toks, null_base, 1), Error);
  PlaneList negative = {PlaneRef{buf.data(), -8, 8}};
  CHECK_THROWS_AS(planes_raw_size(negative, 4), Error);
  PlaneList huge = {PlaneRef{buf.data(), std::numeric_limits<int64_t>::max() / 2, std::numeric_limits<int64_t>::max() / 2}};
  CHECK_THROWS_AS(planes_raw_size(huge, 4), Error);
  CHECK(planes_raw_size(ok, 4) == 128);
  CHECK(planes_raw_size(PlaneList{}, 4) == 0);
}

// ------------------------------------------------------------------ token JSON

TEST_CASE("token ids round trip through JSON", "[codec]") {
  const auto parse = [](const std::string& s, std::vector<int32_t>& out) {
    return parse_tokens_json(s.data(), s.size(), out);
  };
  std::vector<int32_t> out = {99};
  CHECK(tokens_to_json(nullptr, 0) == "[]");
  REQUIRE(parse("[]", out));
  CHECK(out.empty());

  const int32_t three[] = {1, 2, 3};
  CHECK(tokens_to_json(three, 3) == "[1,2,3]");
  const int32_t edge[] = {0, -1, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 151329};
  const std::string edge_json = tokens_to_json(edge, 5);
  CHECK(edge_json == "[0,-1,-2147483648,2147483647,151329]");
  REQUIRE(parse(edge_json, out));
  CHECK(out == std::vector<int32_t>(edge, edge + 5));

  std::mt19937 rng(5);
  std::vector<int32_t> many;
  for (int i = 0; i < 20000; ++i) many.push_back(static_cast<int32_t>(rng()));
  const std::string many_json = tokens_to_json(many.data(), static_cast<int64_t>(many.size()));
  REQUIRE(parse(many_json, out));
  CHECK(out == many);

  REQUIRE(parse(" [ 1 ,\n2,\t-3 ] ", out));
  CHECK(out == std::vector<int32_t>{1, 2, -3});
  REQUIRE(parse("[ ]", out));
  CHECK(out.empty());
  REQUIRE(parse("[-0]", out));
  CHECK(out == std::vector<int32_t>{0});
}

TEST_CASE("malformed token arrays are rejected", "[codec]") {
  const char* bad[] = {"",       "[",       "]",        "[1,]",       "[,1]",        "[1 2]",  "[2147483648]",
                       "[1]x",   "[a]",     "[1,,2]",   "[-]",        "[--1]",       "[+1]",   "[1.5]",
                       "[1e3]",  "[01]",    "[\"1\"]",  "1",          "[1][2]",      "[1",     "[-2147483649]",
                       "[99999999999]",     "[00]",     "{}",         "[null]",      "[1,2"};
  for (const char* s : bad) {
    std::vector<int32_t> out;
    INFO("input '" << s << "'");
    CHECK_FALSE(parse_tokens_json(s, std::strlen(s), out));
  }
  // Embedded NUL and text past len.
  const char nul[] = {'[', '1', '\0', ']'};
  std::vector<int32_t> out;
  CHECK_FALSE(parse_tokens_json(nul, sizeof nul, out));
  CHECK(parse_tokens_json("[12]garbage", 4, out));
  CHECK(out == std::vector<int32_t>{12});
  CHECK_FALSE(parse_tokens_json(nullptr, 0, out));
}
