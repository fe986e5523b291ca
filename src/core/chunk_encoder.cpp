// Chunk encoder: the planes byte-shuffled into one raw payload, each byte
// plane then a zstd frame, compressed or stored raw (docs/format.md).
#include "core/chunk_codec.h"

// For ZSTD_c_literalCompressionMode (the level-1 plane parameters); the
// library is still called only through its stable entry points.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

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
#include "core/byte_shuffle.h"
#include "core/chunk_codec_internal.h"
#include "core/crc32c.h"

namespace colikv {
namespace detail {

using namespace codec;

namespace {

uint32_t chunk_checksum(const int32_t* tokens, int64_t n_tokens, const uint8_t* raw, size_t raw_size) {
  return crc32c(crc32c_tokens(0, tokens, n_tokens), raw, raw_size);
}

// The whole chunk is one shuffle: stream k holds byte k of every float of
// every plane, planes in order. Per-plane streams are too short at real chunk
// sizes (a zstd block then mixes mantissa and exponent bytes): they compress
// worse than one shuffle per chunk on full-mantissa activations
// (docs/benchmarks.md, "Figures moved out of code comments").
void shuffle_planes(const PlaneList& planes, int64_t n_tokens, uint8_t* dst, ChunkPrecision precision) {
  const size_t n = static_cast<size_t>(n_tokens);
  const size_t total = chunk_floats(planes, n);
  const auto kernel = precision == ChunkPrecision::kBf16 ? shuffle_bf16 : shuffle_floats;
  size_t offset = 0;  // floats of the earlier planes
  for (const PlaneRef& p : planes) {
    const size_t width = static_cast<size_t>(p.width);
    const size_t count = width * n;
    if (count == 0) continue;
    if (p.stride == p.width) {
      kernel(p.base, count, dst + offset, total);
    } else {
      const size_t stride = static_cast<size_t>(p.stride);
      for (size_t i = 0; i < n; ++i) kernel(p.base + i * stride, width, dst + offset + i * width, total);
    }
    offset += count;
  }
}

// ---------------------------------------------------------------- zstd frames

// A compressed payload is one zstd frame per byte plane of the shuffled chunk
// (docs/format.md). Each plane is either compressed, or stored in a raw frame
// built here: planes of full-mantissa floats (all but the sign/exponent plane)
// are incompressible, and zstd spends time on them for nothing.

// A trial compression of a plane's first kTrialBytes decides: the plane is
// compressed only when the trial saves at least 1/kTrialMinSaving of them.
constexpr size_t kTrialBytes = size_t{128} << 10;
constexpr size_t kTrialMinSaving = 64;

// RFC 8878: Block_Maximum_Size is min(Window_Size, 128 KiB); a raw frame is
// single-segment, so its window is its content size and a block of at most
// min(128 KiB, remaining content) always fits.
constexpr size_t kRawBlockMax = size_t{128} << 10;
constexpr size_t kBlockHeaderBytes = 3;
constexpr size_t kMaxPlanes = 4;

// Bytes of the Frame_Content_Size field chosen for n (single-segment frame).
size_t fcs_field_bytes(uint64_t n) {
  if (n < 256) return 1;
  if (n < 65536 + 256) return 2;
  if (n <= 0xffffffffu) return 4;
  return 8;
}

size_t raw_frame_blocks(size_t n) { return n == 0 ? 1 : (n + kRawBlockMax - 1) / kRawBlockMax; }

// Size of the raw frame holding n bytes.
size_t raw_frame_size(size_t n) {
  return 4 + 1 + fcs_field_bytes(n) + kBlockHeaderBytes * raw_frame_blocks(n) + n;
}

void append_le(std::vector<uint8_t>& out, uint64_t v, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Appends a raw frame holding src[0, n): magic, a Frame_Header_Descriptor with
// Single_Segment_flag and the smallest Frame_Content_Size field, no window
// descriptor, no dictionary id, no checksum; then raw blocks of at most
// 128 KiB, Last_Block set on the last (an empty plane is one empty last block).
void append_raw_frame(std::vector<uint8_t>& out, const uint8_t* src, size_t n) {
  append_le(out, ZSTD_MAGICNUMBER, 4);
  const size_t fcs = fcs_field_bytes(n);
  const uint8_t fcs_flag = fcs == 1 ? 0 : fcs == 2 ? 1 : fcs == 4 ? 2 : 3;
  out.push_back(static_cast<uint8_t>(fcs_flag << 6 | 1u << 5));  // FCS_Field_Size, Single_Segment_flag
  append_le(out, fcs == 2 ? n - 256 : n, fcs);
  size_t done = 0;
  do {
    const size_t size = n - done < kRawBlockMax ? n - done : kRawBlockMax;
    const bool last = done + size == n;
    // Block_Header: Last_Block (bit 0), Block_Type 0 = Raw_Block (bits 1-2), Block_Size (bits 3-23).
    append_le(out, (uint64_t{size} << 3) | (last ? 1u : 0u), kBlockHeaderBytes);
    out.insert(out.end(), src + done, src + done + size);
    done += size;
  } while (done < n);
}

// Sets the cctx up for the planes of one chunk: content size declared, no
// zstd checksum (the chunk has its CRC-32C). Other levels are stock zstd;
// level 1 uses parameters tuned on the one plane of full-mantissa float32
// activations that compresses: byte 3, sign and 7 exponent bits. Stock level
// 1 spends its time on short matches that barely pay; with minMatch 7 nearly
// every byte becomes a Huffman-coded literal, which the fast strategy leaves
// uncompressed unless literal compression is forced on (negative levels turn
// it off). The candidates measured, and the whole chunk's sizes and speeds,
// are in docs/benchmarks.md ("zstd level-1 parameters").
void configure_cctx(ZSTD_CCtx* cctx, int level) {
  const auto stock = [&] {
    zstd_check(ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters), "reset");
    zstd_check(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level), "level");
    zstd_check(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1), "content size flag");
    zstd_check(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0), "checksum flag");
  };
  stock();
  if (level != 1) return;
  // ZSTD_c_literalCompressionMode is experimental (its enum value is only
  // promised for the libzstd it was compiled against): another major.minor
  // at run time, or a libzstd that refuses a parameter, keeps stock level 1.
  // The format does not depend on the parameters.
  const bool tuned = ZSTD_versionNumber() / 100 == ZSTD_VERSION_NUMBER / 100 &&
                     !ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_strategy, ZSTD_fast)) &&
                     !ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_hashLog, 8)) &&
                     !ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_minMatch, 7)) &&
                     !ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_targetLength, 512)) &&
                     // ZSTD_ps_enable (zstd >= 1.5.1; ZSTD_lcm_huffman before): Huffman literals.
                     !ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_literalCompressionMode, 1));
  if (!tuned) stock();
}

// Runs ZSTD_compressStream2 until `in` is consumed and the mode's flush is
// done (one call when dst has ZSTD_compressBound room, as here).
void zstd_stream(ZSTD_CCtx* cctx, ZSTD_outBuffer& dst, ZSTD_inBuffer& in, ZSTD_EndDirective mode) {
  size_t left = 0;
  do {
    left = ZSTD_compressStream2(cctx, &dst, &in, mode);
    zstd_check(left, "compress");
    if (left != 0 && dst.pos == dst.size) throw Error(ErrorCode::kInternal, "zstd compress: output bound exceeded");
  } while (left != 0 || in.pos < in.size);
}

// Encodes the n_planes byte planes of the shuffled chunk (raw bytes, plane k
// at shuffled + k * raw / n_planes) as one frame each into payload. Returns
// false (payload untouched) when the frames together are not smaller than raw.
// Compressed frames go through tc.compressed (they are small: the planes that
// do not compress well are raw frames, copied once from the shuffled chunk).
bool encode_plane_frames(ThreadCodec& tc, const uint8_t* shuffled, size_t raw, size_t n_planes, int level,
                         std::vector<uint8_t>& payload) {
  struct Frame {
    bool compressed = false;
    size_t offset = 0;  // in tc.compressed
    size_t size = 0;
  };
  std::array<Frame, kMaxPlanes> frames;
  const size_t len = raw / n_planes;
  const size_t bound = ZSTD_compressBound(len);
  zstd_check(bound, "bound");
  ZSTD_CCtx* cctx = tc.cctx();
  configure_cctx(cctx, level);
  uint8_t* cbuf = tc.compressed.get(bound * n_planes);
  size_t used = 0, total = 0;
  for (size_t k = 0; k < n_planes; ++k) {
    const uint8_t* src = shuffled + k * len;
    const size_t raw_frame = raw_frame_size(len);
    const size_t sample = len < kTrialBytes ? len : kTrialBytes;
    // The trial is the start of the plane's own frame: its first 128 KiB
    // compressed and flushed (a block boundary zstd puts there anyway), so a
    // plane that passes goes on from there instead of starting over.
    zstd_check(ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only), "reset");
    zstd_check(ZSTD_CCtx_setPledgedSrcSize(cctx, len), "pledged size");
    ZSTD_outBuffer dst = {cbuf + used, bound, 0};
    ZSTD_inBuffer in = {src, sample, 0};
    zstd_stream(cctx, dst, in, sample == len ? ZSTD_e_end : ZSTD_e_flush);
    size_t csize = dst.pos;
    bool compress = csize < sample && (sample - csize) * kTrialMinSaving >= sample;
    if (compress && sample < len) {
      in.size = len;
      zstd_stream(cctx, dst, in, ZSTD_e_end);
      csize = dst.pos;
    }
    compress = compress && csize < raw_frame;  // the rest of the plane may compress worse
    frames[k] = compress ? Frame{true, used, csize} : Frame{false, 0, raw_frame};
    if (compress) used += csize;
    total += frames[k].size;
  }
  if (total >= raw) return false;
  payload.clear();
  payload.reserve(total);
  for (size_t k = 0; k < n_planes; ++k) {
    if (frames[k].compressed)
      payload.insert(payload.end(), cbuf + frames[k].offset, cbuf + frames[k].offset + frames[k].size);
    else
      append_raw_frame(payload, shuffled + k * len, len);
  }
  return true;
}

}  // namespace

EncodedChunk encode_chunk(int64_t n_tokens, const int32_t* tokens, const PlaneList& planes, int zstd_level,
                          ChunkPrecision precision, const std::vector<ChunkHash>* skip_if) {
  const int64_t raw_size = planes_raw_size(planes, n_tokens) / 4 * precision_value_bytes(precision);
  check_planes(planes, n_tokens, tokens);
  const size_t raw = static_cast<size_t>(raw_size);

  ThreadCodec& tc = thread_codec();
  uint8_t* shuffled = tc.raw.get(raw);
  shuffle_planes(planes, n_tokens, shuffled, precision);

  EncodedChunk out;
  out.raw_size = raw_size;
  out.checksum = chunk_checksum(tokens, n_tokens, shuffled, raw);
  out.digest = content_digest(precision, tokens, n_tokens, shuffled, raw);
  out.skipped = skip_if && std::find(skip_if->begin(), skip_if->end(), out.digest) != skip_if->end();
  if (raw > 0 && !out.skipped)
    out.compressed = encode_plane_frames(tc, shuffled, raw, static_cast<size_t>(precision_value_bytes(precision)),
                                         zstd_level, out.payload);
  if (!out.compressed && !out.skipped) out.payload.assign(shuffled, shuffled + raw);
  tc.raw.trim();
  tc.compressed.trim();
  return out;
}

}  // namespace detail
}  // namespace colikv
