// The prefix index's statements on a PgCatalog's connection (see pg_prefix_index.h).
#include "postgres/pg_prefix_index.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/chunk_layout.h"

namespace colikv {
namespace detail {

namespace {

// The model of the signature in $1 (tenant $2's) and the precisions its
// chunks are stored in, skipping from one to the next along
// chunk_meta_by_prev: one row per precision then a last whose precision is
// null, each with the model's id (null: no such model) and the precision's
// place. In the column's own collation, which that index is ordered by (a
// bytewise order cannot use it and reads every chunk of the model): the
// set is the same, and a lookup's answer does not depend on the order of its
// walks; they are sorted bytewise after.
const char* const kPrecisionsSql =
    "WITH RECURSIVE m AS (SELECT model_id FROM models WHERE signature = $1::text AND tenant_id = $2::bigint), "
    "p(precision, n) AS ("
    "  SELECT (SELECT precision FROM chunk_meta WHERE model_id = (SELECT model_id FROM m) "
    "    AND precision > ''::text ORDER BY precision LIMIT 1), 0::bigint "
    "  UNION ALL "
    "  SELECT (SELECT k.precision FROM chunk_meta k WHERE k.model_id = (SELECT model_id FROM m) "
    "    AND k.precision > p.precision ORDER BY k.precision LIMIT 1), p.n + 1 "
    "  FROM p WHERE p.precision IS NOT NULL) "
    "SELECT (SELECT model_id FROM m)::bigint, p.precision, p.n FROM p ORDER BY p.n";

// The index chunk_meta_by_prev holds left(tokens, 2000) (a btree entry is at
// most ~2.7 KB): each probe bounds that prefix, which the index answers, then
// compares the whole list. For any strings, tokens in [from, to) implies
// left(tokens, L) in [left(from, L), left(to, L)], so the bound loses nothing.
std::string tokens_in_range(const std::string& from, const std::string& to) {
  return "left(tokens, 2000) >= left(" + from + ", 2000) AND left(tokens, 2000) <= left(" + to +
         ", 2000) AND tokens >= " + from + " AND tokens < " + to;
}
std::string tokens_equal(const std::string& exact) {
  return "left(tokens, 2000) = left(" + exact + ", 2000) AND tokens = " + exact;
}

// Does a chunk after `prev` (precision P) start with the tokens whose JSON
// opens as `open` ("[t0,...,tk-1", k >= 1)? Its list then goes on ("...,":
// the range up to "...-", ',' + 1) or ends there ("...]"), as TokenRegion.
std::string follows_sql(const std::string& P, const std::string& prev, const std::string& open) {
  const std::string after = "model_id = $1::bigint AND precision = " + P + "::text AND prev_hash = " + prev + " AND ";
  return "(EXISTS (SELECT 1 FROM chunk_meta WHERE " + after +
         tokens_in_range("(" + open + " || ',')", "(" + open + " || '-')") +
         ") OR EXISTS (SELECT 1 FROM chunk_meta WHERE " + after + tokens_equal("(" + open + " || ']')") + "))";
}

std::string region_open_sql(const std::string& region, const std::string& k) {
  return "('[' || array_to_string((" + region + ")[1:" + k + "], ','))";
}

// The holders of the step in CTE g (nfull: its depth, prev, k, o: the
// region's JSON opening, e: its end) of precision P, as block `block`'s
// rows: kind 0 the step (whether more users follow, its depth and k), kind
// 1 a holder (rank, id, name, last_used_ms, first evicted position before
// e, whether its entry nfull - 1 exists, and that entry's chain hash, key
// and digest), kind 2 a token list of a holder from entry nfull on (rank,
// id, seq, chunk_id, its tokens and its indexed tokens), cut after the list
// that brings the region's k tokens by its commas (listed_token_count).
// The users from the `off`-th on, $6 of them; $1 the model, $5 the tenant,
// $7 token lists at most.
std::string holders_sql(int block, const std::string& P, const std::string& off) {
  const std::string I = std::to_string(block) + "::int";
  const std::string after = "model_id = $1::bigint AND precision = " + P + "::text AND prev_hash = g.prev AND ";
  return "u AS (SELECT DISTINCT id, name, used FROM ("
         "  SELECT c.conversation_id AS id, c.name, c.last_used_ms AS used FROM g "
         "  CROSS JOIN LATERAL ("
         "    SELECT chunk_id FROM chunk_meta WHERE " + after + tokens_in_range("(g.o || ',')", "(g.o || '-')") +
         "    UNION ALL "
         "    SELECT chunk_id FROM chunk_meta WHERE " + after + tokens_equal("(g.o || ']')") + ") km "
         "  JOIN conversation_chunks cc ON cc.chunk_id = km.chunk_id AND cc.seq >= g.nfull "
         "  JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = $5::bigint "
         "  WHERE g.k > 0 "
         "  UNION ALL "
         "  SELECT c.conversation_id, c.name, c.last_used_ms FROM g "
         "  JOIN chunk_meta km ON km.model_id = $1::bigint AND km.chain_hash = g.prev "
         "  JOIN conversation_chunks cc ON cc.chunk_id = km.chunk_id AND cc.seq = g.nfull - 1 "
         "  JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = $5::bigint "
         "  WHERE g.k = 0 AND g.nfull > 0) a "
         "  ORDER BY used DESC, id DESC OFFSET " + off + " LIMIT $6::bigint + 1), "
         "v AS (SELECT id, name, used, row_number() OVER (ORDER BY used DESC, id DESC) AS rank FROM u), "
         "d AS (SELECT v.id, v.name, v.used, v.rank, g.nfull, g.prev, g.k, g.e FROM v, g WHERE v.rank <= $6::bigint) "
         "SELECT " + I + ", 0::int, ((SELECT count(*) FROM v) > $6::bigint)::int::bigint, NULL::bigint, NULL::text, "
         "  NULL::bigint, g.nfull::bigint, g.k::bigint, NULL::bigint, NULL::bytea, NULL::bytea, NULL::bytea, "
         "  NULL::text, NULL::text FROM g "
         "UNION ALL "
         "SELECT " + I + ", 1, d.rank, d.id, d.name, d.used, ev.first_pos, ca.found, NULL, "
         "  ca.chain_hash, ca.hash, ca.digest, NULL, NULL FROM d "
         "  LEFT JOIN LATERAL (SELECT 1::bigint AS found, k.chain_hash, ch.hash, k.digest FROM conversation_chunks cc "
         "    JOIN chunk_meta k ON k.chunk_id = cc.chunk_id JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
         "    WHERE cc.conversation_id = d.id AND cc.seq = d.nfull - 1 LIMIT 1) ca ON true "
         "  LEFT JOIN LATERAL (SELECT ch.first_pos FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
         "    WHERE cc.conversation_id = d.id AND ch.first_pos < d.e AND ch.payload IS NULL "
         "    ORDER BY cc.seq LIMIT 1) ev ON true "
         "UNION ALL "
         "SELECT " + I + ", 2, d.rank, d.id, NULL, NULL, pc.seq, pc.chunk_id, NULL, NULL, NULL, NULL, "
         "  pc.tokens, pc.indexed FROM d "
         // The indexed list by the chunk's key alone, then the rest of the
         // index row's conditions: with them in the WHERE the planner may
         // take chunk_meta_by_prev and read every chunk after prev.
         "  CROSS JOIN LATERAL (SELECT x.seq, x.chunk_id, x.tokens, (SELECT CASE WHEN km.model_id = $1::bigint "
         "      AND km.precision = " + P + "::text AND km.prev_hash = d.prev THEN km.tokens END FROM chunk_meta km "
         "      WHERE km.chunk_id = x.chunk_id) AS indexed FROM ("
         "    SELECT y.seq, y.chunk_id, y.tokens, coalesce(sum(y.est) OVER ("
         "        ORDER BY y.seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before FROM ("
         "      SELECT cc.seq, cc.chunk_id, ch.tokens, CASE WHEN ch.tokens = '[]' THEN 0 "
         "        ELSE length(ch.tokens) - length(replace(ch.tokens, ',', '')) + 1 END AS est "
         "      FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
         "      WHERE cc.conversation_id = d.id AND cc.seq >= d.nfull ORDER BY cc.seq LIMIT $7::bigint) y) x "
         "    WHERE x.before < d.k) pc "
         "  WHERE d.k > 0";
}

// One precision's walk (block `block`, precision P, chain hashes H), then
// its first holders (holders_sql). $2 the prompt, $3 chunk tokens, $4 the
// tenant's anchor.
std::string walk_sql(int block, const std::string& P, const std::string& H) {
  return "(WITH RECURSIVE "
         "w AS (SELECT coalesce(min(i), length(" + H + "::bytea) / 32)::int AS nfull "
         "  FROM generate_series(0, length(" + H + "::bytea) / 32 - 1) AS i WHERE NOT EXISTS (SELECT 1 FROM chunk_meta "
         "  WHERE model_id = $1::bigint AND chain_hash = substring(" + H + "::bytea FROM i * 32 + 1 FOR 32))), "
         "t AS (SELECT nfull, CASE WHEN nfull = 0 THEN $4::bytea "
         "    ELSE substring(" + H + "::bytea FROM (nfull - 1) * 32 + 1 FOR 32) END AS prev, "
         "  ($2::int[])[nfull * $3::int + 1 : nfull * $3::int + r] AS region, r "
         "  FROM (SELECT nfull, least(cardinality($2::int[]) - nfull * $3::int, $3::int) AS r FROM w) x), "
         // The binary search over k: the whole region first, then halving
         // [lo, hi) with a follower at lo, none at hi.
         "s(lo, hi) AS (SELECT 0, (SELECT r FROM t) "
         "  UNION ALL "
         "  SELECT CASE WHEN y.h THEN y.m ELSE y.lo END, CASE WHEN y.h THEN y.hi ELSE y.m END FROM ("
         "    SELECT x.lo, x.hi, x.m, " + follows_sql(P, "t.prev", region_open_sql("t.region", "x.m")) + " AS h FROM ("
         "      SELECT lo, hi, lo + (hi - lo) / 2 AS m FROM s WHERE hi - lo > 1) x, t) y), "
         "f AS (SELECT t.nfull, t.prev, t.region, CASE WHEN t.r <= 0 THEN 0 "
         "  WHEN " + follows_sql(P, "t.prev", region_open_sql("t.region", "t.r")) + " THEN t.r "
         "  ELSE (SELECT lo FROM s WHERE hi - lo <= 1) END AS k FROM t), "
         "g AS (SELECT nfull, prev, k, " + region_open_sql("region", "k") + " AS o, "
         "  nfull::bigint * $3::int + k AS e FROM f), " +
         holders_sql(block, P, "0") + ")";
}

// The rows of walk_sql and holders_sql, in whatever order they came, by
// block: the step's, the holders by rank, their lists by seq.
std::vector<PrefixIndex::Walk> decode(const PgRows& r, size_t blocks) {
  std::vector<PrefixIndex::Walk> out(blocks);
  struct Listed {
    int64_t rank, seq;
    PrefixIndex::ListedTokens tokens;
  };
  std::vector<std::vector<std::pair<int64_t, PrefixIndex::Holder>>> ranked(blocks);
  std::vector<std::vector<Listed>> listed(blocks);
  for (int i = 0; i < r.size(); ++i) {
    const int64_t block = r.int64(i, 0), kind = r.int64(i, 1);
    if (block < 0 || block >= static_cast<int64_t>(blocks))
      r.raise(PgError(ErrorCode::kInternal, "a prefix lookup's row names walk " + std::to_string(block)));
    const auto b = static_cast<size_t>(block);
    if (kind == 0) {
      out[b].first.more = r.int64(i, 2) != 0;
      out[b].full = r.int64(i, 6);
      out[b].k = r.int64(i, 7);
    } else if (kind == 1) {
      PrefixIndex::Holder h;
      h.id = r.int64(i, 3);
      h.name = r.text(i, 4);
      h.last_used_ms = r.int64(i, 5);
      if (!r.is_null(i, 6)) h.first_evicted = r.int64(i, 6);
      // All zero, which no chain hash is, when not 32 bytes.
      if (!r.is_null(i, 7)) h.chain = PrefixIndex::ChainEntry{r.hash(i, 9), r.hash(i, 10), r.optional_hash(i, 11)};
      ranked[b].emplace_back(r.int64(i, 2), std::move(h));
    } else {
      Listed l{r.int64(i, 2), r.int64(i, 6), {r.int64(i, 7), r.text(i, 12), std::nullopt}};
      if (!r.is_null(i, 13)) l.tokens.indexed = r.text(i, 13);
      listed[b].push_back(std::move(l));
    }
  }
  for (size_t b = 0; b < blocks; ++b) {
    std::sort(ranked[b].begin(), ranked[b].end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    std::sort(listed[b].begin(), listed[b].end(), [](const Listed& x, const Listed& y) {
      return std::make_pair(x.rank, x.seq) < std::make_pair(y.rank, y.seq);
    });
    for (auto& rh : ranked[b]) {
      for (Listed& l : listed[b])
        if (l.rank == rh.first) rh.second.lists.push_back(std::move(l.tokens));
      out[b].first.holders.push_back(std::move(rh.second));
    }
  }
  return out;
}

std::string int_array(const int32_t* tokens, int64_t n) {
  std::string a = "{";
  for (int64_t i = 0; i < n; ++i) a += (i ? "," : "") + std::to_string(tokens[i]);
  return a + "}";
}

// A lookup on the server: each call one statement, its own snapshot.
class PgLookup : public PrefixIndex::Lookup {
 public:
  PgLookup(PgPrefixIndex& index, std::optional<int64_t> model_id, std::vector<std::string> precisions)
      : index_(index), model_id_(model_id), precisions_(std::move(precisions)) {}
  std::optional<int64_t> model_id() const override { return model_id_; }
  const std::vector<std::string>& precisions() const override { return precisions_; }
  std::vector<PrefixIndex::Walk> walks(int64_t chunk_tokens, const std::vector<PrefixIndex::Precision>& precisions,
                                       const int32_t* tokens, int64_t len, int64_t limit) override {
    if (!model_id_) return std::vector<PrefixIndex::Walk>(precisions.size());
    return index_.walks(*model_id_, chunk_tokens, precisions, tokens, len, limit);
  }
  PrefixIndex::Holders holders(const std::string& precision, const PrefixIndex::Step& step, int64_t skip,
                               int64_t limit) override {
    if (!model_id_) return PrefixIndex::Holders();
    return index_.holders(*model_id_, precision, step, skip, limit);
  }
  // Each read is a round trip: a few holders at once.
  int64_t holders_per_read() const override { return 4; }

 private:
  PgPrefixIndex& index_;
  std::optional<int64_t> model_id_;
  std::vector<std::string> precisions_;
};

}  // namespace

std::unique_ptr<PrefixIndex::Lookup> PgPrefixIndex::lookup(const std::string& signature, const std::string&) {
  PgParams p;
  p.add(signature).add(tenant_id_);
  const PgRows r = conn_.query(kPrecisionsSql, p, "matching");
  std::optional<int64_t> model_id;
  std::vector<std::string> precisions;
  if (r.size() > 0 && !r.is_null(0, 0)) model_id = r.int64(0, 0);
  for (int i = 0; i < r.size(); ++i)
    if (!r.is_null(i, 1)) precisions.push_back(r.text(i, 1));
  std::sort(precisions.begin(), precisions.end());  // bytewise, as SQLite's
  return std::make_unique<PgLookup>(*this, model_id, std::move(precisions));
}

std::vector<PrefixIndex::Walk> PgPrefixIndex::walks(int64_t model_id, int64_t chunk_tokens,
                                                    const std::vector<Precision>& precisions, const int32_t* tokens,
                                                    int64_t len, int64_t limit) {
  if (precisions.empty()) return {};
  std::vector<std::string> chains(precisions.size());  // add_bytes does not copy
  PgParams p;
  p.add(model_id).add(int_array(tokens, len)).add(chunk_tokens).add_bytes(anchor_.data(), anchor_.size());
  p.add(tenant_id_).add(limit).add(kMaxTailPieces);
  std::string sql;
  for (size_t i = 0; i < precisions.size(); ++i) {
    for (const ChunkHash& h : precisions[i].chains)
      chains[i].append(reinterpret_cast<const char*>(h.data()), h.size());
    p.add(precisions[i].name).add_bytes(chains[i].data(), chains[i].size());
    sql += (i ? " UNION ALL " : "") +
           walk_sql(static_cast<int>(i), "$" + std::to_string(8 + 2 * i), "$" + std::to_string(9 + 2 * i));
  }
  return decode(conn_.query(sql, p, "matching"), precisions.size());
}

PrefixIndex::Holders PgPrefixIndex::holders(int64_t model_id, const std::string& precision, const Step& step,
                                            int64_t skip, int64_t limit) {
  if (step.region.k == 0 && (step.depth == 0 || !step.prev)) return Holders();  // no step
  // The region's JSON opening: "[t0,...,tk-1" ("[" when k == 0, unused then).
  const std::string open = step.region.more.substr(0, step.region.more.size() - (step.region.k > 0 ? 1 : 0));
  PgParams p;
  p.add(model_id).add(precision).add(step.depth);
  if (step.prev)
    p.add_hash(*step.prev);
  else
    p.add_bytes(anchor_.data(), anchor_.size());
  p.add(tenant_id_).add(limit).add(kMaxTailPieces).add(step.region.k).add(open).add(step.end).add(skip);
  const std::string sql = "(WITH g AS (SELECT $3::int AS nfull, $4::bytea AS prev, $8::int AS k, $9::text AS o, "
                          "$10::bigint AS e), " + holders_sql(0, "$2", "$11::bigint") + ")";
  std::vector<Walk> w = decode(conn_.query(sql, p, "matching"), 1);
  return std::move(w[0].first);
}

std::optional<int64_t> PgPrefixIndex::first_evicted_pos(int64_t conversation_id, int64_t end_pos) {
  PgParams p;
  p.add(conversation_id).add(end_pos);
  PgRows r = conn_.query("SELECT ch.first_pos FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                         "WHERE cc.conversation_id = $1 AND ch.first_pos < $2 AND ch.payload IS NULL "
                         "ORDER BY cc.seq LIMIT 1",
                         p, "reading evicted chunks");
  if (r.size() == 0) return std::nullopt;
  return r.int64(0, 0);
}

}  // namespace detail
}  // namespace colikv
