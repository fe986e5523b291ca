// Chunk payload codec: zstd frames over the byte-shuffled planes
// (byte_shuffle.cpp), and the checksum. Chain hashes, digests and token
// lists are in chunk_hash.cpp.
#include "core/chunk_codec.h"

// For ZSTD_c_literalCompressionMode (the level-1 plane parameters); the
// library is still called only through its stable entry points.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>

#include "colikv/error.h"
#include "core/crc32c.h"
#include "core/byte_order.h"
#include "core/byte_shuffle.h"
#include "core/sha256.h"

namespace colikv {
namespace detail {

namespace {

// A thread's scratch buffers are released after use when they grew past this,
// so one huge chunk does not pin memory in every worker thread forever.
constexpr size_t kScratchKeepBytes = size_t{64} << 20;

[[noreturn]] void corrupt(const std::string& message) {
  throw Error(ErrorCode::kCorrupt, message);
}

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(v));
  return buf;
}

inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

// CRC of the token ids as int32 little-endian.
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

uint32_t chunk_checksum(const int32_t* tokens, int64_t n_tokens, const uint8_t* raw, size_t raw_size) {
  return crc32c(crc32c_tokens(0, tokens, n_tokens), raw, raw_size);
}

// The whole chunk is one shuffle: stream k holds byte k of every float of
// every plane, planes in order. Per-plane streams are too short at real chunk
// sizes (a zstd block then mixes mantissa and exponent bytes): they compress
// worse than one shuffle per chunk on full-mantissa activations
// (docs/benchmarks.md, "Figures moved out of code comments").
size_t chunk_floats(const PlaneList& planes, size_t n) {
  size_t total = 0;
  for (const PlaneRef& p : planes) total += static_cast<size_t>(p.width) * n;
  return total;
}

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

// The raw payload as consecutive pieces: the blocks of a raw frame where they
// lie in the payload (copying them out first was a tenth of a load's CPU),
// anything else decompressed into the thread's buffer.
struct Piece {
  const uint8_t* data;
  size_t size;
};
using Pieces = std::vector<Piece>;

// Reads one byte stream of the raw payload from its start, piece by piece.
class StreamCursor {
 public:
  StreamCursor() = default;
  StreamCursor(const Pieces& pieces, size_t start) : pieces_(&pieces) { advance(start); }
  const uint8_t* data() const { return (*pieces_)[i_].data + off_; }
  size_t left_in_piece() const { return i_ < pieces_->size() ? (*pieces_)[i_].size - off_ : 0; }
  void advance(size_t n) {
    off_ += n;
    while (i_ < pieces_->size() && off_ >= (*pieces_)[i_].size) {
      off_ -= (*pieces_)[i_].size;
      ++i_;
    }
  }

 private:
  const Pieces* pieces_ = nullptr;
  size_t i_ = 0, off_ = 0;
};

// Float i of the chunk (through the planes in order) is byte i of each of the
// value's byte streams; stream k starts at byte k * total of the raw payload.
void unshuffle_planes(const Pieces& raw, const PlaneList& planes, int64_t n_tokens, ChunkPrecision precision) {
  const size_t n = static_cast<size_t>(n_tokens);
  const size_t total = chunk_floats(planes, n);
  const auto kernel = precision == ChunkPrecision::kBf16 ? unshuffle_bf16 : unshuffle_floats;
  const size_t n_streams = static_cast<size_t>(precision_value_bytes(precision));
  std::array<StreamCursor, 4> cursor;
  for (size_t k = 0; k < n_streams; ++k) cursor[k] = StreamCursor(raw, k * total);
  // Writes the next `count` floats to dst, a run at a time within every
  // stream's current piece.
  const auto next_floats = [&](size_t count, float* dst) {
    while (count > 0) {
      size_t run = count;
      std::array<const uint8_t*, 4> src{};
      for (size_t k = 0; k < n_streams; ++k) run = std::min(run, cursor[k].left_in_piece());
      if (run == 0) throw Error(ErrorCode::kInternal, "chunk codec: raw payload pieces end early");
      for (size_t k = 0; k < n_streams; ++k) {
        src[k] = cursor[k].data();
        cursor[k].advance(run);
      }
      kernel(src.data(), run, dst);
      dst += run;
      count -= run;
    }
  };
  for (const PlaneRef& p : planes) {
    const size_t width = static_cast<size_t>(p.width);
    if (width == 0 || n == 0) continue;
    if (p.stride == p.width) {
      next_floats(width * n, p.base);
    } else {
      const size_t stride = static_cast<size_t>(p.stride);
      for (size_t i = 0; i < n; ++i) next_floats(width, p.base + i * stride);
    }
  }
}

// The caller's plane descriptors (not the stored data) are wrong: a bug.
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

// ---------------------------------------------------------------- per-thread state

class Scratch {
 public:
  uint8_t* get(size_t n) {
    if (n > cap_) {
      data_.reset();
      data_.reset(new uint8_t[n]);  // not value-initialized: it is overwritten
      cap_ = n;
    }
    return data_.get();
  }
  uint8_t* data() { return data_.get(); }
  void trim() {
    if (cap_ > kScratchKeepBytes) {
      data_.reset();
      cap_ = 0;
    }
  }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t cap_ = 0;
};

class ThreadCodec {
 public:
  ThreadCodec() = default;
  ThreadCodec(const ThreadCodec&) = delete;
  ThreadCodec& operator=(const ThreadCodec&) = delete;
  ~ThreadCodec() {
    ZSTD_freeCCtx(cctx_);
    ZSTD_freeDCtx(dctx_);
  }
  ZSTD_CCtx* cctx() {
    if (cctx_ == nullptr && (cctx_ = ZSTD_createCCtx()) == nullptr) throw std::bad_alloc();
    return cctx_;
  }
  ZSTD_DCtx* dctx() {
    if (dctx_ == nullptr && (dctx_ = ZSTD_createDCtx()) == nullptr) throw std::bad_alloc();
    return dctx_;
  }
  Scratch raw;         // shuffled payload (encode) or decompressed payload (decode)
  Scratch compressed;  // zstd output before it is copied into the exact-size blob

 private:
  ZSTD_CCtx* cctx_ = nullptr;
  ZSTD_DCtx* dctx_ = nullptr;
};

ThreadCodec& thread_codec() {
  thread_local ThreadCodec codec;
  return codec;
}

void zstd_check(size_t rc, const char* what) {
  if (ZSTD_isError(rc)) throw Error(ErrorCode::kInternal, std::string("zstd ") + what + ": " + ZSTD_getErrorName(rc));
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

std::string frame_at(size_t k, size_t offset) {
  return "zstd frame " + std::to_string(k) + " at byte " + std::to_string(offset);
}

struct FrameSpan {
  size_t pos, size, content;
};

// Walks the frame headers of a payload of one or more zstd frames that must
// hold exactly raw bytes: every frame must declare its content size, the
// sizes must add up to raw, and nothing may follow the last frame. Throws
// kCorrupt naming the frame (k, counted from 0) and its byte offset.
std::vector<FrameSpan> frame_spans(const uint8_t* payload, size_t payload_size, size_t raw) {
  if (payload_size < 4 || load_le32(payload) != ZSTD_MAGICNUMBER)
    corrupt("payload of " + std::to_string(payload_size) + " bytes is not a zstd frame");
  // Checks the frame k at pos (whose content may take at most `room` bytes):
  // its content size, then its compressed size.
  const auto frame = [&](size_t k, size_t pos, size_t room, size_t& content) -> size_t {
    const uint8_t* f = payload + pos;
    const size_t left = payload_size - pos;
    if (left < 4 || load_le32(f) != ZSTD_MAGICNUMBER)
      corrupt(frame_at(k, pos) + ": not a zstd frame (" + std::to_string(left) + " bytes after frame " +
              std::to_string(k - 1) + ")");
    const unsigned long long c = ZSTD_getFrameContentSize(f, left);
    if (c == ZSTD_CONTENTSIZE_ERROR) corrupt(frame_at(k, pos) + ": header is malformed or truncated");
    if (c == ZSTD_CONTENTSIZE_UNKNOWN)
      corrupt(frame_at(k, pos) + " does not declare its content size, expected " + std::to_string(raw) +
              " bytes in all");
    if (c > room)
      corrupt(frame_at(k, pos) + " declares " + std::to_string(c) + " bytes, " +
              (k == 0 ? "expected " + std::to_string(raw)
                      : "more than the " + std::to_string(room) + " left of the expected " + std::to_string(raw)));
    const size_t size = ZSTD_findFrameCompressedSize(f, left);
    if (ZSTD_isError(size)) corrupt(frame_at(k, pos) + ": zstd: " + ZSTD_getErrorName(size));
    content = static_cast<size_t>(c);
    return size;
  };
  // The frame headers alone (cheap: block headers are 128 KiB apart).
  std::vector<FrameSpan> frames;  // one per byte plane, or one for a chunk written before plane frames
  size_t pos = 0, declared = 0;
  do {
    const size_t k = frames.size();
    size_t content = 0;
    const size_t size = frame(k, pos, raw - declared, content);
    frames.push_back({pos, size, content});
    pos += size;
    declared += content;
    if (declared == raw && pos < payload_size)
      corrupt("payload has " + std::to_string(payload_size - pos) + " bytes after its last zstd frame (" +
              frame_at(k, frames.back().pos) + " ends at byte " + std::to_string(pos) + ")");
  } while (pos < payload_size);
  if (declared != raw)
    corrupt("zstd frames declare " + std::to_string(declared) + " bytes in all, expected " + std::to_string(raw) +
            " (" + std::to_string(frames.size()) + " frame" + (frames.size() == 1 ? "" : "s") + ")");
  return frames;
}

// The Raw_Blocks of a frame as written for an incompressible stream
// (docs/format.md: single segment, no checksum, no dictionary), appended to
// out; false, with out as it was, for any other frame (zstd decodes it).
bool raw_frame_pieces(const uint8_t* f, const FrameSpan& span, Pieces& out) {
  constexpr size_t kMaxBlock = size_t{128} << 10;
  if (span.size < 5) return false;
  const uint8_t fhd = f[4];
  const unsigned fcs_flag = fhd >> 6, single_segment = (fhd >> 5) & 1u;
  if (!single_segment || (fhd & 0x0fu) != 0) return false;  // reserved, checksum and dictionary bits clear
  size_t pos = 5 + (fcs_flag == 0 ? 1 : size_t{1} << fcs_flag);
  const size_t first = out.size();
  size_t got = 0;
  bool last = false;
  while (!last && pos + 3 <= span.size) {
    const uint32_t h = uint32_t{f[pos]} | (uint32_t{f[pos + 1]} << 8) | (uint32_t{f[pos + 2]} << 16);
    const size_t block = h >> 3;
    last = (h & 1u) != 0;
    pos += 3;
    if (((h >> 1) & 3u) != 0 || block > kMaxBlock || block > span.size - pos) break;
    if (block > 0) out.push_back({f + pos, block});
    pos += block;
    got += block;
  }
  if (last && pos == span.size && got == span.content) return true;
  out.resize(first);
  return false;
}

// The raw payload of a zstd payload as pieces: raw frames where they lie,
// the others decompressed into their place in the thread's buffer, their
// capacity bounded by what is left of raw whatever their header says.
Pieces frame_pieces(ThreadCodec& tc, const uint8_t* payload, size_t payload_size, size_t raw) {
  const std::vector<FrameSpan> frames = frame_spans(payload, payload_size, raw);
  Pieces pieces;
  uint8_t* dst = nullptr;
  size_t out = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const FrameSpan& f = frames[i];
    if (!raw_frame_pieces(payload + f.pos, f, pieces)) {
      if (dst == nullptr) dst = tc.raw.get(raw);
      const size_t got = ZSTD_decompressDCtx(tc.dctx(), dst + out, raw - out, payload + f.pos, f.size);
      if (ZSTD_isError(got)) corrupt(frame_at(i, f.pos) + ": zstd: " + ZSTD_getErrorName(got));
      if (got != f.content)
        corrupt(frame_at(i, f.pos) + " decompressed to " + std::to_string(got) + " bytes, declares " +
                std::to_string(f.content));
      if (got > 0) pieces.push_back({dst + out, got});
    }
    out += f.content;
  }
  return pieces;
}

// The whole raw payload in one buffer (for the content digest).
const uint8_t* contiguous(ThreadCodec& tc, const Pieces& pieces, size_t raw) {
  if (pieces.size() == 1) return pieces[0].data;
  uint8_t* buf = tc.raw.get(raw);
  size_t out = 0;
  for (const Piece& p : pieces) {
    if (p.data != buf + out) std::memmove(buf + out, p.data, p.size);
    out += p.size;
  }
  return buf;
}

}  // namespace

// ---------------------------------------------------------------- public

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

void decode_chunk(const uint8_t* payload, size_t payload_size, bool compressed, int64_t raw_size, uint32_t checksum,
                  int64_t n_tokens, const int32_t* tokens, const PlaneList& planes, ChunkPrecision precision,
                  ChunkHash* digest) {
  const int64_t expected = planes_raw_size(planes, n_tokens) / 4 * precision_value_bytes(precision);
  check_planes(planes, n_tokens, tokens);
  if (raw_size != expected)
    corrupt("raw size is " + std::to_string(raw_size) + " bytes, expected " + std::to_string(expected) + " (" +
            precision_name(precision) + ")");
  const size_t raw = static_cast<size_t>(expected);
  if (payload == nullptr && payload_size > 0) invalid("chunk codec: null payload of " + std::to_string(payload_size) + " bytes");

  ThreadCodec& tc = thread_codec();
  Pieces pieces;
  if (!compressed) {
    if (payload_size != raw)
      corrupt("payload is " + std::to_string(payload_size) + " bytes, expected " + std::to_string(raw) +
              " (stored uncompressed)");
    if (raw > 0) pieces.push_back({payload, raw});
  } else {
    pieces = frame_pieces(tc, payload, payload_size, raw);
  }
  uint32_t computed = crc32c_tokens(0, tokens, n_tokens);
  for (const Piece& p : pieces) computed = crc32c(computed, p.data, p.size);
  if (computed != checksum) corrupt("checksum mismatch: stored " + hex32(checksum) + ", computed " + hex32(computed));
  if (digest) *digest = content_digest(precision, tokens, n_tokens, raw > 0 ? contiguous(tc, pieces, raw) : nullptr, raw);
  unshuffle_planes(pieces, planes, n_tokens, precision);
  tc.raw.trim();
}

}  // namespace detail
}  // namespace colikv
