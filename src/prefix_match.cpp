// Longest-prefix lookup (Store::match): which conversation of a model holds
// the longest prefix of a prompt, in time that does not grow with the number
// of conversations.
//
//  1. Full chunks: the prompt's chain hashes over whole chunks, looked up
//     in chunk_meta's (model_id, chain_hash) index up to the first that is
//     not stored (PrefixIndex::stored_chain_prefix: one query on a server). A
//     stored chain hash means some conversation holds exactly those tokens up
//     to there. Only token ids are compared: chunks stored under the same
//     chain hash with different content (schema 5 keeps them apart) all
//     match, and the conversation found loads its own values.
//  2. The next, partial region: among the chunks that follow the matched
//     prefix (chunk_meta: same model, precision and predecessor hash), the
//     largest k such that some chunk starts with the region's first k tokens.
//     Token lists are canonical JSON ("[1,2,3]"), so "starts with those k
//     tokens" is a string-prefix range of the index: a binary search over k of
//     O(log N) probes each (PrefixIndex::longest_follower; a server runs the
//     search itself, in one statement). A conversation's tail is held in pieces
//     (chunk_layout.h), each indexed by the tail up to its end after the
//     tail's anchor (docs/format.md), so the tail is one step whatever the
//     segmentation: the longest region some piece's tail starts with.
//  3. Ties: the most recently used conversation holding that prefix. First the
//     few most recently used conversations are checked one by one (a shared
//     prefix is usually held by one of them; PrefixIndex::recent_probe, none
//     on a server, where each check is a round trip), then an indexed join
//     over the conversations that use the matched chunk(s), which finds the
//     same one.
//  4. Loadable matches only (match_loadable): the holder must also still have
//     the KV data of every chunk it needs. When none has, shorter prefixes are
//     tried, from the matched chunk back towards the start; at each chunk a
//     binary search over the leading tokens, since a conversation that can load
//     a prefix can load every shorter one.
#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "catalog.h"
#include "chunk_layout.h"
#include "core/store_limits.h"
#include "core/chunk_codec.h"
#include "colikv/store.h"
#include "backend_error.h"
#include "store_call.h"
#include "store_impl.h"

namespace colikv {

using detail::ChunkHash;
using detail::with_context;
using LookupCandidate = detail::PrefixIndex::LookupCandidate;
using LookupRequest = detail::PrefixIndex::LookupRequest;
using LookupWalk = detail::PrefixIndex::LookupWalk;

namespace {

struct Region {
  // JSON of the region's first k tokens: "[t0,...,tk-1," (more follow) and
  // "[t0,...,tk-1]" (the chunk ends there).
  std::string more, exact, more_end;  // more_end: the first string after every "more..." one
  const int32_t* tokens = nullptr;
  int64_t k = 0;
  void set(const int32_t* t, int64_t n) {
    tokens = t;
    k = n;
    exact = detail::tokens_to_json(t, k);
    more = exact;
    if (k == 0) {
      more = "[";
      more_end = "\\";  // '[' + 1
    } else {
      more.back() = ',';
      more_end = more;
      more_end.back() = static_cast<char>(',' + 1);
    }
  }
  bool holds(const std::string& chunk_tokens) const {
    return chunk_tokens == exact || chunk_tokens.compare(0, more.size(), more) == 0;
  }
  bool holds(const std::optional<std::string>& chunk_tokens) const { return chunk_tokens && holds(*chunk_tokens); }
};

// The chain hashes of the prompt's whole chunks of C tokens, from seed.
std::vector<ChunkHash> prompt_chains(const ChunkHash& seed, const int32_t* tokens, int64_t len, int64_t C) {
  std::vector<ChunkHash> chains;
  for (ChunkHash h = seed; static_cast<int64_t>(chains.size() + 1) * C <= len;) {
    h = detail::chain_next(h, tokens + static_cast<int64_t>(chains.size()) * C, C);
    chains.push_back(h);
  }
  return chains;
}

// One chunk of a match's walk: the chunk list entry at `depth`, starting at
// position `base` after chain hash `before`, of which `len` tokens are held.
struct Step {
  int64_t depth = 0;
  int64_t base = 0;
  int64_t len = 0;
  ChunkHash before{};
};

class Matcher {
 public:
  // chains: the prompt's chain hashes from seed (prompt_chains), when
  // already made.
  Matcher(detail::PrefixIndex& index, const detail::ModelRow& m, const std::string& precision, bool loadable_only,
          const ChunkHash& seed, const std::vector<ChunkHash>* chains = nullptr)
      : index_(index), m_(m), precision_(precision), loadable_only_(loadable_only), seed_(seed), chains_(chains) {}

  PrefixMatch run(const int32_t* tokens, int64_t len) {
    chain_ = seed_;
    const int64_t tail = walk_full_chunks(tokens, len);
    walk_tail(tokens, len, tail);
    if (loadable_only_) return longest_loadable(tokens);
    // 3. The most recently used conversation holding the matched prefix.
    const Step& last = steps_.back();
    chain_ = last.before;
    PrefixMatch out;
    for (int64_t k = last.len; last.base + k > 0;) {
      region_.set(tokens + last.base, k);
      int64_t conv = -1;
      std::string id = most_recent(last.depth, k, conv);
      if (!id.empty()) {
        out.id = id;
        out.tokens = last.base + k;
        out.loadable = std::min(out.tokens, first_evicted(conv, out.tokens));
        return out;
      }
      // Not held after all (an inconsistent chunk_meta row): settle for less.
      if (k == 0) break;
      k = 0;
    }
    return out;
  }

 private:
  // 1. Whole chunks, by hash; returns where the tail region starts.
  int64_t walk_full_chunks(const int32_t* tokens, int64_t len) {
    const int64_t C = m_.chunk_tokens;
    const std::vector<ChunkHash> made = chains_ ? std::vector<ChunkHash>() : prompt_chains(chain_, tokens, len, C);
    const std::vector<ChunkHash>& chains = chains_ ? *chains_ : made;
    const int64_t full = index_.stored_chain_prefix(m_.id, chains);
    for (int64_t i = 0; i < full; ++i) {
      steps_.push_back({i, i * C, C, chain_});
      chain_ = chains[static_cast<size_t>(i)];
    }
    return full * C;
  }

  // 2. The tail region after them: the most leading tokens some chunk
  // following the anchor (a full chunk, or a piece's tail) holds.
  void walk_tail(const int32_t* tokens, int64_t len, int64_t tail) {
    const int64_t depth = static_cast<int64_t>(steps_.size());
    const int64_t k = index_.longest_follower(m_.id, precision_, prev(depth), tokens + tail,
                                              std::min(len, tail + m_.chunk_tokens) - tail);
    steps_.push_back({depth, tail, k, chain_});
  }

  // 4. The most recently used conversation that holds and can load the
  // longest prefix of the walk: from its last step back towards the start.
  PrefixMatch longest_loadable(const int32_t* tokens) {
    for (size_t i = steps_.size(); i-- > 0;) {
      const Step& st = steps_[i];
      // A step held whole is the next step with none of its tokens: already tried.
      const int64_t k = i + 1 == steps_.size() ? st.len : st.len - 1;
      chain_ = st.before;
      const int64_t lowest = st.base == 0 ? 1 : 0;
      if (k < lowest) continue;
      PrefixMatch found;
      if (loadable_holder(tokens, st, k, found)) return found;  // usually the whole match loads
      // The largest k' in [lowest, k) some conversation can load; that is monotone in k'.
      int64_t lo = lowest - 1, hi = k;  // lo: assumed loadable, hi: not
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        (loadable_holder(tokens, st, mid, found) ? lo : hi) = mid;
      }
      if (lo >= lowest) return found;  // found was set by the last probe that succeeded, at lo
    }
    return PrefixMatch();
  }

  // The most recently used conversation that can load the walk up to step st
  // and k tokens of it, in `found`; false when none can.
  bool loadable_holder(const int32_t* tokens, const Step& st, int64_t k, PrefixMatch& found) {
    region_.set(tokens + st.base, k);
    int64_t conv = -1;
    const std::string id = most_recent(st.depth, k, conv);
    if (id.empty()) return false;
    found.id = id;
    found.tokens = found.loadable = st.base + k;
    return true;
  }

  // Can conversation conv load its first `tokens` positions (no chunk evicted)?
  bool can_load(int64_t conv, int64_t tokens) { return first_evicted(conv, tokens) == INT64_MAX; }

  // The first position, before `end`, of conversation conv whose KV data was
  // evicted; INT64_MAX when none was.
  int64_t first_evicted(int64_t conv, int64_t end) {
    const std::optional<int64_t> pos = index_.first_evicted_pos(conv, end);
    return pos ? *pos : INT64_MAX;
  }

  // The chain hash before the chunk list entry at `depth`; null at position 0.
  const ChunkHash* prev(int64_t depth) const { return depth == 0 ? nullptr : &chain_; }

  // Does conversation conv hold the prefix: its entry at `depth - 1` ends the
  // walk's chain, and (k > 0) its entries from `depth` on start with region_?
  bool holds(int64_t conv, int64_t depth, int64_t k) {
    if (depth > 0 && !ends_matched_chain(conv, depth - 1)) return false;
    if (k == 0) return true;
    const std::optional<int64_t> covering = chunk_holding_region(conv, depth);
    // The index agrees with the authoritative token lists (chunks.tokens).
    return covering && region_.holds(index_.indexed_tokens(*covering, m_.id, precision_, prev(depth)));
  }

  // Does conv's entry at seq end the walk's chain? The index's chain hash
  // must say so, and the chunk's own key must confirm it: a store from
  // elsewhere may index a chunk under a chain hash its tokens do not make.
  bool ends_matched_chain(int64_t conv, int64_t seq) {
    const std::optional<detail::PrefixIndex::ChainEntry> e = index_.chain_at(conv, seq);
    return e && e->chain == chain_ && detail::key_matches(e->key, e->digest, chain_);
  }

  // The entry of conv, from `depth` on, that holds region_'s last token, when
  // the own token lists of those entries start with region_; none otherwise.
  // A full chunk holds the region alone, else at most kMaxTailPieces pieces do.
  std::optional<int64_t> chunk_holding_region(int64_t conv, int64_t depth) {
    std::vector<int32_t> held, t;
    for (const auto& entry : index_.token_lists_from(conv, depth, detail::kMaxTailPieces)) {
      const std::string& json = entry.tokens_json;
      if (static_cast<int64_t>(json.size()) > detail::max_tokens_json_bytes(m_.chunk_tokens) ||
          !detail::parse_tokens_json(json.data(), json.size(), t))
        return std::nullopt;  // not a list a chunk holds: verify reports it
      held.insert(held.end(), t.begin(), t.end());
      if (static_cast<int64_t>(held.size()) < region_.k) continue;
      if (!std::equal(region_.tokens, region_.tokens + region_.k, held.begin())) return std::nullopt;
      return entry.chunk_id;
    }
    return std::nullopt;
  }

  std::string most_recent(int64_t depth, int64_t k, int64_t& conv) {
    std::string found;
    const int64_t end = (depth < static_cast<int64_t>(steps_.size()) ? steps_[static_cast<size_t>(depth)].base : 0) + k;
    const detail::PrefixIndex::ConversationVisitor try_one = [&](int64_t id, const std::string& name) {
      conv = id;
      if (!holds(id, depth, k)) return false;
      if (loadable_only_ && !can_load(id, end)) return false;
      found = name;
      return true;
    };
    if (index_.recent_probe() > 0) index_.visit_recent(index_.recent_probe(), try_one);
    if (!found.empty()) return found;
    // Every conversation that uses a matching chunk, most recently used first.
    if (k == 0)
      index_.visit_users_of_chain(m_.id, chain_, depth - 1, try_one);
    else
      index_.visit_users_of_prefix(m_.id, precision_, prev(depth), region_.more, region_.more_end, region_.exact,
                                   depth, try_one);
    return found;
  }

  detail::PrefixIndex& index_;
  const detail::ModelRow& m_;
  std::string precision_;
  bool loadable_only_;
  ChunkHash seed_;  // the tenant's chain seed for the model and precision
  const std::vector<ChunkHash>* chains_;
  ChunkHash chain_{};
  Region region_;
  std::vector<Step> steps_;  // the walk: full chunks, then the tail's pieces
};

// A probe a lookup read ahead did not answer: the lookup runs again, a
// probe at a time, in a snapshot.
struct NotReadAhead {};

// The PrefixIndex of one precision's walk that a backend read ahead
// (PrefixIndex::read_lookup): answers the probes Matcher makes on the
// usual path from those rows, exactly as the backend's queries would in
// that statement's snapshot, and throws NotReadAhead for any other (an
// inconsistent index row, a holder that cannot load the whole match, more
// users than were read).
class AnsweredIndex : public detail::PrefixIndex {
 public:
  AnsweredIndex(const LookupRequest& req, const LookupWalk& walk, size_t i)
      : req_(req), walk_(walk), precision_(req.precisions[i]), chains_(req.chains[i]) {
    base_ = walk.full * req.chunk_tokens;
    r_ = std::min(req.len - base_, req.chunk_tokens);
    if (walk.full > 0) prev_ = chains_[static_cast<size_t>(walk.full - 1)];
    if (walk.k > 0) region_.set(req.tokens + base_, walk.k);
  }

  std::optional<std::string> next_precision(int64_t, const std::string&) override { throw NotReadAhead(); }
  bool chain_stored(int64_t, const ChunkHash&) override { throw NotReadAhead(); }
  bool follower_in_range(int64_t, const std::string&, const ChunkHash*, const std::string&,
                         const std::string&) override {
    throw NotReadAhead();
  }
  bool follower_equal(int64_t, const std::string&, const ChunkHash*, const std::string&) override {
    throw NotReadAhead();
  }
  int64_t stored_chain_prefix(int64_t model_id, const std::vector<ChunkHash>& chains) override {
    if (model_id != req_.model_id || chains != chains_) throw NotReadAhead();
    return walk_.full;
  }
  int64_t longest_follower(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                           const int32_t* region, int64_t r) override {
    if (!after_walk(model_id, precision, prev) || region != req_.tokens + base_ || r != r_) throw NotReadAhead();
    return walk_.k;
  }
  int recent_probe() const override { return 0; }
  void visit_recent(int64_t, const ConversationVisitor&) override { throw NotReadAhead(); }
  void visit_users_of_chain(int64_t model_id, const ChunkHash& chain, int64_t seq,
                            const ConversationVisitor& f) override {
    if (walk_.k != 0 || walk_.full == 0 || model_id != req_.model_id || chain != prev_ || seq != walk_.full - 1)
      throw NotReadAhead();
    visit(f);
  }
  void visit_users_of_prefix(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                             const std::string& from, const std::string& to, const std::string& exact, int64_t seq,
                             const ConversationVisitor& f) override {
    if (walk_.k == 0 || !after_walk(model_id, precision, prev) || seq != walk_.full || from != region_.more ||
        to != region_.more_end || exact != region_.exact)
      throw NotReadAhead();
    visit(f);
  }
  std::optional<ChainEntry> chain_at(int64_t conversation_id, int64_t seq) override {
    if (seq != walk_.full - 1) throw NotReadAhead();
    return candidate(conversation_id).chain;
  }
  std::vector<ListedTokens> token_lists_from(int64_t conversation_id, int64_t seq, int64_t limit) override {
    const LookupCandidate& c = candidate(conversation_id);
    if (walk_.k == 0 || seq != walk_.full || limit != req_.pieces) throw NotReadAhead();
    if (static_cast<int64_t>(c.lists.size()) < c.lists_available && !reaches_region(c.lists)) throw NotReadAhead();
    return c.lists;
  }
  std::optional<std::string> indexed_tokens(int64_t chunk_id, int64_t model_id, const std::string& precision,
                                            const ChunkHash* prev) override {
    if (!after_walk(model_id, precision, prev)) throw NotReadAhead();
    for (const LookupCandidate& c : walk_.candidates)
      for (size_t j = 0; j < c.lists.size(); ++j)
        if (c.lists[j].chunk_id == chunk_id) return c.indexed[j];
    throw NotReadAhead();
  }
  std::optional<int64_t> first_evicted_pos(int64_t conversation_id, int64_t end_pos) override {
    if (end_pos != base_ + walk_.k) throw NotReadAhead();
    return candidate(conversation_id).first_evicted;
  }
  std::optional<std::pair<int64_t, int64_t>> last_used(const std::string& name) override {
    for (const LookupCandidate& c : walk_.candidates)
      if (c.name == name) return std::make_pair(c.last_used_ms, c.id);
    throw NotReadAhead();
  }

 private:
  // Is the probe one after the walk's whole chunks, in its precision?
  bool after_walk(int64_t model_id, const std::string& precision, const ChunkHash* prev) const {
    if (model_id != req_.model_id || precision != precision_) return false;
    return walk_.full == 0 ? prev == nullptr : prev != nullptr && *prev == prev_;
  }
  // The users, most recently used first: those read, when they were all.
  void visit(const ConversationVisitor& f) const {
    for (const LookupCandidate& c : walk_.candidates)
      if (f(c.id, c.name)) return;
    if (walk_.users > static_cast<int64_t>(walk_.candidates.size())) throw NotReadAhead();
  }
  const LookupCandidate& candidate(int64_t conversation_id) const {
    for (const LookupCandidate& c : walk_.candidates)
      if (c.id == conversation_id) return c;
    throw NotReadAhead();
  }
  // Do the lists read, cut short of those token_lists_from returns, decide
  // Matcher's check as all of them would: a list it stops at, or the
  // region's k tokens held?
  bool reaches_region(const std::vector<ListedTokens>& lists) const {
    int64_t held = 0;
    std::vector<int32_t> t;
    for (const ListedTokens& l : lists) {
      const std::string& json = l.tokens_json;
      if (static_cast<int64_t>(json.size()) > detail::max_tokens_json_bytes(req_.chunk_tokens) ||
          !detail::parse_tokens_json(json.data(), json.size(), t))
        return true;
      held += static_cast<int64_t>(t.size());
      if (held >= walk_.k) return true;
    }
    return false;
  }

  const LookupRequest& req_;
  const LookupWalk& walk_;
  const std::string& precision_;
  const std::vector<ChunkHash>& chains_;
  int64_t base_ = 0, r_ = 0;
  ChunkHash prev_{};
  Region region_;
};

}  // namespace

namespace detail {

int64_t PrefixIndex::stored_chain_prefix(int64_t model_id, const std::vector<ChunkHash>& chains) {
  int64_t n = 0;
  while (n < static_cast<int64_t>(chains.size()) && chain_stored(model_id, chains[static_cast<size_t>(n)])) ++n;
  return n;
}

int64_t PrefixIndex::longest_follower(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                      const int32_t* region, int64_t r) {
  Region probe;
  // Does a chunk after prev start with region[0, k)?
  const auto has = [&](int64_t k) {
    probe.set(region, k);
    return follower_in_range(model_id, precision, prev, probe.more, probe.more_end) ||
           follower_equal(model_id, precision, prev, probe.exact);
  };
  if (r <= 0) return 0;
  if (has(r)) return r;
  int64_t lo = 0, hi = r;  // has(lo) (k = 0 is trivially held), !has(hi)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (has(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace detail

namespace {

// Of the walks of a lookup, one per precision: the longest match wins, a
// tie goes to the most recently used conversation (`index` knows when).
class BestMatch {
 public:
  void offer(const PrefixMatch& r, detail::PrefixIndex& index) {
    if (r.tokens == 0 || r.tokens < best_.tokens) return;
    const std::pair<int64_t, int64_t> used = index.last_used(r.id).value_or(std::make_pair(int64_t{-1}, int64_t{-1}));
    if (r.tokens > best_.tokens || used > best_used_) {
      best_ = r;
      best_used_ = used;
    }
  }
  const PrefixMatch& best() const { return best_; }

 private:
  PrefixMatch best_;
  std::pair<int64_t, int64_t> best_used_{-1, -1};
};

// The lookup from a backend's two statements (PrefixIndex::start_lookup,
// read_lookup): what find_prefix answers in the second's snapshot; none
// when the backend does not read ahead, or the lookup asked a probe it did
// not read (then find_prefix asks them one by one).
std::optional<PrefixMatch> read_ahead(Store::Impl& s, detail::PrefixIndex& index, const ModelSignature& model,
                                      const int32_t* tokens, int64_t len, bool loadable_only) {
  detail::PrefixIndex::LookupStart start;
  if (!index.start_lookup(model.to_string(), start)) return std::nullopt;
  if (!start.model_id || start.precisions.empty()) return PrefixMatch();
  const detail::ModelRow m = s.model_by_id(*start.model_id);
  detail::PrefixIndex::LookupRequest req;
  req.signature = model.to_string();
  req.model_id = m.id;
  req.chunk_tokens = m.chunk_tokens;
  req.precisions = start.precisions;
  for (const std::string& precision : req.precisions)
    req.chains.push_back(prompt_chains(s.chain_seed(m.text, precision), tokens, len, m.chunk_tokens));
  req.tokens = tokens;
  req.len = len;
  req.candidates = 4;
  req.pieces = detail::kMaxTailPieces;
  detail::PrefixIndex::LookupAnswers ans;
  if (!index.read_lookup(req, ans) || ans.start.model_id != start.model_id ||
      ans.start.precisions != start.precisions || ans.walks.size() != req.precisions.size())
    return std::nullopt;  // the model or its precisions changed in between
  try {
    // As find_prefix: one walk per precision.
    BestMatch best;
    for (size_t i = 0; i < req.precisions.size(); ++i) {
      AnsweredIndex walk(req, ans.walks[i], i);
      const std::string& precision = req.precisions[i];
      best.offer(
          Matcher(walk, m, precision, loadable_only, s.chain_seed(m.text, precision), &req.chains[i]).run(tokens, len),
          walk);
    }
    return best.best();
  } catch (const NotReadAhead&) {
    return std::nullopt;
  }
}

PrefixMatch find_prefix_in_call(Store::Impl& s, const ModelSignature& model, const int32_t* tokens, int64_t len,
                                bool loadable_only);

// One query, counted inside the call (once it returns the Store may be gone).
PrefixMatch find_prefix(Store::Impl& s, const ModelSignature& model, const int32_t* tokens, int64_t len,
                        bool loadable_only) {
  detail::StoreCall call(s);
  const detail::LatencyTimer timer(s.counters.match_seconds);
  detail::StoreCounters::add(s.counters.match_queries, 1);
  const PrefixMatch found = find_prefix_in_call(s, model, tokens, len, loadable_only);
  if (found.tokens > 0) {
    detail::StoreCounters::add(s.counters.match_answers, 1);
    detail::StoreCounters::add(s.counters.match_tokens, static_cast<uint64_t>(found.tokens));
  }
  return found;
}

PrefixMatch find_prefix_in_call(Store::Impl& s, const ModelSignature& model, const int32_t* tokens, int64_t len,
                                bool loadable_only) {
  model.validate();
  if (len < 0) throw Error(ErrorCode::kInvalidArgument, s.where() + ": match: negative length " + std::to_string(len));
  if (len > 0 && !tokens) throw Error(ErrorCode::kInvalidArgument, s.where() + ": match: tokens is null");
  if (len == 0) return PrefixMatch();
  // A server's two statements, when they answer every probe.
  const std::optional<PrefixMatch> ahead = with_context(
      s.where() + ": match", [&] { return read_ahead(s, s.catalog->prefix_index(), model, tokens, len, loadable_only); });
  if (ahead) return *ahead;
  const auto snapshot = s.catalog->begin(detail::Catalog::Access::kRead, s.where());
  return with_context(s.where() + ": match", [&] {
    detail::PrefixIndex& index = s.catalog->prefix_index();
    const std::optional<int64_t> model_id = s.catalog->find_model_id(model.to_string());
    if (!model_id) return PrefixMatch();
    const detail::ModelRow m = s.model_by_id(*model_id);
    // Chunks of each precision the model's conversations are stored in
    // (f32, a lossy one) chain from their own seed: one walk per precision,
    // the longest match wins, a tie goes to the most recently used.
    BestMatch best;
    std::string precision;
    while (std::optional<std::string> next = index.next_precision(*model_id, precision)) {
      precision = *next;
      best.offer(Matcher(index, m, precision, loadable_only, s.chain_seed(m.text, precision)).run(tokens, len), index);
    }
    return best.best();
  });
}

}  // namespace

PrefixMatch Store::match(const ModelSignature& model, const int32_t* tokens, int64_t len) {
  return find_prefix(*impl_, model, tokens, len, false);
}

PrefixMatch Store::match_loadable(const ModelSignature& model, const int32_t* tokens, int64_t len) {
  return find_prefix(*impl_, model, tokens, len, true);
}

}  // namespace colikv
