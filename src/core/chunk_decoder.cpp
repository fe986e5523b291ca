// Chunk decoder: a payload's zstd frames checked against the sizes it must
// hold, decompressed (raw frames read in place), the byte planes
// unshuffled into the caller's planes, and the checksum verified.
#include "core/chunk_codec.h"

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

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(v));
  return buf;
}

inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
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
