// The chunks an append writes, shared with the cut (store_cut.cpp), which
// stores the piece a truncate or a fork makes as an append does, and the
// application of a turn's edit (turn_edit.h). Not installed.
#ifndef COLIKV_SRC_STORE_APPEND_H
#define COLIKV_SRC_STORE_APPEND_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "store/store_impl.h"
#include "catalog/turn_edit.h"

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
// (its link gives it one, from *record when given: SQLite's objects first).
// It runs in the write transaction Catalog::apply stores the chunk in, through `writer`.
int64_t put_chunk(Store::Impl& s, ChunkWriter& writer, const ModelRow& model, const WriteChunk& w,
                  const std::string& precision, const std::string& here, bool defer_index = false,
                  ChunkRecord* record = nullptr) REQUIRES(s.mu);

// Applies a turn's edit (Catalog::apply), with the limits an append applies
// when `limits` (a turn that stores new bytes): the tenant's retention and
// quota and the store's byte budget, in its committing transaction, never to
// the conversation it wrote; a conversation retention deleted is erased once
// the outermost call has committed.
TurnResult apply_turn(Store::Impl& s, TurnEdit& edit, bool limits, const std::string& here) REQUIRES(s.mu);

// For tests only, not API: an append whose conversation holds at most this
// many raw bytes, and fewer than objects_first_min_bytes(), reads, encodes
// and writes in its write transaction (append.cpp, "one_transaction_if_free");
// a larger one reads in a snapshot of its own first. A test of what another
// writer does between an append's read and its write sets it below 0.
int64_t& one_transaction_max_bytes();

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_STORE_APPEND_H
