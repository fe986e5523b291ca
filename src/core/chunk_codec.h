// Chunk payload codec: planes -> byte-shuffle -> one zstd frame per byte
// plane (or the whole chunk stored as is when not smaller), with a CRC-32C
// over the token ids and the decoded payload.
// The byte layout is written down in docs/format.md.
#ifndef COLIKV_SRC_CORE_CHUNK_CODEC_H
#define COLIKV_SRC_CORE_CHUNK_CODEC_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/sha256.h"

namespace colikv {
namespace detail {

// Where one plane's values for the positions of a chunk lie in memory:
// position i's `width` floats start at base + i * stride (stride >= width).
// Engine buffers have stride == width; .coli_kv records have stride ==
// record_bytes / 4.
struct PlaneRef {
  float* base = nullptr;
  int64_t width = 0;
  int64_t stride = 0;
};

// The planes of a chunk in payload order: for each layer l, its kv_lora plane
// then its qk_rope plane; then one index_hd plane per indexed layer, in
// ascending layer order.
using PlaneList = std::vector<PlaneRef>;

// How the values of a chunk are held in its raw payload (chunks.precision):
// kF32: 4 bytes a value, 4 shuffled byte streams, exact; kBf16: each float32
// rounded to bfloat16 (nearest, ties to even; NaN stays a quiet NaN), 2 bytes
// a value, 2 shuffled byte streams, widened back to float32 on decode.
enum class ChunkPrecision { kF32, kBf16 };

// "f32" / "bf16".
const char* precision_name(ChunkPrecision p);
// Parses "f32" / "bf16"; false for anything else.
bool parse_precision(const std::string& text, ChunkPrecision& out);
// A chunk's compression as stored: "zstd" or "none".
const char* compression_name(bool compressed);
// Parses a chunk's compression, "zstd" (compressed = true) / "none"; false
// for anything else, which every reader refuses alike.
bool parse_compression(const std::string& text, bool& compressed);
// Bytes of one value in the raw payload: 4 or 2.
inline int64_t precision_value_bytes(ChunkPrecision p) { return p == ChunkPrecision::kBf16 ? 2 : 4; }

// float32 -> bfloat16 bits, round to nearest even (NaN -> quiet NaN).
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t b);

// A SHA-256 value: chain hashes, content digests, chunk keys.
using ChunkHash = Sha256Digest;

// The content digest of a chunk whose values are unknown (a token-only chunk
// cut from an evicted one): all zero, which no SHA-256 of content is.
constexpr ChunkHash kNoValuesDigest{};

struct EncodedChunk {
  std::vector<uint8_t> payload;  // the blob to store
  bool compressed = false;       // true: payload is zstd frames, one per byte plane; false: stored as is
  int64_t raw_size = 0;          // bytes of the decoded payload: 4 (f32) or 2 (bf16) * values
  uint32_t checksum = 0;         // chunk_checksum(tokens, decoded payload)
  ChunkHash digest{};            // content_digest(precision, tokens, decoded payload)
  bool skipped = false;          // digest was one of those to skip: nothing compressed, payload empty
};

// The encoding of a token-only chunk of n positions (its values unknown: cut
// or copied from an evicted one): no payload, the digest kNoValuesDigest, and
// the raw size its values would take.
inline EncodedChunk values_missing_chunk(int64_t n, int64_t floats_per_token, ChunkPrecision p) {
  EncodedChunk e;
  e.raw_size = n * floats_per_token * precision_value_bytes(p);
  e.digest = kNoValuesDigest;
  return e;
}

// Shuffles the chunk (the floats of every plane in order, split into 4 byte
// streams: all bytes 0, then all bytes 1, 2, 3) and writes each stream as one
// zstd frame: compressed at `zstd_level` (level 1: parameters tuned for float
// exponent bytes, see chunk_codec.cpp) when a trial on its first 128 KiB saves
// at least 1/64, else a raw frame. Keeps the frames only when together they
// are smaller than the raw payload. Thread-safe: each thread reuses its own
// zstd context and scratch buffers.
// With ChunkPrecision::kBf16 the values are rounded to bfloat16 and split into
// 2 byte streams (low byte of every bf16 value, then high byte).
// When the chunk's digest is one of `skip_if` (chunks stored already with this
// content), returns without compressing: `skipped`, digest and checksum set.
EncodedChunk encode_chunk(int64_t n_tokens, const int32_t* tokens, const PlaneList& planes,
                          int zstd_level, ChunkPrecision precision = ChunkPrecision::kF32,
                          const std::vector<ChunkHash>* skip_if = nullptr);

// Verifies and decodes a payload into the planes. A compressed payload is one
// or more zstd frames (one per byte plane, or one for the whole chunk as
// written before plane frames), each declaring its content size, the sizes
// adding up to raw_size, nothing after the last. Decompression is bounded by
// raw_size (never by a frame header). Checks, in order: the payload size
// (== raw_size when not compressed) or the frame headers, decompression to
// exactly raw_size bytes, then the checksum over the tokens and the decoded
// bytes. Throws Error(kCorrupt, <what is wrong>: for a frame, its index and
// byte offset) before writing any byte of any plane.
// `precision` is the chunk's (chunks.precision); raw_size must be
// precision_value_bytes(precision) * values. With `digest` not null, also
// stores the content digest of the decoded chunk there (verify compares it).
void decode_chunk(const uint8_t* payload, size_t payload_size, bool compressed, int64_t raw_size,
                  uint32_t checksum, int64_t n_tokens, const int32_t* tokens,
                  const PlaneList& planes, ChunkPrecision precision = ChunkPrecision::kF32,
                  ChunkHash* digest = nullptr);

// Raw size of a chunk: 4 * sum over planes of width * n_tokens.
int64_t planes_raw_size(const PlaneList& planes, int64_t n_tokens);

// SHA-256("colikv chunk chain v1" NUL signature NUL precision), and for a
// tenant other than the default "", SHA-256(the same NUL tenant): every chain
// hash, so every chunk key, of one tenant differs from another's (no sharing,
// dedup or prefix match across tenants), while the default tenant's hashes
// are those of stores made before tenants.
ChunkHash chain_seed(const std::string& signature, const std::string& precision, const std::string& tenant = "");
// What chunk_meta.prev_hash holds for a region at position 0 of the tenant's
// chunks: "" (X'') for the default tenant, as before tenants, else the 32
// bytes SHA-256("colikv tenant anchor v1" NUL tenant), so that the prefix
// lookup of a prompt's first chunk finds only its own tenant's.
std::string tenant_anchor(const std::string& tenant);
// SHA-256(prev || tokens as int32 little-endian)
ChunkHash chain_next(const ChunkHash& prev, const int32_t* tokens, int64_t n);
std::string hash_hex(const ChunkHash& h);

// What a chunk holds, independent of how it is compressed:
// SHA-256("colikv chunk content v1" NUL precision NUL || token ids as int32 LE
// || raw payload), the raw payload being the decoded, shuffled bytes (bf16
// values for a bf16 chunk: exactly what a load returns, widened).
ChunkHash content_digest(ChunkPrecision precision, const int32_t* tokens, int64_t n, const uint8_t* raw,
                         size_t raw_size);
// The key a chunk is stored under (chunks.hash) from schema 5 on: its place
// (the chain hash) and its content together,
// SHA-256("colikv chunk key v1" NUL || chain || digest). Chunks are shared
// only when their keys are equal.
ChunkHash chunk_key(const ChunkHash& chain, const ChunkHash& digest);

// Does a stored chunk's key (chunks.hash) say it sits at chain hash `chain`
// with content digest `digest` (none: written before schema 5, keyed by its
// chain hash alone)?
bool key_matches(const ChunkHash& stored, const std::optional<ChunkHash>& digest, const ChunkHash& chain);

// Token ids as a compact JSON array "[1,2,3]" and back. parse returns false
// (leaving out unspecified) on anything but a well-formed array of int32s.
std::string tokens_to_json(const int32_t* tokens, int64_t n);
bool parse_tokens_json(const char* text, size_t len, std::vector<int32_t>& out);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_CHUNK_CODEC_H
