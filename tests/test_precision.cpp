// Opt-in bf16 precision: rounding, its error bound, and that f32 stays exact.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <sqlite3.h>

#include "core/chunk_codec.h"
#include "colikv/coli_kv.h"
#include "colikv/store.h"
#include "test_support.h"

using colikv::Options;
using colikv::Precision;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;
namespace detail = colikv::detail;

using colikv_test::bits_of;
using colikv_test::from_bits;

namespace {

// The documented bound: bf16 keeps 8 significant bits, |y - x| <= 2^-8 |x|.
constexpr double kBound = 1.0 / 256;

// Largest relative error of b against a over positions [0, n); -1 when a
// value that must stay exact (zero, inf, NaN) did not.
double max_relative_error(const EngineBuffers& a, const EngineBuffers& b, int64_t n) {
  double worst = 0;
  auto cmp = [&](const std::vector<float>& x, const std::vector<float>& y, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      const float u = x[static_cast<size_t>(i)], v = y[static_cast<size_t>(i)];
      if (std::isnan(u)) {
        if (!std::isnan(v)) worst = -1e9;
        continue;
      }
      if (u == 0 || std::isinf(u)) {
        if (bits_of(u) != bits_of(v)) worst = -1e9;
        continue;
      }
      worst = std::max(worst, std::fabs(static_cast<double>(v) - u) / std::fabs(static_cast<double>(u)));
    }
  };
  for (int l = 0; l < a.model.n_layers; ++l) {
    cmp(a.lc[static_cast<size_t>(l)], b.lc[static_cast<size_t>(l)], n * a.model.kv_lora);
    cmp(a.rc[static_cast<size_t>(l)], b.rc[static_cast<size_t>(l)], n * a.model.qk_rope);
  }
  return worst;
}

std::string query_text(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

}  // namespace

TEST_CASE("bf16 rounding is round-to-nearest-even with NaN and Inf kept", "[precision]") {
  // Exactly representable values are unchanged.
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 65536.0f})
    CHECK(detail::bf16_to_float(detail::float_to_bf16(f)) == f);
  // Ties go to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  CHECK(detail::float_to_bf16(from_bits(0x3f808000u)) == 0x3f80);
  CHECK(detail::float_to_bf16(from_bits(0x3f818000u)) == 0x3f82);  // odd below: rounds up
  CHECK(detail::float_to_bf16(from_bits(0x3f808001u)) == 0x3f81);  // above half: up
  CHECK(detail::float_to_bf16(from_bits(0x3f807fffu)) == 0x3f80);  // below half: down
  // Infinities stay infinities, NaN (even one whose payload is in the low bits) stays NaN.
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(detail::bf16_to_float(detail::float_to_bf16(inf)) == inf);
  CHECK(detail::bf16_to_float(detail::float_to_bf16(-inf)) == -inf);
  CHECK(std::isnan(detail::bf16_to_float(detail::float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(detail::bf16_to_float(detail::float_to_bf16(from_bits(0x7f800001u)))));
  CHECK(std::isnan(detail::bf16_to_float(detail::float_to_bf16(from_bits(0xff800001u)))));
  // The largest finite floats overflow to infinity, as documented.
  CHECK(std::isinf(detail::bf16_to_float(detail::float_to_bf16(std::numeric_limits<float>::max()))));
}

TEST_CASE("bf16 relative error is at most 2^-8 for normal values, exhaustively by exponent", "[precision]") {
  // Every mantissa pattern of a few exponents, through the codec's vector and
  // scalar paths (an odd count leaves a scalar tail).
  for (uint32_t exponent : {1u, 100u, 127u, 200u, 254u}) {
    std::vector<float> in;
    for (uint32_t m = 0; m < (1u << 23); m += 7) in.push_back(from_bits((exponent << 23) | m));
    in.push_back(from_bits((exponent << 23) | 0x7fffffu));
    const int64_t n = static_cast<int64_t>(in.size());
    detail::PlaneList planes{{in.data(), 1, 1}};
    std::vector<int32_t> tokens(static_cast<size_t>(n), 0);
    detail::EncodedChunk e = detail::encode_chunk(n, tokens.data(), planes, 1, detail::ChunkPrecision::kBf16);
    CHECK(e.raw_size == 2 * n);
    std::vector<float> out(in.size());
    detail::PlaneList dst{{out.data(), 1, 1}};
    detail::decode_chunk(e.payload.data(), e.payload.size(), e.compressed, e.raw_size, e.checksum, n, tokens.data(), dst,
                         detail::ChunkPrecision::kBf16);
    double worst = 0;
    bool all_scalar_equal = true;
    for (size_t i = 0; i < in.size(); ++i) {
      const float expect = detail::bf16_to_float(detail::float_to_bf16(in[i]));
      all_scalar_equal = all_scalar_equal && bits_of(expect) == bits_of(out[i]);
      if (std::isinf(out[i])) continue;  // overflow at the top of exponent 254, documented
      worst = std::max(worst, std::fabs(static_cast<double>(out[i]) - in[i]) / std::fabs(static_cast<double>(in[i])));
    }
    CHECK(all_scalar_equal);  // SIMD and scalar rounding agree
    CHECK(worst <= kBound);
    CHECK(worst > kBound * 0.99);  // the bound is tight: it is not a loose one
  }
}

TEST_CASE("bf16 conversations store half the bytes within the bound, f32 stays bit-exact", "[precision]") {
  TempDir dir;
  const colikv::ModelSignature m = colikv_test::tiny_model();
  const int64_t n = 300;
  EngineBuffers src(m, n), back(m, n);
  src.fill(0, n, 7);
  // Special values must survive: zero, infinities, NaN.
  src.lc[0][0] = 0.0f;
  src.lc[0][1] = std::numeric_limits<float>::infinity();
  src.lc[0][2] = -std::numeric_limits<float>::infinity();
  src.lc[0][3] = std::numeric_limits<float>::quiet_NaN();
  const std::string path = dir.file("p.db");
  {
    Store exact(path);  // default: f32
    CHECK(exact.options().new_conversation_precision == Precision::kF32);
    exact.append("f", m, src.tokens.data(), n / 2, src.source());
    exact.append("f", m, src.tokens.data(), 2 * n / 3, src.source());
    back.poison();
    REQUIRE(exact.load("f", m, back.tokens.data(), n, back.target()) == 2 * n / 3);
    CHECK(src.compare(back, 2 * n / 3).empty());
    CHECK(exact.info("f").precision == "f32");
  }
  Options o;
  o.new_conversation_precision = Precision::kBf16;
  {
    Store lossy(path, o);
    lossy.append("b", m, src.tokens.data(), n / 3, src.source());
    lossy.append("b", m, src.tokens.data(), n, src.source());
    // An existing conversation keeps its precision even through a bf16 store.
    lossy.append("f", m, src.tokens.data(), n, src.source());
    back.poison();
    REQUIRE(lossy.load("b", m, back.tokens.data(), n, back.target()) == n);
    CHECK(std::memcmp(back.tokens.data(), src.tokens.data(), n * 4) == 0);
    const double err = max_relative_error(src, back, n);
    CHECK(err >= 0);
    CHECK(err <= kBound);
    CHECK(err > 0);  // full-mantissa values did lose bits: it is really bf16
    CHECK(lossy.info("b").precision == "bf16");
    CHECK(lossy.info("f").precision == "f32");
    back.poison();
    REQUIRE(lossy.load("f", m, back.tokens.data(), n, back.target()) == n);
    CHECK(src.compare(back, n).empty());
    // Raw payload is 2 bytes a value; stored is well under the f32 one.
    const colikv::ConversationInfo fb = lossy.info("b"), ff = lossy.info("f");
    CHECK(fb.stored_bytes < ff.stored_bytes * 6 / 10);

    // Truncate and fork inside a chunk re-encode bf16 as bf16, unchanged.
    EngineBuffers first(m, n);
    REQUIRE(lossy.load("b", m, first.tokens.data(), n, first.target()) == n);
    lossy.fork("b", "b2", n - 5);
    lossy.truncate("b", n - 11);
    back.poison();
    REQUIRE(lossy.load("b2", m, back.tokens.data(), n, back.target()) == n - 5);
    CHECK(first.compare(back, n - 5).empty());
    CHECK(lossy.info("b2").precision == "bf16");
    back.poison();
    REQUIRE(lossy.load("b", m, back.tokens.data(), n, back.target()) == n - 11);
    CHECK(first.compare(back, n - 11).empty());
    CHECK(lossy.verify().ok());
  }
  // The shell sees the precision of conversations and chunks.
  CHECK(query_text(path, "SELECT precision FROM conversations WHERE name = 'b'") == "bf16");
  CHECK(query_text(path, "SELECT group_concat(DISTINCT ch.precision) FROM chunks ch JOIN conversation_chunks cc "
                         "USING (chunk_id) JOIN conversations c USING (conversation_id) WHERE c.name = 'b'") == "bf16");
  // bf16 chunks are never shared with f32 ones: the hash chain includes the precision.
  CHECK(query_text(path, "SELECT count(*) FROM chunks ch JOIN conversation_chunks a USING (chunk_id) "
                         "JOIN conversation_chunks b USING (chunk_id) WHERE a.conversation_id = "
                         "(SELECT conversation_id FROM conversations WHERE name = 'f') AND b.conversation_id = "
                         "(SELECT conversation_id FROM conversations WHERE name = 'b')") == "0");
}

TEST_CASE("bf16-origin values are stored exactly in bf16", "[precision]") {
  TempDir dir;
  const colikv::ModelSignature m = colikv_test::tiny_model();
  const int64_t n = 64;
  EngineBuffers src(m, n), back(m, n);
  src.fill(0, n, 3);
  for (auto* planes : {&src.lc, &src.rc})
    for (auto& plane : *planes)
      for (float& f : plane) f = detail::bf16_to_float(detail::float_to_bf16(f));
  Options o;
  o.new_conversation_precision = Precision::kBf16;
  Store s(dir.file("o.db"), o);
  s.append("c", m, src.tokens.data(), n, src.source());
  back.poison();
  REQUIRE(s.load("c", m, back.tokens.data(), n, back.target()) == n);
  CHECK(src.compare(back, n).empty());
}

TEST_CASE("f32 import/export stays byte for byte, bf16 import is lossy only when asked", "[precision]") {
  TempDir dir;
  const std::string sample = std::string(COLIKV_SAMPLE_DIR) + "/glm_tiny_nodsa_51.coli_kv";
  {
    Store s(dir.file("f.db"));
    colikv::import_coli_kv(s, sample);
    colikv::export_coli_kv(s, "glm_tiny_nodsa_51", dir.file("out.coli_kv"));
  }
  auto read_all = [](const std::string& p) {
    std::vector<char> v;
    FILE* f = std::fopen(p.c_str(), "rb");
    if (!f) return v;
    char b[4096];
    size_t k;
    while ((k = std::fread(b, 1, sizeof b, f)) > 0) v.insert(v.end(), b, b + k);
    std::fclose(f);
    return v;
  };
  CHECK(read_all(sample) == read_all(dir.file("out.coli_kv")));
  Options o;
  o.new_conversation_precision = Precision::kBf16;
  {
    Store s(dir.file("b.db"), o);
    colikv::import_coli_kv(s, sample);
    CHECK(s.info("glm_tiny_nodsa_51").precision == "bf16");
    colikv::export_coli_kv(s, "glm_tiny_nodsa_51", dir.file("outb.coli_kv"));
  }
  const std::vector<char> a = read_all(sample), b = read_all(dir.file("outb.coli_kv"));
  REQUIRE(a.size() == b.size());
  CHECK(a != b);
  // Every value within the bound, every token and the header exact.
  REQUIRE(std::memcmp(a.data(), b.data(), 40) == 0);
  const size_t rec = 4 + 5 * 40 * 4;
  double worst = 0;
  for (size_t off = 40; off + rec <= a.size(); off += rec) {
    CHECK(std::memcmp(a.data() + off, b.data() + off, 4) == 0);
    for (size_t k = off + 4; k < off + rec; k += 4) {
      float x, y;
      std::memcpy(&x, a.data() + k, 4);
      std::memcpy(&y, b.data() + k, 4);
      if (x != 0) worst = std::max(worst, std::fabs(static_cast<double>(y) - x) / std::fabs(static_cast<double>(x)));
    }
  }
  CHECK(worst <= kBound);
  CHECK(worst > 0);
}
