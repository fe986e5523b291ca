// Shared by the tests: temporary directories and engine-shaped KV buffers
// filled with deterministic values.
#ifndef COLIKV_TESTS_TEST_SUPPORT_H
#define COLIKV_TESTS_TEST_SUPPORT_H

#include <cstdint>
#include <functional>
#include <memory>
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

// chunked_options of 4 positions a chunk, for tenant `tenant` (Options::tenant).
colikv::Options tenant_options(const colikv::ModelSignature& m, const std::string& tenant);

// Appends the first n positions of b to conversation id.
void append(colikv::Store& s, const std::string& id, const EngineBuffers& b, int64_t n);

// The token ids from, from+1, ..., from+n-1.
std::vector<int32_t> token_run(int32_t from, int n);

// The bit pattern of a float and back, for bit-exact checks (NaN payloads, -0.0).
uint32_t bits_of(float f);
float from_bits(uint32_t u);

// Deterministic token ids in [0, vocab).
std::vector<int32_t> make_tokens(int64_t n, int32_t vocab, uint32_t seed);

// The deterministic history of `seed`: n positions of model m, values
// fill(0, n, seed), token ids make_tokens(n, m.vocab, seed). A function of
// (seed, position) only, so a prefix is regenerated from the seed alone.
EngineBuffers history(const colikv::ModelSignature& m, int64_t n, uint32_t seed);
// The values of history(m, n, seed) under the token ids first_token,
// first_token + 1, ... (prompts and token files written out by hand).
EngineBuffers counted_history(const colikv::ModelSignature& m, int64_t n, uint32_t seed, int32_t first_token);
// A branch: positions [0, shared) of the history of trunk_seed, the rest of
// seed's (values and token ids).
EngineBuffers branched_history(const colikv::ModelSignature& m, int64_t n, int64_t shared, uint32_t trunk_seed,
                               uint32_t seed);

// Writes a .coli_kv file in the engine's layout from buffers (positions [0, n)),
// with header count nrec (default n).
void write_coli_kv(const std::string& path, const EngineBuffers& b, int64_t n, int64_t nrec = -1);

std::string read_file(const std::string& path);
// Size of a file in bytes; 0 if it does not exist.
int64_t file_size(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);
// How many times the windows (byte strings cut from stored values) occur in
// an SQLite store's files: the database, its -wal and its -shm.
int64_t found_in_store_files(const std::string& path, const std::vector<std::string>& windows);

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

// A store in a fresh folder, as leveldb's test fixtures keep cases short:
// `dir`, `model`, `options` (chunks of `chunk_tokens` positions,
// chunked_options), `path` (store_at: a file of dir, or on PostgreSQL a schema
// of the test server, so [backends] cases run on both), the store opened on
// first use and reopened, and histories of the model. Use it as a member or
// with TEST_CASE_METHOD; a case that needs another model or chunk size derives
// a fixture whose constructor passes them.
class StoreFixture {
 public:
  explicit StoreFixture(const colikv::ModelSignature& m = tiny_model(), int64_t chunk_tokens = 4,
                        const std::string& name = "s.db");
  StoreFixture(const StoreFixture&) = delete;
  StoreFixture& operator=(const StoreFixture&) = delete;
  virtual ~StoreFixture();

  // The store at path with options, opened (created) on the first call.
  colikv::Store& store();
  // Closes the store (committing what is queued) and opens it again with
  // options; an error of the open is thrown and leaves it closed.
  colikv::Store& reopen();
  // Closes the store; the next store() opens it again.
  void close();

  // history(model, n, seed) of test_support.h.
  EngineBuffers history(int64_t n, uint32_t seed) const;
  // Appends positions [0, n) of h as id.
  void write(const std::string& id, const EngineBuffers& h, int64_t n);
  // loads_as(store(), id, expect, n): "" or what differs.
  std::string read(const std::string& id, const EngineBuffers& expect, int64_t n);

  TempDir dir;
  colikv::ModelSignature model;
  colikv::Options options;
  std::string path;

 private:
  std::unique_ptr<colikv::Store> store_;
};

// What a call threw: its code and message (kOk and "" when it returned).
struct Outcome {
  colikv::ErrorCode code = colikv::ErrorCode::kOk;
  std::string message;
};
template <class F>
Outcome outcome_of(F&& f) {
  Outcome r;
  try {
    f();
  } catch (const colikv::Error& e) {
    r = {e.code(), e.what()};
  }
  return r;
}

}  // namespace colikv_test

#endif  // COLIKV_TESTS_TEST_SUPPORT_H
