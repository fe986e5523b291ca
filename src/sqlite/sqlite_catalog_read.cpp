// The SqliteCatalog's reads for info, list, verify and stats, and the
// conversation updates outside appends (see sqlite_catalog.h).
#include <sqlite3.h>

#include <map>
#include <mutex>
#include <utility>
#include <algorithm>

#include "sqlite/sqlite_catalog.h"
#include "sqlite/sqlite_connection.h"
#include "sqlite/sqlite_util.h"

namespace colikv {
namespace detail {

namespace {

std::string_view text_view(const SQLite::Column& col) {
  const char* text = static_cast<const char*>(col.getBlob());
  return text ? std::string_view(text, static_cast<size_t>(col.getBytes())) : std::string_view();
}

const char* kInfoSelect =
    "SELECT c.name, c.model_id, c.token_count, c.title, c.metadata, coalesce(p.name, ''), c.forked_at, "
    "c.created_ms, c.updated_ms, c.last_used_ms, "
    "(SELECT coalesce(sum(length(ch.payload)), 0) FROM conversation_chunks cc JOIN chunks ch "
    "   ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = c.conversation_id), "
    "EXISTS (SELECT 1 FROM conversation_chunks cc JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
    "   WHERE cc.conversation_id = c.conversation_id AND ch.payload IS NULL), "
    "c.precision "
    "FROM conversations c LEFT JOIN conversations p ON p.conversation_id = c.parent_id ";

ConversationInfoRow info_from_row(Query& q) {
  ConversationInfoRow i;
  i.name = q.getColumn(0).getString();
  i.model_id = q.stored_int(1, "conversations.model_id");
  i.count = q.stored_int(2, "conversations.token_count");
  i.title = q.getColumn(3).getString();
  i.metadata = q.getColumn(4).getString();
  i.parent = q.getColumn(5).getString();
  i.forked_at = q.stored_int(6, "conversations.forked_at");
  i.created_ms = q.getColumn(7).getInt64();
  i.updated_ms = q.getColumn(8).getInt64();
  i.last_used_ms = q.getColumn(9).getInt64();
  i.stored_bytes = q.getColumn(10).getInt64();
  i.evicted = q.getColumn(11).getInt() != 0;
  i.precision = q.getColumn(12).getString();
  return i;
}

}  // namespace

void SqliteCatalog::touch_used_if_idle(const std::string& name, int64_t now_ms) {
  // Nor is it worth a device flush: it commits with synchronous=NORMAL (a
  // power loss may forget it, never corrupt anything; the next FULL commit
  // syncs it too). An fsync would cost a small load many times its own work
  // (docs/benchmarks.md, "Figures moved out of code comments").
  const bool full = options_.synchronous == Synchronous::kFull;
  if (full) sqlite3_exec(db_.getHandle(), "PRAGMA synchronous=NORMAL", nullptr, nullptr, nullptr);
  wait_when_busy(db_.getHandle(), nullptr);
  try {
    auto u = prepared("UPDATE conversations SET last_used_ms = ? WHERE tenant_id = ? AND name = ?");
    u.bind(1, now_ms);
    u.bind(2, tenant_id_);
    u.bind(3, name);
    u.exec();
    pending_uses_.erase(name);
  } catch (const Error&) {
    // Another connection holds the write lock: the use is kept, and this
    // catalog's next write transaction (or its close) writes it
    // (record_pending_uses), before its own retention or expiry looks.
    int64_t& pending = pending_uses_[name];
    pending = std::max(pending, now_ms);
  }
  wait_when_busy(db_.getHandle(), &busy_);
  if (full) sqlite3_exec(db_.getHandle(), "PRAGMA synchronous=FULL", nullptr, nullptr, nullptr);
}

void SqliteCatalog::record_pending_uses() {
  auto u = cached(
      "UPDATE conversations SET last_used_ms = max(last_used_ms, ?) WHERE tenant_id = ? AND name = ?");
  for (const auto& [name, used_ms] : pending_uses_) {
    u.bind(1, used_ms);
    u.bind(2, tenant_id_);
    u.bind(3, name);
    u.exec();
    u.reset();
  }
  pending_uses_.clear();
}

void SqliteCatalog::record_pending_uses_at_close() noexcept {
  if (pending_uses_.empty() || options_.read_only) return;
  try {  // waits for the write lock as any write does; what it cannot write then is lost with the handle
    SqlTransaction txn(db_, "recording the last uses", SqlTransaction::kWrite, &statements_);
    record_pending_uses();
    txn.commit();
  } catch (...) {
  }
}

bool SqliteCatalog::set_text(const std::string& name, ConversationText column, const std::string& value,
                             int64_t now_ms) {
  auto u = prepared(std::string("UPDATE conversations SET ") + text_column_name(column) +
                    " = ?, generation = generation + 1, updated_ms = ? WHERE tenant_id = ? AND name = ?");
  u.bind(1, value);
  u.bind(2, now_ms);
  u.bind(3, tenant_id_);
  u.bind(4, name);
  return u.exec() != 0;
}

std::optional<ConversationInfoRow> SqliteCatalog::conversation_info(const std::string& name) {
  auto q = prepared(std::string(kInfoSelect) + "WHERE c.tenant_id = ? AND c.name = ?");
  q.bind(1, tenant_id_);
  q.bind(2, name);
  if (!q.executeStep()) return std::nullopt;
  return info_from_row(q);
}

std::vector<ConversationInfoRow> SqliteCatalog::list_conversations(int64_t limit, int64_t offset) {
  // The page is chosen on the (last_used_ms, conversation_id) index alone:
  // OFFSET over the full select would compute the skipped rows' sizes too.
  auto q = prepared(std::string(kInfoSelect) +
                    "WHERE c.conversation_id IN (SELECT conversation_id FROM conversations WHERE tenant_id = ? "
                    "ORDER BY last_used_ms DESC, conversation_id DESC LIMIT ? OFFSET ?) "
                    "ORDER BY c.last_used_ms DESC, c.conversation_id DESC");
  q.bind(1, tenant_id_);
  q.bind(2, limit < 0 ? int64_t{-1} : limit);
  q.bind(3, offset);
  std::vector<ConversationInfoRow> out;
  while (q.executeStep()) out.push_back(info_from_row(q));
  return out;
}

int64_t SqliteCatalog::conversation_count() {
  auto q = prepared("SELECT count(*) FROM conversations WHERE tenant_id = ?");
  q.bind(1, tenant_id_);
  q.executeStep();
  return q.getColumn(0).getInt64();
}

void SqliteCatalog::for_each_token_list(int64_t conversation_id, int64_t from_seq, int64_t end_pos,
                                        const std::function<void(int64_t, int64_t, std::string_view)>& f) {
  auto q = prepared("SELECT ch.chunk_id, ch.n_tokens, ch.tokens FROM conversation_chunks cc JOIN chunks ch "
                    "ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = ? AND cc.seq >= ? AND ch.first_pos < ? "
                    "ORDER BY cc.seq");
  q.bind(1, conversation_id);
  q.bind(2, from_seq);
  q.bind(3, end_pos);
  while (q.executeStep()) f(q.getColumn(0).getInt64(), q.getColumn(1).getInt64(), text_view(q.getColumn(2)));
}

int SqliteCatalog::schema_version() {
  auto q = prepared("PRAGMA user_version");
  q.executeStep();
  return q.getColumn(0).getInt();
}

IntegrityReport SqliteCatalog::check_integrity() {
  auto q = prepared("PRAGMA integrity_check");
  std::string all;
  while (q.executeStep()) all += (all.empty() ? "" : "; ") + q.getColumn(0).getString();
  return {"PRAGMA integrity_check", all};
}

std::vector<ConversationRow> SqliteCatalog::conversations_to_verify(const std::string& only) {
  auto q = prepared(only.empty() ? "SELECT conversation_id, name, model_id, token_count, precision FROM conversations "
                                   "WHERE tenant_id = ? ORDER BY name"
                                 : "SELECT conversation_id, name, model_id, token_count, precision FROM conversations "
                                   "WHERE tenant_id = ? AND name = ?");
  q.bind(1, tenant_id_);
  if (!only.empty()) q.bind(2, only);
  std::vector<ConversationRow> out;
  while (q.executeStep()) {
    ConversationRow r;
    r.id = q.getColumn(0).getInt64();
    r.name = q.getColumn(1).getString();
    r.malformed = not_an_integer(q.getColumn(2), "conversations.model_id");
    if (r.malformed.empty()) {
      r.model_id = q.getColumn(2).getInt64();
      r.malformed = not_an_integer(q.getColumn(3), "conversations.token_count");
      if (r.malformed.empty()) r.count = q.getColumn(3).getInt64();
    }
    r.precision = q.getColumn(4).getString();
    out.push_back(r);
  }
  return out;
}

void SqliteCatalog::for_each_verify_row(int64_t conversation_id, const std::function<void(const VerifyChunkRow&)>& f) {
  auto q = prepared("SELECT cc.seq, ch.chunk_id, ch.first_pos, ch.n_tokens, ch.tokens, ch.compression, "
                    "ch.raw_size, ch.checksum, ch.payload, ch.hash, ch.model_id, ch.precision, k.digest, "
                    "k.chunk_id IS NOT NULL, k.prev_hash, k.tokens, k.chain_hash "
                    "FROM conversation_chunks cc LEFT JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                    "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id WHERE cc.conversation_id = ? ORDER BY cc.seq");
  q.bind(1, conversation_id);
  while (q.executeStep()) {
    VerifyChunkRow r;
    r.seq = q.stored_int(0, "conversation_chunks.seq");
    if (!q.getColumn(1).isNull()) {
      r.chunk_id = q.getColumn(1).getInt64();
      r.first_pos = q.stored_int(2, "chunks.first_pos");
      r.n_tokens = q.stored_int(3, "chunks.n_tokens");
      r.tokens_json = text_view(q.getColumn(4));
      r.compression = q.getColumn(5).getString();
      r.raw_size = q.stored_int(6, "chunks.raw_size");
      r.checksum = q.stored_int(7, "chunks.checksum");
      SQLite::Column payload = q.getColumn(8);
      r.has_payload = !payload.isNull();
      r.payload = static_cast<const uint8_t*>(payload.getBlob());
      r.payload_bytes = static_cast<size_t>(payload.getBytes());
      r.key = blob_to_hash(q.getColumn(9));
      r.model_id = q.getColumn(10).getInt64();
      r.precision = q.getColumn(11).getString();
      r.digest = digest_column(q.getColumn(12));
      r.has_index = q.getColumn(13).getInt() != 0;
      SQLite::Column prev = q.getColumn(14);
      if (!prev.isNull())
        r.index_prev.emplace(static_cast<const char*>(prev.getBlob()), static_cast<size_t>(prev.getBytes()));
      r.index_tokens_json = q.getColumn(15).getString();
      r.index_chain = digest_column(q.getColumn(16));
    }
    f(r);
  }
}

std::vector<LineageRow> SqliteCatalog::lineage() {
  auto q = prepared("SELECT conversation_id, name, coalesce(parent_id, 0), forked_at FROM conversations WHERE tenant_id = ?");
  q.bind(1, tenant_id_);
  std::vector<LineageRow> out;
  while (q.executeStep())
    out.push_back({q.getColumn(0).getInt64(), q.getColumn(1).getString(), q.getColumn(2).getInt64(),
                   q.getColumn(3).getInt64()});
  return out;
}

void SqliteCatalog::for_each_undigested_share(const std::function<void(const ChunkUse&)>& f) {
  auto q = prepared("SELECT ch.chunk_id, ch.first_pos, ch.n_tokens, cc.conversation_id FROM chunks ch "
                    "JOIN conversation_chunks cc ON cc.chunk_id = ch.chunk_id "
                    "JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = ? "
                    "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id "
                    "WHERE k.digest IS NULL AND length(ch.payload) IS NOT NULL "
                    "AND ch.chunk_id IN (SELECT chunk_id FROM conversation_chunks GROUP BY chunk_id HAVING count(*) > 1) "
                    "ORDER BY ch.chunk_id");
  q.bind(1, tenant_id_);
  while (q.executeStep())
    f({{q.getColumn(0).getInt64(), q.getColumn(1).getInt64(), q.getColumn(2).getInt64()}, q.getColumn(3).getInt64()});
}

Strays SqliteCatalog::strays() {
  Strays out;
  auto q = prepared("SELECT chunk_id, first_pos, n_tokens FROM chunks ch WHERE NOT EXISTS "
                    "(SELECT 1 FROM conversation_chunks cc WHERE cc.chunk_id = ch.chunk_id) AND NOT EXISTS "
                    "(SELECT 1 FROM held_chunks h WHERE h.chunk_id = ch.chunk_id)");
  while (q.executeStep())
    out.unused_chunks.push_back({q.getColumn(0).getInt64(), q.getColumn(1).getInt64(), q.getColumn(2).getInt64()});
  // A foreign key the schema declares but a hand edit with enforcement off
  // can break: SQLite enforces it only on the connections that turn it on.
  auto c = prepared("SELECT conversation_id, tenant_id FROM conversations c WHERE NOT EXISTS "
                    "(SELECT 1 FROM tenants t WHERE t.tenant_id = c.tenant_id) ORDER BY conversation_id");
  while (c.executeStep()) out.conversations_of_no_tenant.push_back({c.getColumn(0).getInt64(), c.getColumn(1).getInt64()});
  return out;
}

// A tenant's chunks are those its conversations use (a chunk no list names
// is no tenant's: gc's). Tenants share none (their chain hashes differ).
#define COLIKV_TENANT_CHUNK                                                                             \
  "ch.chunk_id IN (SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c "              \
  "ON c.conversation_id = cc.conversation_id WHERE c.tenant_id = ?1)"

TenantUsage SqliteCatalog::usage() {
  auto q = prepared("SELECT m.model_id, m.chunk_tokens, m.record_bytes, "
                    " (SELECT count(*) FROM conversations c WHERE c.model_id = m.model_id AND c.tenant_id = ?1), "
                    " (SELECT coalesce(sum(token_count), 0) FROM conversations c WHERE c.model_id = m.model_id "
                    "    AND c.tenant_id = ?1), "
                    " (SELECT count(*) FROM chunks ch WHERE ch.model_id = m.model_id AND " COLIKV_TENANT_CHUNK "), "
                    " (SELECT coalesce(sum(n_tokens), 0) FROM chunks ch WHERE ch.model_id = m.model_id AND "
                      COLIKV_TENANT_CHUNK "), "
                      " (SELECT coalesce(sum(length(payload)), 0) FROM chunks ch WHERE ch.model_id = m.model_id AND "
                      COLIKV_TENANT_CHUNK ") "
                      "FROM models m ORDER BY m.model_id");
  q.bind(1, tenant_id_);
  TenantUsage out;
  while (q.executeStep()) {
    ModelUsageRow u;
    u.model_id = q.getColumn(0).getInt64();
    u.chunk_tokens = q.getColumn(1).getInt64();
    u.record_bytes = q.getColumn(2).getInt64();
    u.conversations = q.getColumn(3).getInt64();
    u.tokens = q.getColumn(4).getInt64();
    u.chunks = q.getColumn(5).getInt64();
    u.chunk_tokens_sum = q.getColumn(6).getInt64();
    u.stored_bytes = q.getColumn(7).getInt64();
    out.models.push_back(u);
  }
  // The tenant's conversations reached through evicted chunks, and those chunks.
  auto e = prepared("SELECT count(DISTINCT ch.chunk_id), count(DISTINCT cc.conversation_id) "
                    "FROM chunks ch INDEXED BY chunks_evicted "
                    "JOIN conversation_chunks cc ON cc.chunk_id = ch.chunk_id "
                    "JOIN conversations c ON c.conversation_id = cc.conversation_id "
                    "WHERE ch.payload IS NULL AND c.tenant_id = ?");
  e.bind(1, tenant_id_);
  e.executeStep();
  out.evicted_chunks = e.getColumn(0).getInt64();
  out.evicted_conversations = e.getColumn(1).getInt64();
  return out;
}

namespace {

// A stored limit of any tenant's row, named by that tenant (the store's
// context names only its own): NULL is none; anything but an integer is no
// value colikv writes (the column's CHECK lets text through: SQLite orders
// text above every number).
std::optional<int64_t> stored_limit(Query& q, int index, const std::string& tenant) {
  const std::string column = std::string("tenants.") + q.getColumn(index).getName() + " of tenant '" + tenant + "'";
  return q.stored_optional_int(index, column.c_str());
}

}  // namespace

std::vector<TenantRow> SqliteCatalog::tenant_usage() {
  auto q = prepared("SELECT t.name, (SELECT count(*) FROM conversations c WHERE c.tenant_id = t.tenant_id), "
                    " (SELECT coalesce(sum(k.payload_bytes), 0) FROM chunk_meta k WHERE k.chunk_id IN "
                    "   (SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c "
                    "     ON c.conversation_id = cc.conversation_id WHERE c.tenant_id = t.tenant_id)), "
                    " t.max_bytes, t.max_idle_ms "
                    "FROM tenants t ORDER BY t.name");
  std::vector<TenantRow> out;
  while (q.executeStep()) {
    TenantRow t{q.getColumn(0).getString(), q.getColumn(1).getInt64(), q.getColumn(2).getInt64(), {}};
    t.limits.max_bytes = stored_limit(q, 3, t.name);
    t.limits.max_idle_ms = stored_limit(q, 4, t.name);
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

// The share of each tenant and model: conversations and tokens, then the
// distinct chunks their conversations use (a shared chunk once per tenant).
const char* const kGaugeConversations =
    "SELECT t.name, c.model_id, count(*), coalesce(sum(c.token_count), 0) FROM conversations c "
    "JOIN tenants t ON t.tenant_id = c.tenant_id GROUP BY c.tenant_id, c.model_id";
const char* const kGaugeChunks =
    "SELECT t.name, ch.model_id, coalesce(sum(k.payload_bytes), 0), "
    " coalesce(sum(CASE WHEN ch.payload IS NULL THEN ch.n_tokens * m.record_bytes ELSE 0 END), 0) "
    "FROM (SELECT DISTINCT c.tenant_id AS tenant_id, cc.chunk_id AS chunk_id FROM conversation_chunks cc "
    "      JOIN conversations c ON c.conversation_id = cc.conversation_id) u "
    "JOIN chunks ch ON ch.chunk_id = u.chunk_id JOIN models m ON m.model_id = ch.model_id "
    "JOIN tenants t ON t.tenant_id = u.tenant_id LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id "
    "GROUP BY u.tenant_id, ch.model_id";

}  // namespace

GaugeUsage SqliteCatalog::gauge_usage() {
  std::map<std::pair<std::string, int64_t>, GaugeUsageRow> rows;
  auto convs = prepared(kGaugeConversations);
  while (convs.executeStep()) {
    GaugeUsageRow& r = rows[{convs.getColumn(0).getString(), convs.getColumn(1).getInt64()}];
    r.conversations = convs.getColumn(2).getInt64();
    r.tokens = convs.getColumn(3).getInt64();
  }
  auto chunks = prepared(kGaugeChunks);
  while (chunks.executeStep()) {
    GaugeUsageRow& r = rows[{chunks.getColumn(0).getString(), chunks.getColumn(1).getInt64()}];
    r.stored_bytes = chunks.getColumn(2).getInt64();
    r.evicted_bytes = chunks.getColumn(3).getInt64();
  }
  GaugeUsage out;
  for (auto& e : rows) {
    e.second.tenant = e.first.first;
    e.second.model_id = e.first.second;
    out.rows.push_back(std::move(e.second));
  }
  out.held_chunks = query_int(db_, "SELECT count(DISTINCT chunk_id) FROM held_chunks", "counting held chunks");
  out.wal_bytes = file_size_or_zero(path_ + "-wal");
  out.file_bytes = file_size_or_zero(path_) + out.wal_bytes;
  return out;
}

TenantLimits SqliteCatalog::tenant_limits() {
  // Prepared once: every append reads it.
  auto q = cached("SELECT max_bytes, max_idle_ms FROM tenants WHERE tenant_id = ?", Reading::kStoredRows);
  q.bind(1, tenant_id_);
  TenantLimits l;
  if (!q.executeStep()) return l;  // deleted by hand meanwhile: no limits to apply
  l.max_bytes = q.stored_optional_int(0, "tenants.max_bytes");
  l.max_idle_ms = q.stored_optional_int(1, "tenants.max_idle_ms");
  return l;
}

TenantLimits SqliteCatalog::set_tenant_limits(const TenantLimits& limits, unsigned fields) {
  // The write transaction holds every other writer off: the kept limit is
  // read as it stands.
  TenantLimits merged = limits;
  if ((fields & kAllTenantLimits) != kAllTenantLimits) {
    const TenantLimits stored = tenant_limits();
    if (!(fields & kTenantMaxBytes)) merged.max_bytes = stored.max_bytes;
    if (!(fields & kTenantMaxIdle)) merged.max_idle_ms = stored.max_idle_ms;
  }
  auto u = prepared("UPDATE tenants SET max_bytes = ?, max_idle_ms = ? WHERE tenant_id = ?");
  if (merged.max_bytes) u.bind(1, *merged.max_bytes); else u.bind(1);
  if (merged.max_idle_ms) u.bind(2, *merged.max_idle_ms); else u.bind(2);
  u.bind(3, tenant_id_);
  if (u.exec() != 1) throw Error(ErrorCode::kNotFound, "no such tenant '" + options_.tenant + "' (deleted meanwhile)");
  return merged;
}

std::vector<IdleConversation> SqliteCatalog::idle_conversations(int64_t used_before_ms) {
  // conversations_by_tenant_last_used, read from its oldest end.
  auto q = prepared("SELECT conversation_id, name, generation FROM conversations WHERE tenant_id = ? "
                    "AND last_used_ms < ? ORDER BY last_used_ms ASC, conversation_id ASC");
  q.bind(1, tenant_id_);
  q.bind(2, used_before_ms);
  std::vector<IdleConversation> out;
  while (q.executeStep())
    out.push_back({q.getColumn(0).getInt64(), q.getColumn(1).getString(),
                   q.stored_int(2, "conversations.generation")});
  return out;
}

bool is_json(const std::string& text) {
  // One connection of the process for it, never closed (a store may be used
  // from an atexit handler), its statement prepared once, under its lock.
  struct Validator {
    std::mutex mu;
    sqlite3* db = nullptr;
    sqlite3_stmt* q = nullptr;
  };
  static Validator& v = *new Validator;
  std::lock_guard<std::mutex> lock(v.mu);
  if (!v.q) {
    if (!v.db && sqlite3_open_v2(":memory:", &v.db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      sqlite3_close(v.db);
      v.db = nullptr;
      throw Error(ErrorCode::kInternal, "checking JSON: cannot open SQLite's in-memory database");
    }
    if (sqlite3_prepare_v2(v.db, "SELECT json_valid(?)", -1, &v.q, nullptr) != SQLITE_OK)
      throw Error(ErrorCode::kInternal, std::string("checking JSON: ") + sqlite3_errmsg(v.db));
  }
  int rc = sqlite3_bind_text64(v.q, 1, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8);
  if (rc == SQLITE_OK) rc = sqlite3_step(v.q);
  const bool valid = rc == SQLITE_ROW && sqlite3_column_int(v.q, 0) == 1;
  sqlite3_reset(v.q);
  sqlite3_clear_bindings(v.q);
  if (rc != SQLITE_ROW) throw Error(ErrorCode::kInternal, std::string("checking JSON: ") + sqlite3_errstr(rc));
  return valid;
}

}  // namespace detail
}  // namespace colikv
