// The prefix index's queries on a PgCatalog's connection (see pg_prefix_index.h).
#include "postgres/pg_prefix_index.h"

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

}  // namespace detail
}  // namespace colikv
