// What the chunk encoder (chunk_encoder.cpp) and decoder (chunk_decoder.cpp)
// share: a thread's zstd contexts and scratch buffers, reused across chunks
// as zstd.h advises, and the checks and sums both sides compute. Not
// installed; included by the codec's own files only.
#ifndef COLIKV_SRC_CORE_CHUNK_CODEC_INTERNAL_H
#define COLIKV_SRC_CORE_CHUNK_CODEC_INTERNAL_H

#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "colikv/error.h"
#include "core/chunk_codec.h"

namespace colikv {
namespace detail {
namespace codec {

// A thread's scratch buffers are released after use when they grew past this,
// so one huge chunk does not pin memory in every worker thread forever.
constexpr size_t kScratchKeepBytes = size_t{64} << 20;

[[noreturn]] inline void corrupt(const std::string& message) {
  throw Error(ErrorCode::kCorrupt, message);
}

[[noreturn]] inline void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

// CRC of the token ids as int32 little-endian.
uint32_t crc32c_tokens(uint32_t crc, const int32_t* tokens, int64_t n);

// Floats in a chunk of n tokens over the planes.
size_t chunk_floats(const PlaneList& planes, size_t n);

// The caller's plane descriptors (not the stored data) are wrong: a bug.
void check_planes(const PlaneList& planes, int64_t n_tokens, const int32_t* tokens);

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

// This thread's contexts and buffers.
ThreadCodec& thread_codec();

// Throws kInternal for a zstd error code.
void zstd_check(size_t rc, const char* what);

}  // namespace codec
}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_CHUNK_CODEC_INTERNAL_H
