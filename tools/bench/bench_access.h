// The benchmark's one door into colikv's internals. Every workload reaches
// the library through include/colikv/*.h; this header offers the three things
// a figure needs that the public API does not, each in the benchmark's own
// types, so that only bench_access.cpp includes src/ headers (the other
// files are compiled without src/ on their include path).
#ifndef COLIKV_TOOLS_BENCH_BENCH_ACCESS_H
#define COLIKV_TOOLS_BENCH_BENCH_ACCESS_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "colikv/options.h"
#include "colikv/store.h"

struct sqlite3;

namespace colikv_bench {
namespace access {

// 1. The chunk codec alone (src/core/chunk_codec.h), for the "bounds" rows:
// what encoding and decoding cost without a store around them, on one thread
// and on every core. The public API only encodes as part of a stored append.
struct CodecPlane {
  float* base = nullptr;
  int64_t width = 0;   // floats of one position
  int64_t stride = 0;  // floats from one position to the next
};
struct CodecChunk {
  std::vector<uint8_t> payload;
  bool compressed = false;
  int64_t raw_size = 0;
  uint32_t checksum = 0;
};
CodecChunk encode_chunk(int64_t n_tokens, const int32_t* tokens, const std::vector<CodecPlane>& planes,
                        int zstd_level);
// Decodes into the planes; throws colikv::Error on a payload that does not verify.
void decode_chunk(const CodecChunk& chunk, int64_t n_tokens, const int32_t* tokens,
                  const std::vector<CodecPlane>& planes);

// 2. A plain SQLite connection set up as colikv sets up a store's (the same
// pragmas, WAL size and busy handler: detail::open_store), for the small
// appends' "SQLite's rows" baseline and the prefill of their store: SQLite
// writing the same rows through a connection configured otherwise would
// measure the configuration, not colikv's own work.
class StoreConnection {
 public:
  StoreConnection(const std::string& path, const colikv::Options& options);
  ~StoreConnection();
  StoreConnection(const StoreConnection&) = delete;
  StoreConnection& operator=(const StoreConnection&) = delete;
  sqlite3* handle() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// 3. The round trips a store on PostgreSQL has made to its server
// (PgConnection::round_trips), for the "pg longest-prefix lookup" row, whose
// target is a count of round trips per lookup, and for the round trips of a
// turn on PostgreSQL (turns, small); -1 for a store on SQLite or
// a build without the PostgreSQL backend.
int64_t round_trips(colikv::Store& store);
// Of those, the ones the links of its turns made (PgCatalog::link_round_trips:
// the statement writing a turn's chunk list and count), for the rows of a
// turn's round trips; -1 where round_trips is.
int64_t link_round_trips(colikv::Store& store);

}  // namespace access
}  // namespace colikv_bench

#endif  // COLIKV_TOOLS_BENCH_BENCH_ACCESS_H
