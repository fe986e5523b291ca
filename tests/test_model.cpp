// ModelSignature: validation of shapes, sizes, canonical text form, equality.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>

#include "colikv/error.h"
#include "colikv/model.h"
#include "test_support.h"

using colikv::Error;
using colikv::ErrorCode;
using colikv::ModelSignature;

namespace {

ModelSignature glm_shape() {
  ModelSignature m;
  m.n_layers = 78; m.kv_lora = 512; m.qk_rope = 64; m.index_hd = 0; m.n_indexed = 0; m.vocab = 154880;
  return m;
}

// True when msg names `field` as the subject of the complaint: an occurrence
// not followed by '=' (which would only be the signature's text form quoted
// inside the message) and not part of a longer identifier.
bool names_field(const std::string& msg, const std::string& field) {
  auto ident = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; };
  for (size_t at = msg.find(field); at != std::string::npos; at = msg.find(field, at + 1)) {
    size_t end = at + field.size();
    bool left_ok = at == 0 || !ident(msg[at - 1]);
    bool right_ok = end == msg.size() || (!ident(msg[end]) && msg[end] != '=');
    if (left_ok && right_ok) return true;
  }
  return false;
}

// Runs validate(); returns the message of the kInvalidArgument it must throw
// ("" and a failed check when it does not).
std::string rejection(const ModelSignature& m) {
  try {
    m.validate();
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    std::string msg = e.what();
    CHECK(!msg.empty());
    return msg;
  }
  FAIL_CHECK("validate() accepted " << m.to_string());
  return "";
}

}  // namespace

TEST_CASE("model: valid shapes pass validation", "[model]") {
  CHECK_NOTHROW(glm_shape().validate());
  CHECK_NOTHROW(colikv_test::tiny_model().validate());
  CHECK_NOTHROW(colikv_test::tiny_indexed_model().validate());
  CHECK_NOTHROW(colikv_test::sample_model().validate());
  ModelSignature one;
  one.n_layers = 1; one.kv_lora = 1; one.qk_rope = 1; one.vocab = 1;
  CHECK_NOTHROW(one.validate());
  one.index_hd = 1; one.n_indexed = 1;  // every layer indexed
  CHECK_NOTHROW(one.validate());
  ModelSignature w = glm_shape();
  w.weights_id = "glm-4.7 q8_0 sha256:0123abcd";
  CHECK_NOTHROW(w.validate());
}

TEST_CASE("model: each invalid shape is rejected naming the field", "[model]") {
  const ModelSignature base = colikv_test::tiny_indexed_model();

  SECTION("n_layers <= 0") {
    for (int32_t v : {0, -1, std::numeric_limits<int32_t>::min()}) {
      ModelSignature m = base;
      m.n_layers = v;
      m.n_indexed = 0; m.index_hd = 0;  // keep the indexer fields consistent
      std::string msg = rejection(m);
      INFO(msg);
      CHECK(names_field(msg, "n_layers"));
    }
  }
  SECTION("kv_lora <= 0") {
    for (int32_t v : {0, -16}) {
      ModelSignature m = base;
      m.kv_lora = v;
      std::string msg = rejection(m);
      INFO(msg);
      CHECK(names_field(msg, "kv_lora"));
    }
  }
  SECTION("qk_rope <= 0") {
    for (int32_t v : {0, -8}) {
      ModelSignature m = base;
      m.qk_rope = v;
      std::string msg = rejection(m);
      INFO(msg);
      CHECK(names_field(msg, "qk_rope"));
    }
  }
  SECTION("vocab <= 0") {
    for (int32_t v : {0, -1000}) {
      ModelSignature m = base;
      m.vocab = v;
      std::string msg = rejection(m);
      INFO(msg);
      CHECK(names_field(msg, "vocab"));
    }
  }
  SECTION("negative indexer fields") {
    ModelSignature m = base;
    m.index_hd = -8;
    std::string msg = rejection(m);
    INFO(msg);
    CHECK(names_field(msg, "index_hd"));
    m = base;
    m.n_indexed = -2;
    msg = rejection(m);
    INFO(msg);
    CHECK(names_field(msg, "n_indexed"));
  }
  SECTION("index_hd without indexed layers") {
    ModelSignature m = base;
    m.n_indexed = 0;  // index_hd stays 8
    std::string msg = rejection(m);
    INFO(msg);
    CHECK((names_field(msg, "n_indexed") || names_field(msg, "index_hd")));
  }
  SECTION("indexed layers without index_hd") {
    ModelSignature m = base;
    m.index_hd = 0;  // n_indexed stays 2
    std::string msg = rejection(m);
    INFO(msg);
    CHECK((names_field(msg, "index_hd") || names_field(msg, "n_indexed")));
  }
  SECTION("n_indexed > n_layers") {
    ModelSignature m = base;
    m.n_indexed = m.n_layers + 1;
    std::string msg = rejection(m);
    INFO(msg);
    CHECK(names_field(msg, "n_indexed"));
  }
  SECTION("record over 1 GiB") {
    ModelSignature m = base;
    m.n_indexed = 0; m.index_hd = 0;
    m.n_layers = 1 << 24; m.kv_lora = 32; m.qk_rope = 32;  // 2^30 floats: 4 GiB per record
    std::string msg = rejection(m);
    INFO(msg);
    CHECK((names_field(msg, "n_layers") || names_field(msg, "kv_lora") || names_field(msg, "qk_rope") ||
           msg.find("record") != std::string::npos));
  }
  SECTION("record just over 1 GiB; exactly 1 GiB is allowed") {
    ModelSignature m;
    m.n_layers = 1; m.qk_rope = 1; m.vocab = 10;
    m.kv_lora = (1 << 28) - 2;  // 2^28 - 1 floats: 4 + 4 * (2^28 - 1) == 2^30 bytes
    CHECK(m.record_bytes() == (int64_t{1} << 30));
    CHECK_NOTHROW(m.validate());
    m.kv_lora = (1 << 28) - 1;  // 2^30 + 4 bytes
    rejection(m);
    m.kv_lora = (1 << 28) - 2;
    m.index_hd = 1; m.n_indexed = 1;  // the indexer pushes it over
    rejection(m);
  }
  SECTION("sizes whose record size overflows 64 bits") {
    // n_layers * (kv_lora + qk_rope) alone is just under 2^63 floats; times 4
    // bytes (and plus the indexer) it wraps around if computed naively.
    const int32_t big = std::numeric_limits<int32_t>::max();
    ModelSignature m;
    m.n_layers = big; m.kv_lora = big; m.qk_rope = big; m.vocab = 1;
    rejection(m);
    m.index_hd = big; m.n_indexed = big;
    rejection(m);
    ModelSignature w;  // only the indexer is huge
    w.n_layers = big; w.kv_lora = 1; w.qk_rope = 1; w.vocab = 1; w.index_hd = big; w.n_indexed = big;
    rejection(w);
  }
}

TEST_CASE("model: sizes", "[model]") {
  ModelSignature m = glm_shape();
  CHECK(m.floats_per_token() == 78 * (512 + 64));
  CHECK(m.record_bytes() == 179716);
  m.weights_id = "anything";  // the identity does not change the size
  CHECK(m.record_bytes() == 179716);

  ModelSignature t = colikv_test::tiny_model();
  CHECK(t.floats_per_token() == 3 * 24);
  CHECK(t.record_bytes() == 4 + 4 * 72);
  ModelSignature ti = colikv_test::tiny_indexed_model();
  CHECK(ti.floats_per_token() == 4 * 24 + 2 * 8);
  CHECK(ti.record_bytes() == 4 + 4 * 112);
}

TEST_CASE("model: canonical text and equality", "[model]") {
  ModelSignature m = glm_shape();
  CHECK(m.to_string() == "n_layers=78 kv_lora=512 qk_rope=64 index_hd=0 n_indexed=0 vocab=154880");
  CHECK(m.to_string().find("weights") == std::string::npos);
  ModelSignature w = m;
  w.weights_id = "glm-q8";
  CHECK(w.to_string() == "n_layers=78 kv_lora=512 qk_rope=64 index_hd=0 n_indexed=0 vocab=154880 weights=glm-q8");

  CHECK(m == glm_shape());
  CHECK_FALSE(m != glm_shape());
  CHECK(m != w);  // the weights identity is part of the signature
  CHECK_FALSE(m == w);
  ModelSignature w2 = w;
  w2.weights_id = "glm-q4";
  CHECK(w != w2);
  CHECK(w.to_string() != w2.to_string());

  // Every shape field takes part in equality and in the text.
  const ModelSignature base = colikv_test::tiny_indexed_model();
  int32_t ModelSignature::*fields[] = {&ModelSignature::n_layers, &ModelSignature::kv_lora, &ModelSignature::qk_rope,
                                       &ModelSignature::index_hd, &ModelSignature::n_indexed, &ModelSignature::vocab};
  for (auto f : fields) {
    ModelSignature other = base;
    other.*f += 1;
    CHECK(other != base);
    CHECK(other.to_string() != base.to_string());
  }
}
