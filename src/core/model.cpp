#include "colikv/model.h"

#include "colikv/error.h"

namespace colikv {

namespace {
constexpr int64_t kMaxRecordBytes = int64_t{1} << 30;

// Literals, not strings: every append validates its model, and a string
// built for each check would cost an allocation when nothing fails.
void require(bool ok, const char* field, const char* why, const ModelSignature& m) {
  if (!ok)
    throw Error(ErrorCode::kInvalidArgument,
                std::string("invalid model signature: ") + field + " " + why + " (" + m.to_string() + ")");
}
}  // namespace

void ModelSignature::validate() const {
  require(n_layers > 0, "n_layers", "must be positive", *this);
  require(kv_lora > 0, "kv_lora", "must be positive", *this);
  require(qk_rope > 0, "qk_rope", "must be positive", *this);
  require(vocab > 0, "vocab", "must be positive", *this);
  require(index_hd >= 0, "index_hd", "must not be negative", *this);
  require(n_indexed >= 0, "n_indexed", "must not be negative", *this);
  require(n_indexed <= n_layers, "n_indexed", "exceeds n_layers", *this);
  require(!(index_hd > 0 && n_indexed == 0), "n_indexed", "is 0 while index_hd is not", *this);
  require(!(index_hd == 0 && n_indexed > 0), "index_hd", "is 0 while n_indexed is not", *this);
  // Bound each term by division before forming a product, so that no
  // intermediate overflows int64 whatever the fields.
  const int64_t max_floats = (kMaxRecordBytes - 4) / 4;
  const int64_t per_layer = int64_t{kv_lora} + qk_rope;  // < 2^32
  const int64_t indexed = n_indexed > 0 ? int64_t{index_hd} : 0;
  const bool fits = per_layer <= max_floats / n_layers &&
                    (indexed == 0 || indexed <= (max_floats - per_layer * n_layers) / n_indexed);
  require(fits, "n_layers/kv_lora/qk_rope/index_hd",
          "give a record over the 1 GiB limit", *this);
  require(weights_id.find('\0') == std::string::npos, "weights_id", "contains a NUL byte", *this);
}

// Saturating: an unvalidated header may hold any int32s, and reporting its
// size (inspect) must not overflow.
int64_t ModelSignature::floats_per_token() const {
  int64_t layers = 0, indexed = 0, total = 0;
  if (__builtin_mul_overflow(int64_t{n_layers}, int64_t{kv_lora} + qk_rope, &layers) ||
      __builtin_mul_overflow(int64_t{n_indexed}, int64_t{index_hd}, &indexed) ||
      __builtin_add_overflow(layers, indexed, &total))
    return INT64_MAX;
  return total;
}

int64_t ModelSignature::record_bytes() const {
  const int64_t floats = floats_per_token();
  return floats > (INT64_MAX - 4) / 4 ? INT64_MAX : 4 + 4 * floats;
}

std::string ModelSignature::to_string() const {
  std::string s = "n_layers=" + std::to_string(n_layers) + " kv_lora=" + std::to_string(kv_lora) +
                  " qk_rope=" + std::to_string(qk_rope) + " index_hd=" + std::to_string(index_hd) +
                  " n_indexed=" + std::to_string(n_indexed) + " vocab=" + std::to_string(vocab);
  if (!weights_id.empty()) s += " weights=" + weights_id;
  return s;
}

bool ModelSignature::operator==(const ModelSignature& o) const {
  return n_layers == o.n_layers && kv_lora == o.kv_lora && qk_rope == o.qk_rope && index_hd == o.index_hd &&
         n_indexed == o.n_indexed && vocab == o.vocab && weights_id == o.weights_id;
}

}  // namespace colikv
