// Longest-prefix lookup (Store::match): which conversation of a model holds
// the longest prefix of a prompt, in time that does not grow with the number
// of conversations.
//
//  1. Full chunks: the prompt's chain hashes over whole chunks, looked up
//     in chunk_meta's (model_id, chain_hash) index up to the first that is
//     not stored (PrefixIndex::Walk::full). A
//     stored chain hash means some conversation holds exactly those tokens up
//     to there. Only token ids are compared: chunks stored under the same
//     chain hash with different content (schema 5 keeps them apart) all
//     match, and the conversation found loads its own values.
//  2. The next, partial region: among the chunks that follow the matched
//     prefix (chunk_meta: same model, precision and predecessor hash), the
//     largest k such that some chunk starts with the region's first k tokens.
//     Token lists are canonical JSON ("[1,2,3]"), so "starts with those k
//     tokens" is a string-prefix range of the index, which a backend searches
//     over k in O(log N) probes (PrefixIndex::Walk::k). A conversation's tail is held in pieces
//     (chunk_layout.h), each indexed by the tail up to its end after the
//     tail's anchor (docs/format.md), so the tail is one step whatever the
//     segmentation: the longest region some piece's tail starts with.
//  3. Ties: the most recently used conversation holding that prefix, among
//     the users of the matched chunk(s), most recently used first
//     (PrefixIndex::Lookup::holders), each checked here against its own rows.
//  4. Loadable matches only (match_loadable): the holder must also still have
//     the KV data of every chunk it needs. When none has, shorter prefixes are
//     tried, from the matched chunk back towards the start; at each chunk a
//     binary search over the leading tokens, since a conversation that can load
//     a prefix can load every shorter one.
//
// Steps 1 and 2 and the first holders of every precision come in one call
// (Lookup::walks): on a server, one statement after the one that finds the
// model and its precisions. The rest asks the index only when the first
// holders do not settle it.
#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "catalog/catalog.h"
#include "core/chunk_layout.h"
#include "core/store_limits.h"
#include "core/chunk_codec.h"
#include "colikv/store.h"
#include "catalog/backend_error.h"
#include "store/store_call.h"
#include "store/store_impl.h"

namespace colikv {

using detail::ChunkHash;
using Holder = detail::PrefixIndex::Holder;
using Holders = detail::PrefixIndex::Holders;
using Lookup = detail::PrefixIndex::Lookup;

namespace detail {

void TokenRegion::set(const int32_t* t, int64_t n) {
  tokens = t;
  k = n;
  exact = tokens_to_json(t, k);
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

int64_t listed_token_count(const std::string& tokens_json) {
  if (tokens_json == "[]") return 0;
  return static_cast<int64_t>(std::count(tokens_json.begin(), tokens_json.end(), ',')) + 1;
}

}  // namespace detail

namespace {

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

// A holder found: the conversation and its recency, which breaks a tie
// between precisions.
struct Found {
  PrefixMatch match;
  std::pair<int64_t, int64_t> used{-1, -1};  // (last_used_ms, conversation id)
};

// One precision's walk, from what the index found for it (PrefixIndex::Walk).
class Matcher {
 public:
  Matcher(Lookup& lookup, const detail::ModelRow& m, const std::string& precision, bool loadable_only,
          const ChunkHash& seed, const std::vector<ChunkHash>& chains, detail::PrefixIndex::Walk& walk)
      : lookup_(lookup), m_(m), precision_(precision), loadable_only_(loadable_only), walk_(walk) {
    const int64_t C = m_.chunk_tokens;
    ChunkHash before = seed;
    for (int64_t i = 0; i < walk.full; ++i) {
      steps_.push_back({i, i * C, C, before});
      before = chains[static_cast<size_t>(i)];
    }
    steps_.push_back({walk.full, walk.full * C, walk.k, before});
  }

  Found run(const int32_t* tokens) {
    if (loadable_only_) return longest_loadable(tokens);
    // 3. The most recently used conversation holding the matched prefix.
    const Step& last = steps_.back();
    for (int64_t k = last.len; last.base + k > 0;) {
      Found out;
      const Holder* h = most_recent(tokens, last, k);
      if (h) {
        out.match.id = h->name;
        out.match.tokens = last.base + k;
        out.match.loadable = std::min(out.match.tokens, h->first_evicted ? *h->first_evicted : INT64_MAX);
        out.used = {h->last_used_ms, h->id};
        return out;
      }
      // Not held after all (an inconsistent chunk_meta row): settle for less.
      if (k == 0) break;
      k = 0;
    }
    return Found();
  }

 private:
  // 4. The most recently used conversation that holds and can load the
  // longest prefix of the walk: from its last step back towards the start.
  Found longest_loadable(const int32_t* tokens) {
    for (size_t i = steps_.size(); i-- > 0;) {
      const Step& st = steps_[i];
      // A step held whole is the next step with none of its tokens: already tried.
      const int64_t k = i + 1 == steps_.size() ? st.len : st.len - 1;
      const int64_t lowest = st.base == 0 ? 1 : 0;
      if (k < lowest) continue;
      Found found;
      if (loadable_holder(tokens, st, k, found)) return found;  // usually the whole match loads
      // The largest k' in [lowest, k) some conversation can load; that is monotone in k'.
      int64_t lo = lowest - 1, hi = k;  // lo: assumed loadable, hi: not
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        (loadable_holder(tokens, st, mid, found) ? lo : hi) = mid;
      }
      if (lo >= lowest) return found;  // found was set by the last probe that succeeded, at lo
    }
    return Found();
  }

  // The most recently used conversation that can load the walk up to step st
  // and k tokens of it, in `found`; false when none can.
  bool loadable_holder(const int32_t* tokens, const Step& st, int64_t k, Found& found) {
    const Holder* h = most_recent(tokens, st, k);
    if (!h) return false;
    found.match.id = h->name;
    found.match.tokens = found.match.loadable = st.base + k;
    found.used = {h->last_used_ms, h->id};
    return true;
  }

  // Does holder h hold the walk up to step st and k tokens of it: its entry
  // at st.depth - 1 ends the walk's chain there, and (k > 0) its entries
  // from st.depth on start with region_?
  bool holds(const Holder& h, const Step& st, int64_t k) const {
    if (st.depth > 0 && !ends_chain(h, st.before)) return false;
    if (k == 0) return true;
    const detail::PrefixIndex::ListedTokens* covering = list_holding_region(h);
    // The index agrees with the authoritative token lists (chunks.tokens).
    return covering && region_.holds(covering->indexed);
  }

  // Does h's entry before the step end at chain hash `chain`? The index's
  // chain hash must say so, and the chunk's own key must confirm it: a store
  // from elsewhere may index a chunk under a chain hash its tokens do not make.
  static bool ends_chain(const Holder& h, const ChunkHash& chain) {
    return h.chain && h.chain->chain == chain && detail::key_matches(h.chain->key, h.chain->digest, chain);
  }

  // The list of h, from the step on, that holds region_'s last token, when
  // the own token lists of those entries start with region_; none otherwise.
  // A full chunk holds the region alone, else at most kMaxTailPieces pieces do.
  const detail::PrefixIndex::ListedTokens* list_holding_region(const Holder& h) const {
    std::vector<int32_t> held, t;
    for (const auto& entry : h.lists) {
      const std::string& json = entry.tokens_json;
      if (static_cast<int64_t>(json.size()) > detail::max_tokens_json_bytes(m_.chunk_tokens) ||
          !detail::parse_tokens_json(json.data(), json.size(), t))
        return nullptr;  // not a list a chunk holds: verify reports it
      held.insert(held.end(), t.begin(), t.end());
      if (static_cast<int64_t>(held.size()) < region_.k) continue;
      if (!std::equal(region_.tokens, region_.tokens + region_.k, held.begin())) return nullptr;
      return &entry;
    }
    return nullptr;
  }

  // The most recently used user of step st with k of its tokens that holds
  // it (and can load it, for match_loadable); null when none does. The
  // walk's own step comes with its first users read.
  const Holder* most_recent(const int32_t* tokens, const Step& st, int64_t k) {
    region_.set(tokens + st.base, k);
    detail::PrefixIndex::Step q;
    q.depth = st.depth;
    q.prev = st.depth == 0 ? nullptr : &st.before;
    q.region = region_;
    q.end = st.base + k;
    const int64_t per_read = lookup_.holders_per_read();
    int64_t skip = 0;
    if (!walk_read_ && st.depth == walk_.full && k == walk_.k) {
      page_ = std::move(walk_.first);
      walk_read_ = true;
    } else {
      page_ = lookup_.holders(precision_, q, skip, per_read);
    }
    for (;;) {
      for (const Holder& h : page_.holders) {
        if (!holds(h, st, k)) continue;
        if (loadable_only_ && h.first_evicted) continue;
        return &h;
      }
      if (!page_.more || page_.holders.empty()) return nullptr;
      skip += static_cast<int64_t>(page_.holders.size());
      page_ = lookup_.holders(precision_, q, skip, per_read);
    }
  }

  Lookup& lookup_;
  const detail::ModelRow& m_;
  std::string precision_;
  bool loadable_only_;
  detail::PrefixIndex::Walk& walk_;
  detail::TokenRegion region_;
  bool walk_read_ = false;   // walk_.first taken
  Holders page_;             // the users most_recent last read
  std::vector<Step> steps_;  // the walk: full chunks, then the tail's pieces
};

// Of the walks of a lookup, one per precision: the longest match wins, a
// tie goes to the most recently used conversation.
class BestMatch {
 public:
  void offer(const Found& r) {
    if (r.match.tokens == 0 || r.match.tokens < best_.match.tokens) return;
    if (r.match.tokens > best_.match.tokens || r.used > best_.used) best_ = r;
  }
  const PrefixMatch& best() const { return best_.match; }

 private:
  Found best_;
};

PrefixMatch find_prefix_in_call(Store::Impl& s, const ModelSignature& model, const int32_t* tokens, int64_t len,
                                bool loadable_only) REQUIRES(s.mu);

// One query, counted inside the call (once it returns the Store may be gone).
PrefixMatch find_prefix(Store::Impl& store, const ModelSignature& model, const int32_t* tokens, int64_t len,
                        bool loadable_only) {
  return detail::StoreCall::run(store, [&](Store::Impl& s) REQUIRES(s.mu) {
    const detail::LatencyTimer timer(s.counters().match_seconds);
    detail::StoreCounters::add(s.counters().match_queries, 1);
    const PrefixMatch found = find_prefix_in_call(s, model, tokens, len, loadable_only);
    if (found.tokens > 0) {
      detail::StoreCounters::add(s.counters().match_answers, 1);
      detail::StoreCounters::add(s.counters().match_tokens, static_cast<uint64_t>(found.tokens));
    }
    return found;
  });
}

PrefixMatch find_prefix_in_call(Store::Impl& s, const ModelSignature& model, const int32_t* tokens, int64_t len,
                                bool loadable_only) {
  model.validate();
  if (len < 0) throw Error(ErrorCode::kInvalidArgument, s.where() + ": match: negative length " + std::to_string(len));
  if (len > 0 && !tokens) throw Error(ErrorCode::kInvalidArgument, s.where() + ": match: tokens is null");
  if (len == 0) return PrefixMatch();
  const std::unique_ptr<Lookup> lookup = s.catalog().prefix_index().lookup(model.to_string(), s.where());
  if (!lookup->model_id() || lookup->precisions().empty()) return PrefixMatch();
  const detail::ModelRow m = s.model_by_id(*lookup->model_id());
  // Chunks of each precision the model's conversations are stored in
  // (f32, a lossy one) chain from their own seed: one walk per precision,
  // the longest match wins, a tie goes to the most recently used.
  std::vector<detail::PrefixIndex::Precision> precisions;
  std::vector<ChunkHash> seeds;
  for (const std::string& precision : lookup->precisions()) {
    seeds.push_back(s.chain_seed(m.text, precision));
    precisions.push_back({precision, prompt_chains(seeds.back(), tokens, len, m.chunk_tokens)});
  }
  std::vector<detail::PrefixIndex::Walk> walks =
      lookup->walks(m.chunk_tokens, precisions, tokens, len, lookup->holders_per_read());
  if (walks.size() != precisions.size())
    throw Error(ErrorCode::kInternal, "the prefix index answered " + std::to_string(walks.size()) + " walks for " +
                                          std::to_string(precisions.size()) + " precisions");
  BestMatch best;
  for (size_t i = 0; i < precisions.size(); ++i)
    best.offer(Matcher(*lookup, m, precisions[i].name, loadable_only, seeds[i], precisions[i].chains, walks[i])
                   .run(tokens));
  return best.best();
}

}  // namespace

PrefixMatch Store::match(const ModelSignature& model, const int32_t* tokens, int64_t len) {
  return find_prefix(*impl_, model, tokens, len, false);
}

PrefixMatch Store::match_loadable(const ModelSignature& model, const int32_t* tokens, int64_t len) {
  return find_prefix(*impl_, model, tokens, len, true);
}

}  // namespace colikv
