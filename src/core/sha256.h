// SHA-256 (FIPS 180-4): chunk chain hashes, content digests and chunk keys
// (docs/format.md).
#ifndef COLIKV_SRC_CORE_SHA256_H
#define COLIKV_SRC_CORE_SHA256_H

#include <array>
#include <cstddef>
#include <cstdint>

namespace colikv {
namespace detail {

using Sha256Digest = std::array<uint8_t, 32>;

// An incremental SHA-256. Uses the x86 SHA extensions when the CPU has them.
class Sha256 {
 public:
  enum class Path { kBest, kPortable };  // kPortable: never the SHA extensions (for the tests)
  explicit Sha256(Path path = Path::kBest);

  void update(const void* data, size_t n);
  // Token ids as int32 little-endian.
  void update_tokens(const int32_t* tokens, int64_t n);
  // A text and its terminating NUL: domain strings and names cannot run into
  // what follows them.
  void update_text(const char* text);
  // The digest; the object is spent afterwards.
  Sha256Digest finish();

  using Blocks = void (*)(uint32_t state[8], const uint8_t* p, size_t blocks);

 private:
  Blocks blocks_;
  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t buf_[64] = {};
  size_t fill_ = 0;
  uint64_t total_ = 0;
};

// One-shot digests; sha256_portable never uses the SHA extensions.
Sha256Digest sha256(const void* data, size_t n);
Sha256Digest sha256_portable(const void* data, size_t n);
// Whether sha256() uses the SHA extensions on this CPU.
bool sha256_hardware_available();

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_SHA256_H
