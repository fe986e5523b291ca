// Chain hashes, content digests and chunk keys (SHA-256), and the token
// lists they are computed over as the catalogs store them (JSON arrays).
#include <charconv>
#include <string>

#include "colikv/error.h"
#include "core/chunk_codec.h"
#include "core/sha256.h"

namespace colikv {
namespace detail {

namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

}  // namespace

bool key_matches(const ChunkHash& stored, const std::optional<ChunkHash>& digest, const ChunkHash& chain) {
  return stored == (digest ? chunk_key(chain, *digest) : chain);
}

ChunkHash chain_seed(const std::string& signature, const std::string& precision, const std::string& tenant) {
  static const char kDomain[] = "colikv chunk chain v1";
  const uint8_t nul = 0;
  Sha256 s;
  s.update(kDomain, sizeof kDomain - 1);
  s.update(&nul, 1);
  s.update(signature.data(), signature.size());
  s.update(&nul, 1);
  s.update(precision.data(), precision.size());
  // A precision name holds no NUL: the tenant's input never equals the default's.
  if (!tenant.empty()) {
    s.update(&nul, 1);
    s.update(tenant.data(), tenant.size());
  }
  return s.finish();
}

std::string tenant_anchor(const std::string& tenant) {
  if (tenant.empty()) return std::string();
  static const char kDomain[] = "colikv tenant anchor v1";
  const uint8_t nul = 0;
  Sha256 s;
  s.update(kDomain, sizeof kDomain - 1);
  s.update(&nul, 1);
  s.update(tenant.data(), tenant.size());
  const ChunkHash h = s.finish();
  return std::string(reinterpret_cast<const char*>(h.data()), h.size());
}

ChunkHash chain_next(const ChunkHash& prev, const int32_t* tokens, int64_t n) {
  if (n < 0) invalid("chunk chain: negative token count " + std::to_string(n));
  if (n > 0 && tokens == nullptr) invalid("chunk chain: null token array");
  Sha256 s;
  s.update(prev.data(), prev.size());
  s.update_tokens(tokens, n);
  return s.finish();
}

ChunkHash content_digest(ChunkPrecision precision, const int32_t* tokens, int64_t n, const uint8_t* raw,
                         size_t raw_size) {
  if (n < 0) invalid("content digest: negative token count " + std::to_string(n));
  Sha256 s;
  s.update_text("colikv chunk content v1");
  s.update_text(precision_name(precision));
  s.update_tokens(tokens, n);
  if (raw_size > 0) s.update(raw, raw_size);
  return s.finish();
}

ChunkHash chunk_key(const ChunkHash& chain, const ChunkHash& digest) {
  Sha256 s;
  s.update_text("colikv chunk key v1");
  s.update(chain.data(), chain.size());
  s.update(digest.data(), digest.size());
  return s.finish();
}

std::string hash_hex(const ChunkHash& h) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(64, '0');
  for (size_t i = 0; i < h.size(); ++i) {
    out[2 * i] = kDigits[h[i] >> 4];
    out[2 * i + 1] = kDigits[h[i] & 0x0f];
  }
  return out;
}

std::string tokens_to_json(const int32_t* tokens, int64_t n) {
  if (n < 0) invalid("tokens_to_json: negative token count " + std::to_string(n));
  if (n > 0 && tokens == nullptr) invalid("tokens_to_json: null token array");
  const size_t count = static_cast<size_t>(n);
  // "-2147483648" is 11 characters, plus one separator.
  std::string out(2 + 12 * count, '\0');
  char* p = &out[0];
  char* const end = p + out.size();
  *p++ = '[';
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) *p++ = ',';
    p = std::to_chars(p, end, tokens[i]).ptr;
  }
  *p++ = ']';
  out.resize(static_cast<size_t>(p - out.data()));
  return out;
}

bool parse_tokens_json(const char* text, size_t len, std::vector<int32_t>& out) {
  if (text == nullptr) return false;
  const char* p = text;
  const char* const end = text + len;
  const auto skip_ws = [&p, end] {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
  };
  const auto is_digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  out.clear();
  skip_ws();
  if (p == end || *p != '[') return false;
  ++p;
  skip_ws();
  if (p < end && *p == ']') {
    ++p;
    skip_ws();
    return p == end;
  }
  for (;;) {
    bool negative = false;
    if (p < end && *p == '-') {
      negative = true;
      ++p;
    }
    if (p == end || !is_digit(*p)) return false;
    // JSON forbids leading zeros; anything accepted here stays valid JSON.
    if (*p == '0' && p + 1 < end && is_digit(p[1])) return false;
    const char* const digits = p;
    uint64_t v = 0;
    while (p < end && is_digit(*p)) {
      if (p - digits >= 10) return false;  // more than 10 digits cannot be an int32
      v = v * 10 + static_cast<uint64_t>(*p - '0');
      ++p;
    }
    if (v > (negative ? uint64_t{2147483648u} : uint64_t{2147483647u})) return false;
    out.push_back(negative ? static_cast<int32_t>(-static_cast<int64_t>(v)) : static_cast<int32_t>(v));
    skip_ws();
    if (p == end) return false;
    if (*p == ',') {
      ++p;
      skip_ws();
      continue;
    }
    if (*p != ']') return false;
    ++p;
    skip_ws();
    return p == end;
  }
}

}  // namespace detail
}  // namespace colikv
