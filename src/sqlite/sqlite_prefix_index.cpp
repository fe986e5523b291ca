// The prefix lookup's queries (see prefix_match.cpp for the algorithm).
#include "sqlite/sqlite_prefix_index.h"

#include <algorithm>
#include <utility>

#include "core/chunk_layout.h"
#include "sqlite/sqlite_util.h"

namespace colikv {
namespace detail {

const char* const kFirstEvictedSql =
    "SELECT ch.first_pos FROM conversation_chunks cc JOIN chunks ch INDEXED BY chunks_evicted "
    "ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = ? AND ch.first_pos < ? AND ch.payload IS NULL "
    "ORDER BY cc.seq LIMIT 1";

namespace {

void bind_hash(Query& q, int index, const ChunkHash& h) {
  q.bind(index, h.data(), static_cast<int>(h.size()));
}

// A lookup in one read transaction: every answer is one snapshot's.
class SqliteLookup : public PrefixIndex::Lookup {
 public:
  SqliteLookup(SqlitePrefixIndex& index, std::unique_ptr<Catalog::Transaction> snapshot,
               std::optional<int64_t> model_id)
      : index_(index), snapshot_(std::move(snapshot)), model_id_(model_id) {
    if (!model_id_) return;
    std::string precision;
    while (std::optional<std::string> next = index_.next_precision(*model_id_, precision))
      precisions_.push_back(precision = *next);
  }
  std::optional<int64_t> model_id() const override { return model_id_; }
  const std::vector<std::string>& precisions() const override { return precisions_; }

  std::vector<PrefixIndex::Walk> walks(int64_t chunk_tokens, const std::vector<PrefixIndex::Precision>& precisions,
                                       const int32_t* tokens, int64_t len, int64_t limit) override {
    std::vector<PrefixIndex::Walk> out;
    if (!model_id_) return std::vector<PrefixIndex::Walk>(precisions.size());
    for (const PrefixIndex::Precision& p : precisions) {
      PrefixIndex::Walk w;
      while (w.full < static_cast<int64_t>(p.chains.size()) &&
             index_.chain_stored(*model_id_, p.chains[static_cast<size_t>(w.full)]))
        ++w.full;
      PrefixIndex::Step step;
      step.depth = w.full;
      step.prev = w.full == 0 ? nullptr : &p.chains[static_cast<size_t>(w.full - 1)];
      const int64_t base = w.full * chunk_tokens;
      w.k = index_.longest_follower(*model_id_, p.name, step.prev, tokens + base,
                                    std::min(len - base, chunk_tokens));
      step.region.set(tokens + base, w.k);
      step.end = base + w.k;
      if (w.k > 0 || w.full > 0) w.first = index_.holders(*model_id_, p.name, step, 0, limit);
      out.push_back(std::move(w));
    }
    return out;
  }

  PrefixIndex::Holders holders(const std::string& precision, const PrefixIndex::Step& step, int64_t skip,
                               int64_t limit) override {
    if (!model_id_) return PrefixIndex::Holders();
    return index_.holders(*model_id_, precision, step, skip, limit);
  }

  // A local query each: the first holder usually settles the lookup.
  int64_t holders_per_read() const override { return 1; }

 private:
  SqlitePrefixIndex& index_;
  std::unique_ptr<Catalog::Transaction> snapshot_;
  std::optional<int64_t> model_id_;
  std::vector<std::string> precisions_;
};

}  // namespace

void bind_prev(Query& q, int index, const ChunkHash* prev, const std::string& anchor) {
  if (prev)
    bind_hash(q, index, *prev);
  else
    q.bind(index, anchor.data(), static_cast<int>(anchor.size()));  // a blob, zero-length or not
}

Query SqlitePrefixIndex::cached(std::string_view sql) { return Query(cache_, sql, catalog_.errors()); }

std::unique_ptr<PrefixIndex::Lookup> SqlitePrefixIndex::lookup(const std::string& signature, const std::string& what) {
  auto snapshot = catalog_.begin(Catalog::Access::kRead, what);
  const std::optional<int64_t> model_id = catalog_.find_model_id(signature);
  return std::make_unique<SqliteLookup>(*this, std::move(snapshot), model_id);
}

std::optional<std::string> SqlitePrefixIndex::next_precision(int64_t model_id, const std::string& after) {
  auto q = cached("SELECT precision FROM chunk_meta WHERE model_id = ? AND precision > ? ORDER BY precision LIMIT 1");
  q.bind(1, model_id);
  q.bind(2, after);
  if (!q.executeStep()) return std::nullopt;
  return q.getColumn(0).getString();
}

bool SqlitePrefixIndex::chain_stored(int64_t model_id, const ChunkHash& chain) {
  auto q = cached("SELECT 1 FROM chunk_meta WHERE model_id = ? AND chain_hash = ? LIMIT 1");
  q.bind(1, model_id);
  bind_hash(q, 2, chain);
  return q.executeStep();
}

// Does a chunk after prev start with the region: its token list is the
// region's (exact) or continues it (in [more, more_end))?
bool SqlitePrefixIndex::follows(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                const TokenRegion& region) {
  auto in_range = cached(
      "SELECT 1 FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
      "AND tokens >= ?4 AND tokens < ?5 LIMIT 1");
  in_range.bind(1, model_id);
  in_range.bind(2, precision);
  bind_prev(in_range, 3, prev, anchor_);
  in_range.bind(4, region.more);
  in_range.bind(5, region.more_end);
  if (in_range.executeStep()) return true;
  auto equal = cached(
      "SELECT 1 FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
      "AND tokens = ?4 LIMIT 1");
  equal.bind(1, model_id);
  equal.bind(2, precision);
  bind_prev(equal, 3, prev, anchor_);
  equal.bind(4, region.exact);
  return equal.executeStep();
}

// A binary search over k, each probe an indexed range of token lists.
int64_t SqlitePrefixIndex::longest_follower(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                            const int32_t* region, int64_t r) {
  TokenRegion probe;
  const auto has = [&](int64_t k) {
    probe.set(region, k);
    return follows(model_id, precision, prev, probe);
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

std::optional<PrefixIndex::ChainEntry> SqlitePrefixIndex::chain_at(int64_t conversation_id, int64_t seq) {
  auto q = cached(
      "SELECT k.chain_hash, ch.hash, k.digest FROM conversation_chunks cc JOIN chunk_meta k ON k.chunk_id = cc.chunk_id "
      "JOIN chunks ch ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = ? AND cc.seq = ?");
  q.bind(1, conversation_id);
  q.bind(2, seq);
  if (!q.executeStep()) return std::nullopt;
  // All zero, which no chain hash is, when not 32 bytes.
  return ChainEntry{blob_to_hash(q.getColumn(0)), blob_to_hash(q.getColumn(1)), digest_column(q.getColumn(2))};
}

std::vector<PrefixIndex::ListedTokens> SqlitePrefixIndex::lists_from(int64_t conversation_id, int64_t model_id,
                                                                    const std::string& precision,
                                                                    const Step& step) {
  auto q = cached(
      "SELECT cc.chunk_id, ch.tokens, km.tokens FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
      "LEFT JOIN chunk_meta km ON km.chunk_id = cc.chunk_id AND km.model_id = ?3 AND km.precision = ?4 "
      "AND km.prev_hash = ?5 WHERE cc.conversation_id = ?1 AND cc.seq >= ?2 ORDER BY cc.seq LIMIT ?6");
  q.bind(1, conversation_id);
  q.bind(2, step.depth);
  q.bind(3, model_id);
  q.bind(4, precision);
  bind_prev(q, 5, step.prev, anchor_);
  q.bind(6, kMaxTailPieces);
  std::vector<ListedTokens> out;
  int64_t held = 0;
  while (held < step.region.k && q.executeStep()) {
    ListedTokens l{q.getColumn(0).getInt64(), q.getColumn(1).getString(), std::nullopt};
    if (!q.getColumn(2).isNull()) l.indexed = q.getColumn(2).getString();
    held += listed_token_count(l.tokens_json);
    out.push_back(std::move(l));
  }
  return out;
}

std::optional<int64_t> SqlitePrefixIndex::first_evicted_pos(int64_t conversation_id, int64_t end_pos) {
  auto q = cached(kFirstEvictedSql);
  q.bind(1, conversation_id);
  q.bind(2, end_pos);
  if (!q.executeStep()) return std::nullopt;
  return q.getColumn(0).getInt64();
}

// The most recently used conversations looked at one by one before the join
// over a step's users (recent_users).
constexpr int64_t kRecentProbe = 32;

// Is conversation_id a user of the step (PrefixIndex::Step)?
bool SqlitePrefixIndex::uses(int64_t conversation_id, int64_t model_id, const std::string& precision,
                             const Step& step) {
  auto q = cached(step.region.k > 0
                      ? "SELECT 1 FROM conversation_chunks cc JOIN chunk_meta km ON km.chunk_id = cc.chunk_id "
                        "WHERE cc.conversation_id = ?1 AND cc.seq >= ?2 AND km.model_id = ?3 AND km.precision = ?4 "
                        "AND km.prev_hash = ?5 AND ((km.tokens >= ?6 AND km.tokens < ?7) OR km.tokens = ?8) LIMIT 1"
                      : "SELECT 1 FROM conversation_chunks cc JOIN chunk_meta km ON km.chunk_id = cc.chunk_id "
                        "WHERE cc.conversation_id = ?1 AND cc.seq = ?2 - 1 AND km.model_id = ?3 "
                        "AND km.chain_hash = ?5 LIMIT 1");
  q.bind(1, conversation_id);
  q.bind(2, step.depth);
  q.bind(3, model_id);
  q.bind(4, precision);
  bind_prev(q, 5, step.prev, anchor_);
  if (step.region.k > 0) {
    q.bind(6, step.region.more);
    q.bind(7, step.region.more_end);
    q.bind(8, step.region.exact);
  }
  return q.executeStep();
}

// The first `want` users of a step, when the most recently used
// conversations settle them: a prefix many conversations share (a system
// prompt) has many users, which the join reads and sorts in full, while one
// of the most recent few usually holds it. The users among the most recent
// conversations are the first users overall, in the same order; none when
// those are not enough to tell.
std::optional<std::vector<PrefixIndex::Holder>> SqlitePrefixIndex::recent_users(int64_t model_id,
                                                                                const std::string& precision,
                                                                                const Step& step, int64_t want) {
  if (want > kRecentProbe) return std::nullopt;
  std::vector<Holder> recent;
  {
    auto q = cached(
        "SELECT conversation_id, name, last_used_ms FROM conversations WHERE tenant_id = ? "
        "ORDER BY last_used_ms DESC, conversation_id DESC LIMIT ?");
    q.bind(1, tenant_id_);
    q.bind(2, kRecentProbe);
    while (q.executeStep()) {
      Holder h;
      h.id = q.getColumn(0).getInt64();
      h.name = q.getColumn(1).getString();
      h.last_used_ms = q.getColumn(2).getInt64();
      recent.push_back(std::move(h));
    }
  }
  std::vector<Holder> users;
  for (Holder& h : recent) {
    if (!uses(h.id, model_id, precision, step)) continue;
    users.push_back(std::move(h));
    if (static_cast<int64_t>(users.size()) == want) return users;
  }
  if (static_cast<int64_t>(recent.size()) < kRecentProbe) return users;  // every conversation looked at
  return std::nullopt;
}

PrefixIndex::Holders SqlitePrefixIndex::holders(int64_t model_id, const std::string& precision, const Step& step,
                                                int64_t skip, int64_t limit) {
  Holders out;
  if (step.region.k == 0 && (step.depth == 0 || !step.prev)) return out;  // no step
  // One more than asked: whether more follow.
  if (std::optional<std::vector<Holder>> users = recent_users(model_id, precision, step, skip + limit + 1)) {
    for (int64_t i = skip; i < static_cast<int64_t>(users->size()); ++i) {
      if (static_cast<int64_t>(out.holders.size()) == limit) {
        out.more = true;
        break;
      }
      out.holders.push_back(std::move((*users)[static_cast<size_t>(i)]));
    }
  } else {
    // The parameters are numbered alike; those one query does not use are
    // bound all the same.
    auto q = cached(step.region.k > 0
                        ? "SELECT DISTINCT c.conversation_id, c.name, c.last_used_ms FROM ("
                          "  SELECT chunk_id FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
                          "    AND tokens >= ?4 AND tokens < ?5 "
                          "  UNION ALL "
                          "  SELECT chunk_id FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
                          "    AND tokens = ?7) k "
                          "JOIN conversation_chunks cc ON cc.chunk_id = k.chunk_id AND cc.seq >= ?6 "
                          "JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = ?8 "
                          "ORDER BY c.last_used_ms DESC, c.conversation_id DESC LIMIT ?9 OFFSET ?10"
                        : "SELECT DISTINCT c.conversation_id, c.name, c.last_used_ms FROM chunk_meta k "
                          "JOIN conversation_chunks cc ON cc.chunk_id = k.chunk_id AND cc.seq = ?6 - 1 "
                          "JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = ?8 "
                          "WHERE k.model_id = ?1 AND k.chain_hash = ?3 "
                          "ORDER BY c.last_used_ms DESC, c.conversation_id DESC LIMIT ?9 OFFSET ?10");
    q.bind(1, model_id);
    q.bind(2, precision);
    bind_prev(q, 3, step.prev, anchor_);
    q.bind(4, step.region.more);
    q.bind(5, step.region.more_end);
    q.bind(6, step.depth);
    q.bind(7, step.region.exact);
    q.bind(8, tenant_id_);
    q.bind(9, limit + 1);
    q.bind(10, skip);
    while (q.executeStep()) {
      if (static_cast<int64_t>(out.holders.size()) == limit) {
        out.more = true;
        break;
      }
      Holder h;
      h.id = q.getColumn(0).getInt64();
      h.name = q.getColumn(1).getString();
      h.last_used_ms = q.getColumn(2).getInt64();
      out.holders.push_back(std::move(h));
    }
  }
  for (Holder& h : out.holders) {
    if (step.depth > 0) h.chain = chain_at(h.id, step.depth - 1);
    if (step.region.k > 0) h.lists = lists_from(h.id, model_id, precision, step);
    h.first_evicted = first_evicted_pos(h.id, step.end);
  }
  return out;
}

}  // namespace detail
}  // namespace colikv
