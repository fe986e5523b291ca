// colikv/model.h: the model signature a conversation belongs to.
#ifndef COLIKV_MODEL_H
#define COLIKV_MODEL_H

#include <cstdint>
#include <string>

#include "colikv/export.h"

namespace colikv {

// The six shape fields the .coli_kv header compares, plus an optional identity
// of the weights (a hash or name of the weights and their quantization) that
// the engine supplies. Two signatures are equal only when all seven fields
// are; nothing ever loads into a model whose signature differs.
struct COLIKV_API ModelSignature {
  int32_t n_layers = 0;   // transformer layers; > 0
  int32_t kv_lora = 0;    // compressed KV width per layer (floats); > 0
  int32_t qk_rope = 0;    // rotary key width per layer (floats); > 0
  int32_t index_hd = 0;   // indexer vector width (floats); 0 when no layer has an indexer
  int32_t n_indexed = 0;  // layers that have an indexer; 0..n_layers, 0 iff index_hd is 0
  int32_t vocab = 0;      // vocabulary size; every token id is in [0, vocab)
  std::string weights_id; // optional; "" when the engine supplies none

  // Throws Error(kInvalidArgument) naming the first offending field:
  // non-positive sizes, index_hd without indexed layers or the reverse,
  // n_indexed > n_layers, a record larger than 1 GiB.
  void validate() const;

  // Floats one token holds: n_layers*(kv_lora+qk_rope) + n_indexed*index_hd.
  // Saturates at INT64_MAX for a shape whose size overflows (validate() rejects those).
  int64_t floats_per_token() const;
  // Bytes of one .coli_kv record: 4 (token id) + 4 * floats_per_token(); saturates likewise.
  int64_t record_bytes() const;

  // Canonical text form, the key of the models table, e.g.
  // "n_layers=78 kv_lora=512 qk_rope=64 index_hd=0 n_indexed=0 vocab=154880 weights=glm-q8".
  // The " weights=..." part is absent when weights_id is empty.
  std::string to_string() const;

  bool operator==(const ModelSignature& o) const;
  bool operator!=(const ModelSignature& o) const { return !(*this == o); }
};

// The weights identity of a model folder (for ModelSignature::weights_id when
// the engine has none): "w" and 16 hex digits of a SHA-256 over config.json's
// bytes and the names and sizes of the *.safetensors files, sorted by name.
// Stable across moves and copies of the folder; see colikv_weights_id_from_dir
// (colikv.h) for what it does not see. Throws kNotFound (no config.json),
// kInvalidArgument (config.json larger than 16 MiB), kIO.
COLIKV_API std::string weights_id_from_dir(const std::string& model_dir);

}  // namespace colikv

#endif  // COLIKV_MODEL_H
