// Where a conversation's chunks sit (docs/format.md, "Chunk lists"): full
// chunks of C tokens at 0, C, 2C, ..., then the tail, fewer than C tokens
// after the last full chunk, held in up to kMaxTailPieces pieces. A turn that
// stays inside the tail adds one piece instead of re-encoding the tail, so its
// cost follows the turn, not the chunk; a tail that reaches C tokens is
// re-packed into a full chunk, the unit shared across conversations.
#ifndef COLIKV_SRC_CHUNK_LAYOUT_H
#define COLIKV_SRC_CHUNK_LAYOUT_H

#include <algorithm>
#include <cstdint>
#include <string>

namespace colikv {
namespace detail {

// The most pieces a tail may hold; one more merges the tail into one piece.
// Each piece costs a chunk row and a lookup per load; merging costs decoding
// and encoding the tail once per kMaxTailPieces turns (docs/benchmarks.md).
constexpr int64_t kMaxTailPieces = 32;

// a + b, saturating. For positions and seqs read from a store before they
// are checked (a chunk's end first_pos + n_tokens, for a message or to go on
// past an entry): a hostile store's values may overflow the sum.
inline int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? INT64_MAX : INT64_MIN;
  return sum;
}

// The first position of the tail of a conversation of `count` tokens.
inline int64_t tail_start(int64_t count, int64_t chunk_tokens) { return count / chunk_tokens * chunk_tokens; }

// Checks a chunk list entry by entry, in seq order, against the layout a
// count of tokens allows.
class ChunkListWalk {
 public:
  ChunkListWalk(int64_t chunk_tokens, int64_t count)
      : chunk_tokens_(chunk_tokens), count_(count), tail_(tail_start(count, chunk_tokens)) {}

  // "" when entry seq [first_pos, first_pos + n) fits next, else why not.
  std::string next(int64_t seq, int64_t first_pos, int64_t n) {
    const std::string why = misfit(seq, first_pos, n);
    if (!why.empty()) return why;
    if (first_pos >= tail_) ++pieces_;
    ++seq_;
    covered_ = first_pos + n;
    return "";
  }

  // Goes on after an entry that did not fit, as if it had: one misplaced
  // entry is reported once, not again for every entry after it.
  void skip(int64_t seq, int64_t first_pos, int64_t n) {
    seq_ = saturating_add(seq, 1);
    covered_ = saturating_add(first_pos, std::max<int64_t>(n, 0));
  }

  int64_t covered() const { return covered_; }  // positions [0, covered) are placed
  int64_t entries() const { return seq_; }

 private:
  std::string misfit(int64_t seq, int64_t first_pos, int64_t n) const {
    if (first_pos > covered_) return "leaves " + range(covered_, first_pos) + " uncovered before it";
    if (first_pos < covered_) return "overlaps " + range(first_pos, covered_) + " of the chunks before it";
    if (seq != seq_) return "has seq " + std::to_string(seq) + " where seq " + std::to_string(seq_) + " comes next";
    if (n < 1) return "holds " + std::to_string(n) + " tokens; a chunk holds at least one";
    if (n > count_ - first_pos)
      return "ends at position " + std::to_string(saturating_add(first_pos, n)) + ", past the count of " + std::to_string(count_);
    if (first_pos < tail_ && n != chunk_tokens_)
      return "holds " + std::to_string(n) + " tokens before position " + std::to_string(tail_) +
             ", where only full chunks of " + std::to_string(chunk_tokens_) + " sit";
    if (first_pos >= tail_ && pieces_ >= kMaxTailPieces)
      return "is a tail piece beyond the " + std::to_string(kMaxTailPieces) + " a conversation may hold";
    return "";
  }

  static std::string range(int64_t a, int64_t b) {
    return "positions [" + std::to_string(a) + ", " + std::to_string(b) + ")";
  }

  const int64_t chunk_tokens_;
  const int64_t count_;
  const int64_t tail_;
  int64_t seq_ = 0;
  int64_t covered_ = 0;
  int64_t pieces_ = 0;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CHUNK_LAYOUT_H
