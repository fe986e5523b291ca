// colikv/coli_kv_format.h: the engine's raw .coli_kv file, and inspecting
// one without a store (colikv/coli_kv.h imports and exports them).
//
// Format (little-endian): 8 bytes magic "COLIKV1\0"; eight int32: n_layers,
// kv_lora, qk_rope, index_hd, n_indexed, vocab, nrec, 0; then records of
// record_bytes each: int32 token, then per layer kv_lora floats and qk_rope
// floats, then index_hd floats per indexed layer. Only the first nrec records
// are content; bytes after them are left over from a truncate or a torn append.
#ifndef COLIKV_COLI_KV_FORMAT_H
#define COLIKV_COLI_KV_FORMAT_H

#include <cstdint>
#include <string>
#include <vector>

#include "colikv/export.h"
#include "colikv/model.h"

namespace colikv {

constexpr int64_t kColiKvHeaderBytes = 40;

// What inspect_coli_kv found, without importing.
struct ColiKvInspection {
  std::string path;
  int64_t file_bytes = 0;
  bool header_read = false;       // magic and 8 header fields present
  ModelSignature model;           // from the header (weights_id empty)
  int64_t header_count = 0;       // nrec field
  int64_t record_bytes = 0;       // 0 when the header is invalid
  int64_t records_on_disk = 0;    // complete records present after the header
  int64_t trailing_bytes = 0;     // bytes after the last complete record
  std::vector<int32_t> first_tokens;   // up to the requested number, of the counted records
  std::vector<std::string> problems;   // every problem found; empty when well-formed
  bool ok() const { return problems.empty(); }
};

// Reads the header and scans the token ids of the counted records (checking
// each is in [0, vocab)). Throws Error(kNotFound/kIO) only when the file cannot
// be opened or read (kIO too when it shrinks meanwhile), kInvalidArgument when
// it is not a regular file (a FIFO, a device, a directory); every format
// problem goes into problems.
COLIKV_API ColiKvInspection inspect_coli_kv(const std::string& path, int first_tokens = 16);

}  // namespace colikv

#endif  // COLIKV_COLI_KV_FORMAT_H
