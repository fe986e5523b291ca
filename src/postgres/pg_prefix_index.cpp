// The prefix index's queries on a PgCatalog's connection (see pg_prefix_index.h).
#include "postgres/pg_prefix_index.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace colikv {
namespace detail {

namespace {

// prev_hash of a chunk at position 0 is the tenant's anchor (the empty bytea
// for the default tenant), as in SQLite.
PgParams& add_prev(PgParams& p, const ChunkHash* prev, const std::string& anchor) {
  return prev ? p.add_hash(*prev) : p.add_bytes(anchor.data(), anchor.size());
}

void visit_conversations(const PgRows& r, const PrefixIndex::ConversationVisitor& f) {
  for (int i = 0; i < r.size(); ++i)
    if (f(r.int64(i, 0), r.text(i, 1))) return;
}

std::optional<int64_t> optional_int(const PgRows& r) {
  if (r.size() == 0) return std::nullopt;
  return r.int64(0, 0);
}

std::optional<std::string> optional_text(const PgRows& r) {
  if (r.size() == 0) return std::nullopt;
  return r.text(0, 0);
}

}  // namespace

std::optional<std::string> PgPrefixIndex::next_precision(int64_t model_id, const std::string& after) {
  PgParams p;
  p.add(model_id).add(after);
  return optional_text(conn_.query("SELECT precision FROM chunk_meta WHERE model_id = $1 AND precision > $2 "
                                   "COLLATE \"C\" ORDER BY precision COLLATE \"C\" LIMIT 1",
                                   p, "reading precisions"));
}

bool PgPrefixIndex::chain_stored(int64_t model_id, const ChunkHash& chain) {
  PgParams p;
  p.add(model_id).add_hash(chain);
  return conn_.query("SELECT 1 FROM chunk_meta WHERE model_id = $1 AND chain_hash = $2 LIMIT 1", p, "matching")
             .size() > 0;
}

// The index chunk_meta_by_prev holds left(tokens, 2000) (a btree entry is at
// most ~2.7 KB): each probe bounds that prefix, which the index answers, then
// compares the whole list. For any strings, tokens in [from, to) implies
// left(tokens, L) in [left(from, L), left(to, L)], so the bound loses nothing.
#define COLIKV_TOKENS_IN_RANGE(from, to)                                                                  \
  "left(tokens, 2000) >= left(" from ", 2000) AND left(tokens, 2000) <= left(" to ", 2000) AND tokens >= " \
  from " AND tokens < " to
#define COLIKV_TOKENS_EQUAL(exact) "left(tokens, 2000) = left(" exact ", 2000) AND tokens = " exact

bool PgPrefixIndex::follower_in_range(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                      const std::string& from, const std::string& to) {
  PgParams p;
  p.add(model_id).add(precision);
  add_prev(p, prev, anchor_).add(from).add(to);
  return conn_.query("SELECT 1 FROM chunk_meta WHERE model_id = $1 AND precision = $2 AND prev_hash = $3 AND "
                     COLIKV_TOKENS_IN_RANGE("$4::text", "$5::text") " LIMIT 1",
                     p, "matching")
             .size() > 0;
}

bool PgPrefixIndex::follower_equal(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                   const std::string& exact) {
  PgParams p;
  p.add(model_id).add(precision);
  add_prev(p, prev, anchor_).add(exact);
  return conn_.query("SELECT 1 FROM chunk_meta WHERE model_id = $1 AND precision = $2 AND prev_hash = $3 AND "
                     COLIKV_TOKENS_EQUAL("$4::text") " LIMIT 1",
                     p, "matching")
             .size() > 0;
}

int64_t PgPrefixIndex::stored_chain_prefix(int64_t model_id, const std::vector<ChunkHash>& chains) {
  if (chains.empty()) return 0;
  // The hashes as one bytea of 32-byte pieces: the first one not stored.
  std::string all;
  for (const ChunkHash& h : chains) all.append(reinterpret_cast<const char*>(h.data()), h.size());
  PgParams p;
  p.add(model_id).add_bytes(all.data(), all.size()).add(static_cast<int64_t>(chains.size()));
  return conn_.query("SELECT coalesce(min(i), $3::int)::bigint FROM generate_series(0, $3::int - 1) AS i "
                     "WHERE NOT EXISTS (SELECT 1 FROM chunk_meta WHERE model_id = $1 "
                     "AND chain_hash = substring($2::bytea FROM i * 32 + 1 FOR 32))",
                     p, "matching")
      .int64(0, 0);
}

// Does a chunk after $3 start with the region's first k tokens, given as
// "[t0,...,tk-1" (k >= 1)? Its list then goes on ("...,": the range up to
// "...-", ',' + 1) or ends there ("...]"), as the Region of prefix_match.cpp.
#define COLIKV_FOLLOWS(open)                                                                        \
  "(EXISTS (SELECT 1 FROM chunk_meta WHERE model_id = $1 AND precision = $2 AND prev_hash = $3 AND " \
  COLIKV_TOKENS_IN_RANGE("(" open " || ',')", "(" open " || '-')") ") OR "                          \
  "EXISTS (SELECT 1 FROM chunk_meta WHERE model_id = $1 AND precision = $2 AND prev_hash = $3 AND " \
  COLIKV_TOKENS_EQUAL("(" open " || ']')") "))"
#define COLIKV_REGION_OPEN(k) "('[' || array_to_string(($4::int[])[1:" k "], ','))"

int64_t PgPrefixIndex::longest_follower(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                        const int32_t* region, int64_t r) {
  if (r <= 0) return 0;
  std::string tokens = "{";
  for (int64_t i = 0; i < r; ++i) tokens += (i ? "," : "") + std::to_string(region[i]);
  tokens += "}";
  PgParams p;
  p.add(model_id).add(precision);
  add_prev(p, prev, anchor_).add(tokens).add(r);
  // The binary search of PrefixIndex::longest_follower, on the server: the
  // whole region first, then halving [lo, hi) with has(lo), !has(hi).
  return conn_.query("WITH RECURSIVE s(lo, hi) AS ("
                     "  SELECT 0, $5::int "
                     "  UNION ALL "
                     "  SELECT CASE WHEN y.h THEN y.m ELSE y.lo END, CASE WHEN y.h THEN y.hi ELSE y.m END FROM ("
                     "    SELECT x.lo, x.hi, x.m, " COLIKV_FOLLOWS(COLIKV_REGION_OPEN("x.m")) " AS h FROM ("
                     "      SELECT lo, hi, lo + (hi - lo) / 2 AS m FROM s WHERE hi - lo > 1) x) y) "
                     "SELECT (CASE WHEN " COLIKV_FOLLOWS(COLIKV_REGION_OPEN("$5::int")) " THEN $5::int "
                     "ELSE (SELECT lo FROM s WHERE hi - lo <= 1) END)::bigint",
                     p, "matching")
      .int64(0, 0);
}

std::optional<PrefixIndex::ChainEntry> PgPrefixIndex::chain_at(int64_t conversation_id, int64_t seq) {
  PgParams p;
  p.add(conversation_id).add(seq);
  PgRows r = conn_.query("SELECT k.chain_hash, ch.hash, k.digest FROM conversation_chunks cc "
                         "JOIN chunk_meta k ON k.chunk_id = cc.chunk_id JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                         "WHERE cc.conversation_id = $1 AND cc.seq = $2",
                         p, "matching");
  if (r.size() == 0) return std::nullopt;
  // All zero, which no chain hash is, when not 32 bytes.
  return ChainEntry{r.hash(0, 0), r.hash(0, 1), r.optional_hash(0, 2)};
}

std::optional<std::string> PgPrefixIndex::indexed_tokens(int64_t chunk_id, int64_t model_id,
                                                         const std::string& precision, const ChunkHash* prev) {
  PgParams p;
  p.add(chunk_id).add(model_id).add(precision);
  add_prev(p, prev, anchor_);
  return optional_text(conn_.query("SELECT tokens FROM chunk_meta WHERE chunk_id = $1 AND model_id = $2 "
                                   "AND precision = $3 AND prev_hash = $4",
                                   p, "matching"));
}

std::vector<PrefixIndex::ListedTokens> PgPrefixIndex::token_lists_from(int64_t conversation_id, int64_t seq,
                                                                      int64_t limit) {
  PgParams p;
  p.add(conversation_id).add(seq).add(limit);
  PgRows r = conn_.query("SELECT cc.chunk_id, ch.tokens FROM conversation_chunks cc "
                         "JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                         "WHERE cc.conversation_id = $1 AND cc.seq >= $2 ORDER BY cc.seq LIMIT $3",
                         p, "matching");
  std::vector<ListedTokens> out;
  for (int i = 0; i < r.size(); ++i) out.push_back({r.int64(i, 0), r.text(i, 1)});
  return out;
}

std::optional<int64_t> PgPrefixIndex::first_evicted_pos(int64_t conversation_id, int64_t end_pos) {
  PgParams p;
  p.add(conversation_id).add(end_pos);
  return optional_int(conn_.query("SELECT ch.first_pos FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                                  "WHERE cc.conversation_id = $1 AND ch.first_pos < $2 AND ch.payload IS NULL "
                                  "ORDER BY cc.seq LIMIT 1",
                                  p, "reading evicted chunks"));
}

std::optional<std::pair<int64_t, int64_t>> PgPrefixIndex::last_used(const std::string& name) {
  PgParams p;
  p.add(name).add(tenant_id_);
  PgRows r = conn_.query("SELECT last_used_ms, conversation_id FROM conversations WHERE name = $1 AND tenant_id = $2", p,
                         "matching");
  if (r.size() == 0) return std::nullopt;
  return std::make_pair(r.int64(0, 0), r.int64(0, 1));
}

void PgPrefixIndex::visit_recent(int64_t limit, const ConversationVisitor& f) {
  PgParams p;
  p.add(limit).add(tenant_id_);
  visit_conversations(conn_.query("SELECT conversation_id, name FROM conversations WHERE tenant_id = $2 "
                                  "ORDER BY last_used_ms DESC, conversation_id DESC LIMIT $1",
                                  p, "matching"),
                      f);
}

void PgPrefixIndex::visit_users_of_chain(int64_t model_id, const ChunkHash& chain, int64_t seq,
                                         const ConversationVisitor& f) {
  PgParams p;
  p.add(model_id).add_hash(chain).add(seq).add(tenant_id_);
  visit_conversations(conn_.query("SELECT c.conversation_id, c.name FROM chunk_meta k "
                                  "JOIN conversation_chunks cc ON cc.chunk_id = k.chunk_id AND cc.seq = $3 "
                                  "JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = $4 "
                                  "WHERE k.model_id = $1 AND k.chain_hash = $2 "
                                  "ORDER BY c.last_used_ms DESC, c.conversation_id DESC",
                                  p, "matching"),
                      f);
}

void PgPrefixIndex::visit_users_of_prefix(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                          const std::string& from, const std::string& to, const std::string& exact,
                                          int64_t seq, const ConversationVisitor& f) {
  PgParams p;
  p.add(model_id).add(precision);
  add_prev(p, prev, anchor_).add(from).add(to).add(seq).add(exact).add(tenant_id_);
  visit_conversations(conn_.query("SELECT c.conversation_id, c.name FROM ("
                                  "  SELECT chunk_id FROM chunk_meta WHERE model_id = $1 AND precision = $2 "
                                  "    AND prev_hash = $3 AND " COLIKV_TOKENS_IN_RANGE("$4::text", "$5::text")
                                  "  UNION ALL "
                                  "  SELECT chunk_id FROM chunk_meta WHERE model_id = $1 AND precision = $2 "
                                  "    AND prev_hash = $3 AND " COLIKV_TOKENS_EQUAL("$7::text") ") k "
                                  "JOIN conversation_chunks cc ON cc.chunk_id = k.chunk_id AND cc.seq >= $6 "
                                  "JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = $8 "
                                  "ORDER BY c.last_used_ms DESC, c.conversation_id DESC",
                                  p, "matching"),
                      f);
}

namespace {

// The model of the signature in $S (tenant $T's) and the precisions next_precision
// finds, skipping from one to the next along chunk_meta_by_prev: one row
// per precision then a last whose precision is null, each with the model's
// id (null: no such model) and the precision's place. In the column's own
// collation, which that index is ordered by (next_precision's bytewise
// order cannot use it and reads every chunk of the model): the set is the
// same, and a lookup's answer does not depend on the order of its walks.
std::string precisions_sql(const std::string& S, const std::string& T) {
  return "m AS (SELECT model_id FROM models WHERE signature = " + S + "::text AND tenant_id = " + T + "::bigint), "
         "p(precision, n) AS ("
         "  SELECT (SELECT precision FROM chunk_meta WHERE model_id = (SELECT model_id FROM m) "
         "    AND precision > ''::text ORDER BY precision LIMIT 1), 0::bigint "
         "  UNION ALL "
         "  SELECT (SELECT k.precision FROM chunk_meta k WHERE k.model_id = (SELECT model_id FROM m) "
         "    AND k.precision > p.precision ORDER BY k.precision LIMIT 1), p.n + 1 "
         "  FROM p WHERE p.precision IS NOT NULL) ";
}

// Does a chunk after t.prev (precision P) start with the tokens whose JSON
// opens as `open` ("[t0,...,tk-1", k >= 1)? As COLIKV_FOLLOWS.
std::string follows_sql(const std::string& P, const std::string& prev, const std::string& open) {
  const std::string after = "model_id = $1::bigint AND precision = " + P + "::text AND prev_hash = " + prev + " AND ";
  const std::string from = "(" + open + " || ',')", to = "(" + open + " || '-')", exact = "(" + open + " || ']')";
  return "(EXISTS (SELECT 1 FROM chunk_meta WHERE " + after + "left(tokens, 2000) >= left(" + from +
         ", 2000) AND left(tokens, 2000) <= left(" + to + ", 2000) AND tokens >= " + from + " AND tokens < " + to +
         ") OR EXISTS (SELECT 1 FROM chunk_meta WHERE " + after + "left(tokens, 2000) = left(" + exact +
         ", 2000) AND tokens = " + exact + "))";
}

std::string region_open_sql(const std::string& region, const std::string& k) {
  return "('[' || array_to_string((" + region + ")[1:" + k + "], ','))";
}

// One precision's walk (block `block`, precision P, chain hashes H), as the
// rows read_lookup decodes: kind 0 the walk (users, full, k), kind 1 a
// candidate (rank, id, name, last_used_ms, first evicted position, whether
// its entry full - 1 exists, and that entry's chain hash, key and digest),
// kind 2 a token list from entry `full` on of a candidate (rank, seq,
// chunk_id, how many token_lists_from returns, its tokens and its indexed
// tokens), cut after the list that brings the region's k tokens by its
// commas (the caller checks them). The parameters: $1 model, $2 the prompt,
// $3 chunk tokens, $4 the tenant's anchor, $5 the tenant, $6 users read, $7
// token_lists_from's limit, $9 candidates read with their rows.
std::string walk_sql(int block, const std::string& P, const std::string& H) {
  const std::string I = std::to_string(block) + "::int";
  const std::string after = "model_id = $1::bigint AND precision = " + P + "::text AND prev_hash = g.prev AND ";
  return "(WITH RECURSIVE "
         "w AS (SELECT coalesce(min(i), length(" + H + "::bytea) / 32)::int AS nfull "
         "  FROM generate_series(0, length(" + H + "::bytea) / 32 - 1) AS i WHERE NOT EXISTS (SELECT 1 FROM chunk_meta "
         "  WHERE model_id = $1::bigint AND chain_hash = substring(" + H + "::bytea FROM i * 32 + 1 FOR 32))), "
         "t AS (SELECT nfull, CASE WHEN nfull = 0 THEN $4::bytea "
         "    ELSE substring(" + H + "::bytea FROM (nfull - 1) * 32 + 1 FOR 32) END AS prev, "
         "  ($2::int[])[nfull * $3::int + 1 : nfull * $3::int + r] AS region, r "
         "  FROM (SELECT nfull, least(cardinality($2::int[]) - nfull * $3::int, $3::int) AS r FROM w) x), "
         // The binary search of longest_follower.
         "s(lo, hi) AS (SELECT 0, (SELECT r FROM t) "
         "  UNION ALL "
         "  SELECT CASE WHEN y.h THEN y.m ELSE y.lo END, CASE WHEN y.h THEN y.hi ELSE y.m END FROM ("
         "    SELECT x.lo, x.hi, x.m, " + follows_sql(P, "t.prev", region_open_sql("t.region", "x.m")) + " AS h FROM ("
         "      SELECT lo, hi, lo + (hi - lo) / 2 AS m FROM s WHERE hi - lo > 1) x, t) y), "
         "f AS (SELECT t.nfull, t.prev, t.region, CASE WHEN t.r <= 0 THEN 0 "
         "  WHEN " + follows_sql(P, "t.prev", region_open_sql("t.region", "t.r")) + " THEN t.r "
         "  ELSE (SELECT lo FROM s WHERE hi - lo <= 1) END AS k FROM t), "
         "g AS (SELECT nfull, prev, k, " + region_open_sql("region", "k") + " AS o FROM f), "
         // The users of the last step: visit_users_of_prefix, or _of_chain.
         "u AS ((SELECT c.conversation_id AS id, c.name, c.last_used_ms AS used FROM g "
         "  CROSS JOIN LATERAL ("
         "    SELECT chunk_id FROM chunk_meta WHERE " + after +
         "      left(tokens, 2000) >= left(g.o || ',', 2000) AND left(tokens, 2000) <= left(g.o || '-', 2000) "
         "      AND tokens >= (g.o || ',') AND tokens < (g.o || '-') "
         "    UNION ALL "
         "    SELECT chunk_id FROM chunk_meta WHERE " + after +
         "      left(tokens, 2000) = left(g.o || ']', 2000) AND tokens = (g.o || ']')) km "
         "  JOIN conversation_chunks cc ON cc.chunk_id = km.chunk_id AND cc.seq >= g.nfull "
         "  JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = $5::bigint "
         "  WHERE g.k > 0 "
         "  UNION ALL "
         "  SELECT c.conversation_id, c.name, c.last_used_ms FROM g "
         "  JOIN chunk_meta km ON km.model_id = $1::bigint AND km.chain_hash = g.prev "
         "  JOIN conversation_chunks cc ON cc.chunk_id = km.chunk_id AND cc.seq = g.nfull - 1 "
         "  JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = $5::bigint "
         "  WHERE g.k = 0 AND g.nfull > 0) "
         "  ORDER BY used DESC, id DESC LIMIT $6::bigint), "
         "v AS (SELECT id, name, used, row_number() OVER (ORDER BY used DESC, id DESC) AS rank FROM u), "
         "d AS (SELECT v.id, v.name, v.used, v.rank, g.nfull, g.prev, g.k FROM v, g WHERE v.rank <= $9::bigint) "
         "SELECT " + I + ", 0::int, (SELECT count(*) FROM v)::bigint, NULL::bigint, NULL::text, NULL::bigint, "
         "  g.nfull::bigint, g.k::bigint, NULL::bigint, NULL::bytea, NULL::bytea, NULL::bytea, NULL::text, NULL::text "
         "  FROM g "
         "UNION ALL "
         "SELECT " + I + ", 1, d.rank, d.id, d.name, d.used, ev.first_pos, ca.found, NULL, "
         "  ca.chain_hash, ca.hash, ca.digest, NULL, NULL FROM d "
         "  LEFT JOIN LATERAL (SELECT 1::bigint AS found, k.chain_hash, ch.hash, k.digest FROM conversation_chunks cc "
         "    JOIN chunk_meta k ON k.chunk_id = cc.chunk_id JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
         "    WHERE cc.conversation_id = d.id AND cc.seq = d.nfull - 1 LIMIT 1) ca ON true "
         "  LEFT JOIN LATERAL (SELECT ch.first_pos FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
         "    WHERE cc.conversation_id = d.id AND ch.first_pos < d.nfull * $3::int + d.k AND ch.payload IS NULL "
         "    ORDER BY cc.seq LIMIT 1) ev ON true "
         "UNION ALL "
         "SELECT " + I + ", 2, d.rank, d.id, NULL, NULL, pc.seq, pc.chunk_id, pc.avail, NULL, NULL, NULL, "
         "  pc.tokens, pc.indexed FROM d "
         // The indexed list by the chunk's key alone, then the rest of
         // indexed_tokens' conditions: with them in the WHERE the planner
         // may take chunk_meta_by_prev and read every chunk after prev.
         "  CROSS JOIN LATERAL (SELECT x.seq, x.chunk_id, x.tokens, x.avail, (SELECT CASE WHEN km.model_id = $1::bigint "
         "      AND km.precision = " + P + "::text AND km.prev_hash = d.prev THEN km.tokens END FROM chunk_meta km "
         "      WHERE km.chunk_id = x.chunk_id) AS indexed FROM ("
         "    SELECT y.seq, y.chunk_id, y.tokens, count(*) OVER () AS avail, coalesce(sum(y.est) OVER ("
         "        ORDER BY y.seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before FROM ("
         "      SELECT cc.seq, cc.chunk_id, ch.tokens, CASE WHEN ch.tokens = '[]' THEN 0 "
         "        ELSE length(ch.tokens) - length(replace(ch.tokens, ',', '')) + 1 END AS est "
         "      FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
         "      WHERE cc.conversation_id = d.id AND cc.seq >= d.nfull ORDER BY cc.seq LIMIT $7::bigint) y) x "
         "    WHERE x.before < d.k) pc "
         "  WHERE d.k > 0)";
}

}  // namespace

bool PgPrefixIndex::start_lookup(const std::string& signature, LookupStart& out) {
  PgParams p;
  p.add(signature).add(tenant_id_);
  const PgRows r = conn_.query("WITH RECURSIVE " + precisions_sql("$1", "$2") +
                                   "SELECT (SELECT model_id FROM m)::bigint, p.precision, p.n FROM p ORDER BY p.n",
                               p, "matching");
  out = LookupStart();
  if (r.size() > 0 && !r.is_null(0, 0)) out.model_id = r.int64(0, 0);
  for (int i = 0; i < r.size(); ++i)
    if (!r.is_null(i, 1)) out.precisions.push_back(r.text(i, 1));
  return true;
}

bool PgPrefixIndex::read_lookup(const LookupRequest& req, LookupAnswers& out) {
  std::string tokens = "{";
  for (int64_t i = 0; i < req.len; ++i) tokens += (i ? "," : "") + std::to_string(req.tokens[i]);
  tokens += "}";
  std::vector<std::string> chains(req.precisions.size());  // add_bytes does not copy
  PgParams p;
  p.add(req.model_id).add(tokens).add(req.chunk_tokens).add_bytes(anchor_.data(), anchor_.size()).add(tenant_id_);
  p.add(req.candidates + 1).add(req.pieces).add(req.signature).add(req.candidates);
  std::string sql = "WITH RECURSIVE " + precisions_sql("$8", "$5") +
                    "SELECT -1::int, 3::int, p.n, (SELECT model_id FROM m)::bigint, p.precision, NULL::bigint, "
                    "NULL::bigint, NULL::bigint, NULL::bigint, NULL::bytea, NULL::bytea, NULL::bytea, NULL::text, "
                    "NULL::text FROM p";
  for (size_t i = 0; i < req.precisions.size(); ++i) {
    for (const ChunkHash& h : req.chains[i]) chains[i].append(reinterpret_cast<const char*>(h.data()), h.size());
    p.add(req.precisions[i]).add_bytes(chains[i].data(), chains[i].size());
    sql += " UNION ALL " + walk_sql(static_cast<int>(i), "$" + std::to_string(10 + 2 * i),
                                    "$" + std::to_string(11 + 2 * i));
  }
  const PgRows r = conn_.query(sql, p, "matching");
  out = LookupAnswers();
  out.walks.resize(req.precisions.size());
  // The rows in whatever order they came: precisions by place, candidates
  // by rank, token lists by candidate and seq.
  struct Listed {
    int64_t rank, seq, available;
    ListedTokens tokens;
    std::optional<std::string> indexed;
  };
  std::vector<std::pair<int64_t, std::string>> precisions;
  std::vector<std::vector<std::pair<int64_t, LookupCandidate>>> ranked(req.precisions.size());
  std::vector<std::vector<Listed>> listed(req.precisions.size());
  for (int i = 0; i < r.size(); ++i) {
    const int64_t block = r.int64(i, 0), kind = r.int64(i, 1);
    if (kind == 3) {
      if (!r.is_null(i, 3)) out.start.model_id = r.int64(i, 3);
      if (!r.is_null(i, 4)) precisions.emplace_back(r.int64(i, 2), r.text(i, 4));
      continue;
    }
    if (block < 0 || block >= static_cast<int64_t>(out.walks.size())) return false;
    const auto b = static_cast<size_t>(block);
    if (kind == 0) {
      out.walks[b].users = r.int64(i, 2);
      out.walks[b].full = r.int64(i, 6);
      out.walks[b].k = r.int64(i, 7);
    } else if (kind == 1) {
      LookupCandidate c;
      c.id = r.int64(i, 3);
      c.name = r.text(i, 4);
      c.last_used_ms = r.int64(i, 5);
      if (!r.is_null(i, 6)) c.first_evicted = r.int64(i, 6);
      if (!r.is_null(i, 7)) c.chain = ChainEntry{r.hash(i, 9), r.hash(i, 10), r.optional_hash(i, 11)};
      ranked[b].emplace_back(r.int64(i, 2), std::move(c));
    } else {
      Listed l{r.int64(i, 2), r.int64(i, 6), r.int64(i, 8), {r.int64(i, 7), r.text(i, 12)}, std::nullopt};
      if (!r.is_null(i, 13)) l.indexed = r.text(i, 13);
      listed[b].push_back(std::move(l));
    }
  }
  std::sort(precisions.begin(), precisions.end());
  for (auto& pr : precisions) out.start.precisions.push_back(std::move(pr.second));
  for (size_t b = 0; b < out.walks.size(); ++b) {
    std::sort(ranked[b].begin(), ranked[b].end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    std::sort(listed[b].begin(), listed[b].end(),
              [](const Listed& x, const Listed& y) { return std::make_pair(x.rank, x.seq) < std::make_pair(y.rank, y.seq); });
    for (auto& rc : ranked[b]) {
      LookupCandidate& c = rc.second;
      for (Listed& l : listed[b]) {
        if (l.rank != rc.first) continue;
        c.lists.push_back(std::move(l.tokens));
        c.indexed.push_back(std::move(l.indexed));
        c.lists_available = l.available;
      }
      out.walks[b].candidates.push_back(std::move(c));
    }
  }
  return true;
}

}  // namespace detail
}  // namespace colikv
