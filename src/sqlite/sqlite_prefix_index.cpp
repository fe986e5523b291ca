// The prefix lookup's queries (see prefix_match.cpp for the algorithm).
#include "sqlite/sqlite_prefix_index.h"

#include "sqlite/sqlite_util.h"

namespace colikv {
namespace detail {

const char* const kFirstEvictedSql =
    "SELECT ch.first_pos FROM conversation_chunks cc JOIN chunks ch INDEXED BY chunks_evicted "
    "ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = ? AND ch.first_pos < ? AND ch.payload IS NULL "
    "ORDER BY cc.seq LIMIT 1";

namespace {

void bind_hash(SQLite::Statement& q, int index, const ChunkHash& h) {
  q.bind(index, h.data(), static_cast<int>(h.size()));
}

// Steps q, offering each (conversation_id, name) row to f until it says stop.
void visit_conversations(SQLite::Statement& q, const PrefixIndex::ConversationVisitor& f) {
  while (q.executeStep())
    if (f(q.getColumn(0).getInt64(), q.getColumn(1).getString())) return;
}

}  // namespace

void bind_prev(SQLite::Statement& q, int index, const ChunkHash* prev, const std::string& anchor) {
  if (prev)
    bind_hash(q, index, *prev);
  else
    q.bind(index, anchor.data(), static_cast<int>(anchor.size()));  // a blob, zero-length or not
}

std::optional<std::string> SqlitePrefixIndex::next_precision(int64_t model_id, const std::string& after) try {
  auto q = cache_.use("SELECT precision FROM chunk_meta WHERE model_id = ? AND precision > ? ORDER BY precision LIMIT 1");
  q->bind(1, model_id);
  q->bind(2, after);
  if (!q->executeStep()) return std::nullopt;
  return q->getColumn(0).getString();
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

bool SqlitePrefixIndex::chain_stored(int64_t model_id, const ChunkHash& chain) try {
  auto q = cache_.use("SELECT 1 FROM chunk_meta WHERE model_id = ? AND chain_hash = ? LIMIT 1");
  q->bind(1, model_id);
  bind_hash(*q, 2, chain);
  return q->executeStep();
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

bool SqlitePrefixIndex::follower_in_range(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                          const std::string& from, const std::string& to) try {
  auto q = cache_.use(
      "SELECT 1 FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
      "AND tokens >= ?4 AND tokens < ?5 LIMIT 1");
  q->bind(1, model_id);
  q->bind(2, precision);
  bind_prev(*q, 3, prev, anchor_);
  q->bind(4, from);
  q->bind(5, to);
  return q->executeStep();
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

bool SqlitePrefixIndex::follower_equal(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                       const std::string& exact) try {
  auto q = cache_.use(
      "SELECT 1 FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
      "AND tokens = ?4 LIMIT 1");
  q->bind(1, model_id);
  q->bind(2, precision);
  bind_prev(*q, 3, prev, anchor_);
  q->bind(4, exact);
  return q->executeStep();
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

std::optional<PrefixIndex::ChainEntry> SqlitePrefixIndex::chain_at(int64_t conversation_id, int64_t seq) try {
  auto q = cache_.use(
      "SELECT k.chain_hash, ch.hash, k.digest FROM conversation_chunks cc JOIN chunk_meta k ON k.chunk_id = cc.chunk_id "
      "JOIN chunks ch ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = ? AND cc.seq = ?");
  q->bind(1, conversation_id);
  q->bind(2, seq);
  if (!q->executeStep()) return std::nullopt;
  // All zero, which no chain hash is, when not 32 bytes.
  return ChainEntry{blob_to_hash(q->getColumn(0)), blob_to_hash(q->getColumn(1)), digest_column(q->getColumn(2))};
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

std::optional<std::string> SqlitePrefixIndex::indexed_tokens(int64_t chunk_id, int64_t model_id,
                                                             const std::string& precision, const ChunkHash* prev) try {
  auto q = cache_.use(
      "SELECT tokens FROM chunk_meta WHERE chunk_id = ?1 AND model_id = ?2 AND precision = ?3 "
      "AND prev_hash = ?4");
  q->bind(1, chunk_id);
  q->bind(2, model_id);
  q->bind(3, precision);
  bind_prev(*q, 4, prev, anchor_);
  if (!q->executeStep()) return std::nullopt;
  return q->getColumn(0).getString();
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

std::vector<PrefixIndex::ListedTokens> SqlitePrefixIndex::token_lists_from(int64_t conversation_id, int64_t seq,
                                                                          int64_t limit) try {
  auto q = cache_.use(
      "SELECT cc.chunk_id, ch.tokens FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
      "WHERE cc.conversation_id = ? AND cc.seq >= ? ORDER BY cc.seq LIMIT ?");
  q->bind(1, conversation_id);
  q->bind(2, seq);
  q->bind(3, limit);
  std::vector<ListedTokens> out;
  while (q->executeStep()) out.push_back({q->getColumn(0).getInt64(), q->getColumn(1).getString()});
  return out;
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

std::optional<int64_t> SqlitePrefixIndex::first_evicted_pos(int64_t conversation_id, int64_t end_pos) try {
  auto q = cache_.use(kFirstEvictedSql);
  q->bind(1, conversation_id);
  q->bind(2, end_pos);
  if (!q->executeStep()) return std::nullopt;
  return q->getColumn(0).getInt64();
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

std::optional<std::pair<int64_t, int64_t>> SqlitePrefixIndex::last_used(const std::string& name) try {
  auto q = cache_.use("SELECT last_used_ms, conversation_id FROM conversations WHERE tenant_id = ? AND name = ?");
  q->bind(1, tenant_id_);
  q->bind(2, name);
  if (!q->executeStep()) return std::nullopt;
  return std::make_pair(q->getColumn(0).getInt64(), q->getColumn(1).getInt64());
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

void SqlitePrefixIndex::visit_recent(int64_t limit, const ConversationVisitor& f) try {
  auto q = cache_.use(
      "SELECT conversation_id, name FROM conversations WHERE tenant_id = ? "
      "ORDER BY last_used_ms DESC, conversation_id DESC LIMIT ?");
  q->bind(1, tenant_id_);
  q->bind(2, limit);
  visit_conversations(*q, f);
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

void SqlitePrefixIndex::visit_users_of_chain(int64_t model_id, const ChunkHash& chain, int64_t seq,
                                             const ConversationVisitor& f) try {
  auto q = cache_.use(
      "SELECT c.conversation_id, c.name FROM chunk_meta k "
      "JOIN conversation_chunks cc ON cc.chunk_id = k.chunk_id AND cc.seq = ?3 "
      "JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = ?4 "
      "WHERE k.model_id = ?1 AND k.chain_hash = ?2 "
      "ORDER BY c.last_used_ms DESC, c.conversation_id DESC");
  q->bind(1, model_id);
  bind_hash(*q, 2, chain);
  q->bind(3, seq);
  q->bind(4, tenant_id_);
  visit_conversations(*q, f);
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

void SqlitePrefixIndex::visit_users_of_prefix(int64_t model_id, const std::string& precision, const ChunkHash* prev,
                                              const std::string& from, const std::string& to,
                                              const std::string& exact, int64_t seq, const ConversationVisitor& f) try {
  auto q = cache_.use(
      "SELECT c.conversation_id, c.name FROM ("
      "  SELECT chunk_id FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
      "    AND tokens >= ?4 AND tokens < ?5 "
      "  UNION ALL "
      "  SELECT chunk_id FROM chunk_meta WHERE model_id = ?1 AND precision = ?2 AND prev_hash = ?3 "
      "    AND tokens = ?7) k "
      "JOIN conversation_chunks cc ON cc.chunk_id = k.chunk_id AND cc.seq >= ?6 "
      "JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = ?8 "
      "ORDER BY c.last_used_ms DESC, c.conversation_id DESC");
  q->bind(1, model_id);
  q->bind(2, precision);
  bind_prev(*q, 3, prev, anchor_);
  q->bind(4, from);
  q->bind(5, to);
  q->bind(6, seq);
  q->bind(7, exact);
  q->bind(8, tenant_id_);
  visit_conversations(*q, f);
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

}  // namespace detail
}  // namespace colikv
