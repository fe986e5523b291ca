// Longest-prefix lookup (Store::match): which conversation of a model holds
// the longest prefix of a prompt, in time that does not grow with the number
// of conversations.
//
//  1. Full chunks: the prompt's chain hashes over whole chunks, each looked up
//     in chunk_meta's (model_id, chain_hash) index, until one is not stored. A
//     stored chain hash means some conversation holds exactly those tokens up
//     to there. Only token ids are compared: chunks stored under the same
//     chain hash with different content (schema 5 keeps them apart) all
//     match, and the conversation found loads its own values.
//  2. The next, partial region: among the chunks that follow the matched
//     prefix (chunk_meta: same model, precision and predecessor hash), the
//     largest k such that some chunk starts with the region's first k tokens.
//     Token lists are canonical JSON ("[1,2,3]"), so "starts with those k
//     tokens" is a string-prefix range of the index: a binary search over k of
//     O(log N) probes each.
//  3. Ties: the most recently used conversation holding that prefix. First the
//     few most recently used conversations are checked one by one (a shared
//     prefix is usually held by one of them), then an indexed join over the
//     conversations that use the matched chunk(s).
#include <sqlite3.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

#include "chunk_codec.h"
#include "colikv/store.h"
#include "sqlite_util.h"
#include "store_impl.h"

namespace colikv {

using detail::ChunkHash;
using detail::SqlTransaction;
using detail::with_context;

namespace {

const uint8_t kNoPrev = 0;  // zero-length blob: the predecessor of a chunk at position 0

// The most recently used conversations examined one by one before falling
// back to an indexed join over every conversation holding the prefix.
constexpr int kRecentProbe = 32;

struct Region {
  // JSON of the region's first k tokens: "[t0,...,tk-1," (more follow) and
  // "[t0,...,tk-1]" (the chunk ends there).
  std::string more, exact, more_end;  // more_end: the first string after every "more..." one
  void set(const int32_t* t, int64_t k) {
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
};

// The lookup's statements, prepared once per Store (Impl::match_cache).
struct Statements {
  explicit Statements(SQLite::Database& db)
      : model(db, "SELECT model_id FROM models WHERE signature = ?"),
        by_chain(db, "SELECT 1 FROM chunk_meta WHERE model_id = ? AND chain_hash = ? LIMIT 1"),
        gone(db,
             "SELECT cc.seq FROM conversation_chunks cc JOIN chunks ch INDEXED BY chunks_evicted "
             "ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = ? AND cc.seq < ? AND ch.payload IS NULL "
             "ORDER BY cc.seq LIMIT 1"),
        range(db,
              "SELECT 1 FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
              "AND tokens >= ?4 AND tokens < ?5 LIMIT 1"),
        exact(db,
              "SELECT 1 FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
              "AND tokens = ?4 LIMIT 1"),
        at_seq(db, "SELECT chunk_id FROM conversation_chunks WHERE conversation_id = ? AND seq = ?"),
        chain_at_seq(db,
                     "SELECT k.chain_hash FROM conversation_chunks cc JOIN chunk_meta k ON k.chunk_id = cc.chunk_id "
                     "WHERE cc.conversation_id = ? AND cc.seq = ?"),
        meta(db,
             "SELECT tokens FROM chunk_meta WHERE chunk_id = ?1 AND model_id = ?2 AND precision = ?3 "
             "AND prev_hash = ?4"),
        chunk_tokens(db, "SELECT tokens FROM chunks WHERE chunk_id = ?"),
        recent(db, "SELECT conversation_id, name FROM conversations ORDER BY last_used_ms DESC, conversation_id DESC LIMIT ?"),
        next_precision(db, "SELECT precision FROM chunk_meta WHERE model_id = ? AND precision > ? ORDER BY precision LIMIT 1"),
        last_used(db, "SELECT last_used_ms, conversation_id FROM conversations WHERE name = ?"),
        users_of_chain(db,
                       "SELECT c.conversation_id, c.name FROM chunk_meta k "
                       "JOIN conversation_chunks cc ON cc.chunk_id = k.chunk_id AND cc.seq = ?3 "
                       "JOIN conversations c ON c.conversation_id = cc.conversation_id "
                       "WHERE k.model_id = ?1 AND k.chain_hash = ?2 "
                       "ORDER BY c.last_used_ms DESC, c.conversation_id DESC"),
        users_of_prefix(db,
                        "SELECT c.conversation_id, c.name FROM ("
                        "  SELECT chunk_id FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
                        "    AND tokens >= ?4 AND tokens < ?5 "
                        "  UNION ALL "
                        "  SELECT chunk_id FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
                        "    AND tokens = ?7) k "
                        "JOIN conversation_chunks cc ON cc.chunk_id = k.chunk_id AND cc.seq = ?6 "
                        "JOIN conversations c ON c.conversation_id = cc.conversation_id "
                        "ORDER BY c.last_used_ms DESC, c.conversation_id DESC") {}
  SQLite::Statement model, by_chain, gone, range, exact, at_seq, chain_at_seq, meta, chunk_tokens, recent,
      next_precision, last_used, users_of_chain, users_of_prefix;
};

// Resets a statement however the scope is left.
struct Reset {
  SQLite::Statement& q;
  ~Reset() {
    try {
      q.reset();
    } catch (...) {
    }
  }
};

class Matcher {
 public:
  Matcher(Store::Impl& s, Statements& st, const detail::ModelRow& m, const std::string& precision)
      : s_(s),
        m_(m),
        precision_(precision),
        by_chain_(st.by_chain),
        gone_(st.gone),
        range_(st.range),
        exact_(st.exact),
        at_seq_(st.at_seq),
        chain_at_seq_(st.chain_at_seq),
        meta_(st.meta),
        chunk_tokens_(st.chunk_tokens),
        recent_(st.recent),
        users_of_chain_(st.users_of_chain),
        users_of_prefix_(st.users_of_prefix) {}

  PrefixMatch run(const int32_t* tokens, int64_t len) {
    const int64_t C = m_.chunk_tokens;
    PrefixMatch out;
    // 1. Whole chunks, by hash.
    chain_ = detail::chain_seed(m_.text, precision_);
    int64_t full = 0;
    while ((full + 1) * C <= len) {
      ChunkHash h = detail::chain_next(chain_, tokens + full * C, C);
      Reset rs{by_chain_};
      by_chain_.bind(1, m_.id);
      by_chain_.bind(2, h.data(), static_cast<int>(h.size()));
      if (!by_chain_.executeStep()) break;
      chain_ = h;
      ++full;
    }
    // 2. The region after them: the most leading tokens some following chunk holds.
    const int64_t base = full * C;
    const int64_t r = std::min(len, base + C) - base;
    int64_t k = 0;
    if (r > 0) {
      if (has(tokens + base, full, r)) {
        k = r;
      } else {
        int64_t lo = 0, hi = r;  // has(lo) (k = 0 is trivially held), !has(hi)
        while (hi - lo > 1) {
          const int64_t mid = lo + (hi - lo) / 2;
          (has(tokens + base, full, mid) ? lo : hi) = mid;
        }
        k = lo;
      }
    }
    // 3. The most recently used conversation holding tokens [0, base + k).
    while (base + k > 0) {
      region_.set(tokens + base, k);
      int64_t conv = -1;
      std::string id = most_recent(full, k, conv);
      if (!id.empty()) {
        out.id = id;
        out.tokens = base + k;
        out.loadable = std::min(out.tokens, first_evicted(conv, (out.tokens + C - 1) / C));
        return out;
      }
      // Not held after all (an inconsistent chunk_meta row): settle for less.
      if (k == 0) break;
      k = 0;
    }
    return out;
  }

 private:
  // The first position of conversation conv's first n chunks whose KV data
  // was evicted; INT64_MAX when none was.
  int64_t first_evicted(int64_t conv, int64_t n) {
    Reset rs{gone_};
    gone_.bind(1, conv);
    gone_.bind(2, n);
    return gone_.executeStep() ? gone_.getColumn(0).getInt64() * m_.chunk_tokens : INT64_MAX;
  }

  void bind_prev(SQLite::Statement& q, int index, int64_t full) {
    if (full == 0)
      q.bind(index, &kNoPrev, 0);
    else
      q.bind(index, chain_.data(), static_cast<int>(chain_.size()));
  }

  // Does a chunk following the matched full chunks start with region[0, k)?
  bool has(const int32_t* region, int64_t full, int64_t k) {
    region_.set(region, k);
    for (SQLite::Statement* q : {&range_, &exact_}) {
      Reset rs{*q};
      q->bind(1, m_.id);
      q->bind(2, precision_);
      bind_prev(*q, 3, full);
      q->bind(4, q == &range_ ? region_.more : region_.exact);
      if (q == &range_) q->bind(5, region_.more_end);
      if (q->executeStep()) return true;
    }
    return false;
  }

  // Does conversation conv hold the prefix: its chunk at `full - 1` is the last
  // full chunk matched, and (k > 0) its chunk at `full` starts with region_?
  bool holds(int64_t conv, int64_t full, int64_t k) {
    auto chunk_of = [&](int64_t seq) -> int64_t {
      Reset rs{at_seq_};
      at_seq_.bind(1, conv);
      at_seq_.bind(2, seq);
      return at_seq_.executeStep() ? at_seq_.getColumn(0).getInt64() : -1;
    };
    if (full > 0) {  // its chunk at full - 1 ends the matched chain
      Reset rs{chain_at_seq_};
      chain_at_seq_.bind(1, conv);
      chain_at_seq_.bind(2, full - 1);
      if (!chain_at_seq_.executeStep()) return false;
      SQLite::Column h = chain_at_seq_.getColumn(0);
      if (h.getBytes() != static_cast<int>(chain_.size()) || std::memcmp(h.getBlob(), chain_.data(), chain_.size()) != 0)
        return false;
    }
    if (k == 0) return true;
    const int64_t chunk_at = chunk_of(full);
    if (chunk_at < 0) return false;
    {
      Reset rs{meta_};
      meta_.bind(1, chunk_at);
      meta_.bind(2, m_.id);
      meta_.bind(3, precision_);
      bind_prev(meta_, 4, full);
      if (!meta_.executeStep() || !region_.holds(meta_.getColumn(0).getString())) return false;
    }
    // The authoritative token list (chunks.tokens) agrees too.
    Reset rs{chunk_tokens_};
    chunk_tokens_.bind(1, chunk_at);
    return chunk_tokens_.executeStep() && region_.holds(chunk_tokens_.getColumn(0).getString());
  }

  std::string most_recent(int64_t full, int64_t k, int64_t& conv) {
    {
      Reset rs{recent_};
      recent_.bind(1, kRecentProbe);
      while (recent_.executeStep()) {
        conv = recent_.getColumn(0).getInt64();
        if (holds(conv, full, k)) return recent_.getColumn(1).getString();
      }
    }
    // Every conversation that uses a matching chunk, most recently used first.
    SQLite::Statement& q = k == 0 ? users_of_chain_ : users_of_prefix_;
    Reset rs{q};
    q.clearBindings();
    if (k == 0) {
      q.bind(1, m_.id);
      q.bind(2, chain_.data(), static_cast<int>(chain_.size()));
      q.bind(3, full - 1);
    } else {
      q.bind(1, m_.id);
      q.bind(2, precision_);
      bind_prev(q, 3, full);
      q.bind(4, region_.more);
      q.bind(5, region_.more_end);
      q.bind(6, full);
      q.bind(7, region_.exact);
    }
    while (q.executeStep()) {
      conv = q.getColumn(0).getInt64();
      if (holds(conv, full, k)) return q.getColumn(1).getString();
    }
    return "";
  }

  Store::Impl& s_;
  const detail::ModelRow& m_;
  std::string precision_;
  SQLite::Statement &by_chain_, &gone_, &range_, &exact_, &at_seq_, &chain_at_seq_, &meta_, &chunk_tokens_, &recent_,
      &users_of_chain_, &users_of_prefix_;
  ChunkHash chain_{};
  Region region_;
};

}  // namespace

PrefixMatch Store::match(const ModelSignature& model, const int32_t* tokens, int64_t len) {
  detail::StoreCall call(*impl_);
  Impl& s = *impl_;
  model.validate();
  if (len < 0) throw Error(ErrorCode::kInvalidArgument, s.where() + ": match: negative length " + std::to_string(len));
  if (len > 0 && !tokens) throw Error(ErrorCode::kInvalidArgument, s.where() + ": match: tokens is null");
  if (len == 0) return PrefixMatch();
  SqlTransaction snapshot(s.db, s.where(), SqlTransaction::kRead);
  return with_context(s.where() + ": match", [&] {
    if (!s.match_cache) s.match_cache = std::make_shared<Statements>(s.db);
    Statements& st = *static_cast<Statements*>(s.match_cache.get());
    int64_t model_id = 0;
    {
      Reset rs{st.model};
      st.model.bind(1, model.to_string());
      if (!st.model.executeStep()) return PrefixMatch();
      model_id = st.model.getColumn(0).getInt64();
    }
    const detail::ModelRow m = s.model_by_id(model_id);
    // Chunks of each precision the model's conversations are stored in
    // (f32, a lossy one) chain from their own seed: one walk per precision,
    // the longest match wins, a tie goes to the most recently used.
    PrefixMatch best;
    std::pair<int64_t, int64_t> best_used{-1, -1};
    std::string precision;
    for (;;) {
      {
        Reset rs{st.next_precision};
        st.next_precision.bind(1, model_id);
        st.next_precision.bind(2, precision);
        if (!st.next_precision.executeStep()) break;
        precision = st.next_precision.getColumn(0).getString();
      }
      Matcher matcher(s, st, m, precision);
      PrefixMatch r = matcher.run(tokens, len);
      if (r.tokens == 0 || r.tokens < best.tokens) continue;
      Reset rs{st.last_used};
      st.last_used.bind(1, r.id);
      std::pair<int64_t, int64_t> used{-1, -1};
      if (st.last_used.executeStep()) used = {st.last_used.getColumn(0).getInt64(), st.last_used.getColumn(1).getInt64()};
      if (r.tokens > best.tokens || used > best_used) {
        best = r;
        best_used = used;
      }
    }
    return best;
  });
}

}  // namespace colikv
