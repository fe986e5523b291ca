// Shared by the tests: temporary directories and engine-shaped KV buffers
// filled with deterministic values.
#ifndef COLIKV_TESTS_TEST_SUPPORT_H
#define COLIKV_TESTS_TEST_SUPPORT_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "colikv/model.h"
#include "colikv/options.h"
#include "colikv/store.h"

namespace colikv_test {

// A fresh directory under $TMPDIR (or /tmp), removed with its content.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Small shapes used throughout the tests.
colikv::ModelSignature tiny_model();          // 3 layers, 16+8, no indexer, vocab 1000
colikv::ModelSignature wide_model();          // 3 layers, 512+64 (the real shape's widths): 6,912 bytes a token
colikv::ModelSignature tiny_indexed_model();  // 4 layers, 16+8, indexer 8 on 2 layers
colikv::ModelSignature sample_model();        // the shape of tests/data/glm_tiny_nodsa_51.coli_kv

// The engine's per-layer KV buffers for up to `capacity` positions.
class EngineBuffers {
 public:
  EngineBuffers(const colikv::ModelSignature& m, int64_t capacity);
  // Which layers have an indexer: the last n_indexed layers.
  bool indexed(int layer) const;
  // Fills positions [from, to) with values derived from (seed, position, layer, index).
  void fill(int64_t from, int64_t to, uint32_t seed);
  // Sets every float to a NaN pattern so that unwritten positions are visible.
  void poison();
  colikv::KvSource source() const;
  colikv::KvTarget target();
  // Bit-exact comparison of positions [0, n) with other; returns "" or a description.
  std::string compare(const EngineBuffers& other, int64_t n) const;

  colikv::ModelSignature model;
  int64_t capacity;
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> lc, rc, ic;

 private:
  std::vector<float*> lp_, rp_, ip_;
  std::vector<const float*> lcp_, rcp_, icp_;
  void refresh_pointers();
};

// Options whose chunks hold `chunk_tokens` positions (a power of two) of
// model m, with synchronous NORMAL: small chunks put chunk boundaries where
// short tests can reach them.
colikv::Options chunked_options(const colikv::ModelSignature& m, int64_t chunk_tokens);

// The token ids from, from+1, ..., from+n-1.
std::vector<int32_t> token_run(int32_t from, int n);

// The bit pattern of a float and back, for bit-exact checks (NaN payloads, -0.0).
uint32_t bits_of(float f);
float from_bits(uint32_t u);

// Deterministic token ids in [0, vocab).
std::vector<int32_t> make_tokens(int64_t n, int32_t vocab, uint32_t seed);

// Writes a .coli_kv file in the engine's layout from buffers (positions [0, n)),
// with header count nrec (default n).
void write_coli_kv(const std::string& path, const EngineBuffers& b, int64_t n, int64_t nrec = -1);

std::string read_file(const std::string& path);
// Size of a file in bytes; 0 if it does not exist.
int64_t file_size(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

// The code of the colikv::Error f throws; ErrorCode::kOk when it throws none.
inline colikv::ErrorCode error_code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const colikv::Error& e) {
    return e.code();
  }
  return colikv::ErrorCode::kOk;
}

// "" when positions [from, capacity) of b still hold what poison() wrote.
std::string untouched_from(const EngineBuffers& b, int64_t from);

// Loads id (up to `limit` tokens, -1: all) into poisoned buffers with room to
// spare and compares positions [0, n) bit for bit with expect; positions past
// n must stay untouched. Returns "" or what differs.
std::string loads_as(colikv::Store& s, const std::string& id, const EngineBuffers& expect, int64_t n,
                     int64_t limit = -1);

// Takes schema 7's tenants out of the SQLite store at path (closed), as a
// store of schema `version` < 7 has it: conversations without tenant_id, no
// tenants table, and the views of that version. For tests that make an
// older store by editing a current one; sets no user_version.
void undo_tenants(const std::string& path, int version);

}  // namespace colikv_test

#endif  // COLIKV_TESTS_TEST_SUPPORT_H
