// The chunks an append writes, shared with the cut (store_cut.cpp), which
// links the piece a truncate or a fork makes as an append does. Not installed.
#ifndef COLIKV_SRC_STORE_APPEND_H
#define COLIKV_SRC_STORE_APPEND_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "store_impl.h"

namespace colikv {
namespace detail {

// The tail before a piece that does not start it: where the tail starts,
// the chain hash there (the anchor), and its tokens up to the piece.
struct TailRegion {
  int64_t first = 0;
  ChunkHash anchor{};
  std::vector<int32_t> before;  // empty: the chunk starts its region
};

struct WriteChunk {
  int64_t seq = 0;
  int64_t first_pos = 0;
  ChunkHash hash{};  // its chain hash
  detail::ProducedChunk produced;
  ChunkHash prev{};  // the chain hash before this chunk (unused at seq 0), for chunk_meta
  int64_t n = 0;     // its tokens
  // A tail piece after others is indexed from the tail's start (ChunkRecord::index_*):
  TailRegion region;
};

// Stores one chunk, or finds the stored chunk with the same key (the same
// place and the same content), and returns its id; 0 when the chunk was
// skipped as stored already but is no longer there with its values (the
// caller encodes it and calls again).
// Objects first: with defer_index a new chunk gets no chunk_meta row yet
// (its link gives it one, Catalog::index_chunk, from *record when given).
int64_t put_chunk(Store::Impl& s, const ModelRow& model, const WriteChunk& w, const std::string& precision,
                  const std::string& here, bool defer_index = false, ChunkRecord* record = nullptr);

// For tests only, not API: an append of more than one chunk whose raw bytes
// reach this stores its chunks first, each in a transaction of its own, then
// links them (docs/design.md, "Objects first"), where the backend can.
int64_t& objects_first_min_bytes();

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_STORE_APPEND_H
