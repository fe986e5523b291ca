// The prefix index a catalog keeps (Catalog::prefix_index), which
// Store::match walks (prefix_match.cpp). It follows the rules catalog.h
// states for every catalog method.
//
// The walk itself (what to ask next, which holder to trust, ties, the
// fallback to shorter prefixes) is prefix_match.cpp's alone. The index
// answers questions about rows, each in one call whatever the prompt's
// length or the number of conversations, so that a backend whose every
// query is a round trip (a server) answers each in one statement, and one
// that queries locally answers it with its own few queries.
#ifndef COLIKV_SRC_PREFIX_INDEX_H
#define COLIKV_SRC_PREFIX_INDEX_H

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog_rows.h"

namespace colikv {
namespace detail {

// The leading k tokens of a region as the index compares token lists
// (canonical JSON, "[1,2,3]"): a list starts with them when it equals
// `exact` ("[t0,...,tk-1]") or lies in [more, more_end) ("[t0,...,tk-1,"
// and the first string after every one that starts so).
struct TokenRegion {
  std::string more, exact, more_end;
  const int32_t* tokens = nullptr;
  int64_t k = 0;
  void set(const int32_t* t, int64_t n);
  bool holds(const std::string& chunk_tokens) const {
    return chunk_tokens == exact || chunk_tokens.compare(0, more.size(), more) == 0;
  }
  bool holds(const std::optional<std::string>& chunk_tokens) const { return chunk_tokens && holds(*chunk_tokens); }
};

// The number of tokens a token list holds, counted by its commas, as an
// index cuts a holder's lists (PrefixIndex::Holder::lists); a list that
// does not parse is refused by whoever parses it.
int64_t listed_token_count(const std::string& tokens_json);

class PrefixIndex {
 public:
  // Offered conversations, one at a time (Catalog::visit_least_recent); it
  // returns true to stop.
  using ConversationVisitor = std::function<bool(int64_t conversation_id, const std::string& name)>;
  virtual ~PrefixIndex() = default;

  // A chunk list entry and its own token list (chunks.tokens), with the
  // token list the index holds for that chunk after the step's `prev` in the
  // lookup's precision (none: no such index row).
  struct ListedTokens {
    int64_t chunk_id = 0;
    std::string tokens_json;
    std::optional<std::string> indexed;
  };
  // The chain hash the index holds for a chunk list entry, with the chunk's
  // key and digest to check it against (match trusts no index row the key
  // does not confirm).
  struct ChainEntry {
    ChunkHash chain{};
    ChunkHash key{};
    std::optional<ChunkHash> digest;
  };

  // One step of a walk: the chunk list entry at `depth` (after chain hash
  // *prev; none at depth 0) of which the first region.k tokens are matched.
  // Its users are the conversations of the tenant that hold one of the
  // model's chunks there: for k > 0, an entry at depth or after it indexed
  // after prev in the precision with a token list that starts with the
  // region; for k == 0 (depth > 0), their entry depth - 1 indexed at chain
  // hash *prev.
  struct Step {
    int64_t depth = 0;
    const ChunkHash* prev = nullptr;
    TokenRegion region;
    int64_t end = 0;  // the step's end position: a holder's evicted chunks are looked for before it
  };
  // A user of a step and the rows match checks it against, as one snapshot
  // holds them.
  struct Holder {
    int64_t id = 0;
    std::string name;
    int64_t last_used_ms = 0;
    std::optional<ChainEntry> chain;       // its entry depth - 1 (depth > 0)
    std::vector<ListedTokens> lists;       // k > 0: its entries from depth on, in seq order, up to the first
                                           // at which they hold k tokens (listed_token_count), at most
                                           // kMaxTailPieces (chunk_layout.h)
    std::optional<int64_t> first_evicted;  // the first position before `end` whose KV data was evicted
  };
  // Users of a step, most recently used first (last_used_ms, then id,
  // descending), each once: those from the `skip`-th on, at most `limit`,
  // and whether more follow.
  struct Holders {
    std::vector<Holder> holders;
    bool more = false;
  };
  // One precision's walk: `full` whole chunks stored, the chain hashes of
  // the prompt's whole chunks that the index holds before the first it does
  // not; then `k`, the largest k <= r (the tokens after them, at most a
  // chunk's) such that a chunk after the last of them (none: position 0) in
  // the precision starts with the first k of them; and the first holders of
  // that step, as holders() returns them with skip 0.
  struct Walk {
    int64_t full = 0;
    int64_t k = 0;
    Holders first;
  };
  struct Precision {
    std::string name;
    std::vector<ChunkHash> chains;  // the chain hashes of the prompt's whole chunks, from its seed
  };

  // The reads of one lookup. Backends differ in how they read together:
  // SQLite holds a read transaction for the lookup's life, so every answer
  // is one snapshot's; a server answers each call in one statement, which is
  // its own snapshot and holds all that the call returns.
  class Lookup {
   public:
    virtual ~Lookup() = default;
    // The model of the signature (none: no such model) and the precisions
    // its chunks are stored in, in byte order.
    virtual std::optional<int64_t> model_id() const = 0;
    virtual const std::vector<std::string>& precisions() const = 0;
    // Every precision's walk over `tokens` (len of them, in chunks of
    // chunk_tokens), each with its first `limit` holders.
    virtual std::vector<Walk> walks(int64_t chunk_tokens, const std::vector<Precision>& precisions,
                                    const int32_t* tokens, int64_t len, int64_t limit) = 0;
    // The users of `step` of precision `precision`, as Holders says.
    virtual Holders holders(const std::string& precision, const Step& step, int64_t skip, int64_t limit) = 0;
    // How many holders one read should bring: a few where each read is a
    // round trip, one where it is a local query (the first usually holds).
    virtual int64_t holders_per_read() const = 0;
  };
  // Starts a lookup of the model of `signature`; `what` names the caller
  // for errors.
  virtual std::unique_ptr<Lookup> lookup(const std::string& signature, const std::string& what) = 0;

  // The first position of the first evicted entry of a chunk list among those
  // that start before end_pos.
  virtual std::optional<int64_t> first_evicted_pos(int64_t conversation_id, int64_t end_pos) = 0;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_PREFIX_INDEX_H
