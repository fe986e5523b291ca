// The prefix index a catalog keeps (Catalog::prefix_index), which
// Store::match walks (prefix_match.cpp). It follows the rules catalog.h
// states for every catalog method.
#ifndef COLIKV_SRC_PREFIX_INDEX_H
#define COLIKV_SRC_PREFIX_INDEX_H

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog_rows.h"

namespace colikv {
namespace detail {

// The prefix index (Store::match): lookups by chain hash and by token-list
// prefix, over queries the backend may keep prepared across calls. Valid in
// the caller's read snapshot. `prev` is the chain hash before a chunk, null
// for a chunk at position 0. A visitor returns true to stop.
class PrefixIndex {
 public:
  using ConversationVisitor = std::function<bool(int64_t conversation_id, const std::string& name)>;
  virtual ~PrefixIndex() = default;
  // The least precision above `after` that chunks of the model are stored in.
  virtual std::optional<std::string> next_precision(int64_t model_id, const std::string& after) = 0;
  // Whether a chunk of the model is indexed at chain hash `chain`.
  virtual bool chain_stored(int64_t model_id, const ChunkHash& chain) = 0;
  // Is there a chunk after `prev` whose token list is in [from, to), or equals `exact`?
  virtual bool follower_in_range(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                 const std::string& from, const std::string& to) = 0;
  virtual bool follower_equal(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                              const std::string& exact) = 0;
  // The chain hash the index holds for a conversation's entry at seq, with
  // the chunk's key and digest to check it against (match trusts no index
  // row the key does not confirm).
  struct ChainEntry {
    ChunkHash chain{};
    ChunkHash key{};
    std::optional<ChunkHash> digest;
  };
  virtual std::optional<ChainEntry> chain_at(int64_t conversation_id, int64_t seq) = 0;
  // The token list the index holds for a chunk that follows `prev` (a tail
  // piece: the tail's tokens up to its end).
  virtual std::optional<std::string> indexed_tokens(int64_t chunk_id, int64_t model_id, const std::string& precision,
                                                    const ChunkHash* prev) = 0;
  // A chunk list entry's chunk and its own token list (chunks.tokens).
  struct ListedTokens {
    int64_t chunk_id = 0;
    std::string tokens_json;
  };
  // The entries of a chunk list from seq on, in seq order, at most `limit`.
  virtual std::vector<ListedTokens> token_lists_from(int64_t conversation_id, int64_t seq, int64_t limit) = 0;
  // The first position of the first evicted entry of a chunk list among those
  // that start before end_pos.
  virtual std::optional<int64_t> first_evicted_pos(int64_t conversation_id, int64_t end_pos) = 0;
  // (last_used_ms, conversation_id) of a conversation.
  virtual std::optional<std::pair<int64_t, int64_t>> last_used(const std::string& name) = 0;
  // The `limit` most recently used conversations, most recent first.
  virtual void visit_recent(int64_t limit, const ConversationVisitor& f) = 0;
  // The conversations whose entry seq is a chunk of the model at chain hash
  // `chain`, most recently used first.
  virtual void visit_users_of_chain(int64_t model_id, const ChunkHash& chain, int64_t seq,
                                    const ConversationVisitor& f) = 0;
  // The conversations with an entry at seq or after it that follows `prev`
  // with an indexed token list in [from, to) or equal to `exact`, most
  // recently used first (a conversation may come more than once).
  virtual void visit_users_of_prefix(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                     const std::string& from, const std::string& to, const std::string& exact,
                                     int64_t seq, const ConversationVisitor& f) = 0;

  // The walks of a lookup, each one call whatever the prompt's length, so
  // that a backend whose every query is a round trip (a server) answers each
  // in one; the defaults (prefix_match.cpp) are made of the probes above.
  // How many of `chains` (the chain hashes of a prompt's whole chunks, in
  // order) chain_stored holds for before the first it does not.
  virtual int64_t stored_chain_prefix(int64_t model_id, const std::vector<ChunkHash>& chains);
  // The largest k <= r such that a chunk after `prev` (none: position 0)
  // starts with region[0, k): its token list is that list (follower_equal)
  // or continues it (follower_in_range). 0 when r <= 0.
  virtual int64_t longest_follower(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                   const int32_t* region, int64_t r);
  // How many of the most recently used conversations a lookup tries one by
  // one before the indexed join over a prefix's users (which finds the same
  // one): worth it where a probe is cheap, not where each is a round trip.
  virtual int recent_probe() const { return 32; }

  // A lookup read ahead, for a backend whose every query is a round trip:
  // the lookup's probes answered by two statements, each its own snapshot,
  // instead of one query per probe in a transaction (prefix_match.cpp).
  // The model of a signature and the precisions its chunks are stored in,
  // in the order next_precision gives them.
  struct LookupStart {
    std::optional<int64_t> model_id;  // none: no such model
    std::vector<std::string> precisions;
  };
  // False when the backend does not read lookups ahead (then nothing is read).
  virtual bool start_lookup(const std::string& signature, LookupStart& out) {
    (void)signature;
    (void)out;
    return false;
  }
  // What a lookup's walks need: for precision i, the chain hashes of the
  // prompt's whole chunks from that precision's seed.
  struct LookupRequest {
    std::string signature;
    int64_t model_id = 0;
    int64_t chunk_tokens = 0;
    std::vector<std::string> precisions;
    std::vector<std::vector<ChunkHash>> chains;  // per precision
    const int32_t* tokens = nullptr;
    int64_t len = 0;
    int64_t candidates = 0;  // holders read with what checking them needs
    int64_t pieces = 0;      // token_lists_from's limit
  };
  // A conversation using the matched chunk(s), with the rows match checks it
  // against (chain_at, token_lists_from, indexed_tokens, first_evicted_pos,
  // last_used, as Matcher asks them).
  struct LookupCandidate {
    int64_t id = 0;
    std::string name;
    int64_t last_used_ms = 0;
    std::optional<ChainEntry> chain;                       // chain_at(id, full - 1)
    std::optional<int64_t> first_evicted;                  // first_evicted_pos(id, full * C + k)
    std::vector<ListedTokens> lists;                       // token_lists_from(id, full, pieces), maybe cut short
    std::vector<std::optional<std::string>> indexed;       // indexed_tokens of each of lists
    int64_t lists_available = 0;                           // how many token_lists_from returns
  };
  // One precision's walk: `full` whole chunks stored (stored_chain_prefix),
  // then the longest follower's k tokens (longest_follower), and the users of
  // the last matched step, most recently used first (visit_users_of_prefix
  // when k > 0, else visit_users_of_chain when full > 0), the first
  // `candidates` of them, of `users` (at most candidates + 1).
  struct LookupWalk {
    int64_t full = 0;
    int64_t k = 0;
    int64_t users = 0;
    std::vector<LookupCandidate> candidates;
  };
  struct LookupAnswers {
    LookupStart start;               // as the second statement saw them
    std::vector<LookupWalk> walks;   // per precision of the request
  };
  // Reads the walks of `req` in one statement; false when the backend does
  // not read lookups ahead.
  virtual bool read_lookup(const LookupRequest& req, LookupAnswers& out) {
    (void)req;
    (void)out;
    return false;
  }
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_PREFIX_INDEX_H
