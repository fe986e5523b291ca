// The PgCatalog's reads for info, list, verify, stats and eviction, the
// conversation updates outside appends (see pg_catalog.h).
#include <map>
#include <utility>

#include "postgres/pg_catalog.h"
#include "core/wall_clock.h"
#include "postgres/pg_migrations.h"
#include "postgres/pg_prefix_index.h"

namespace colikv {
namespace detail {

namespace {

// The ConversationInfoRow columns of the conversations `rows` (a query of
// conversations' rows, their page already cut): each one's stored payload
// bytes and whether any of its chunks was evicted (-1: payload NULL), in one
// pass over its chunk list, after the page is chosen (not for every
// conversation of the store). Each chunk is a subquery on its key, which the
// planner cannot turn into a join: on a store just filled, before the
// server's ANALYZE has seen its tables, it chose a hash join that scanned
// the whole chunks table once per listed conversation.
std::string info_select(const std::string& rows) {
  // The parent by its key, row by row: a join would let the planner hash
  // every conversation for a page of them.
  return "SELECT c.name, c.model_id, c.token_count, c.title, c.metadata, "
         "coalesce((SELECT p.name FROM conversations p WHERE p.conversation_id = c.parent_id), ''), c.forked_at, "
         "c.created_ms, c.updated_ms, c.last_used_ms, coalesce(u.bytes, 0)::bigint, coalesce(u.evicted, false), "
         "c.precision FROM (" + rows + ") c "
         "LEFT JOIN LATERAL (SELECT sum(greatest(s.n, 0)) AS bytes, bool_or(s.n < 0) AS evicted FROM ("
         "  SELECT (SELECT coalesce(octet_length(ch.payload), -1) FROM chunks ch WHERE ch.chunk_id = cc.chunk_id) AS n "
         "  FROM conversation_chunks cc WHERE cc.conversation_id = c.conversation_id) s) u ON true ";
}

ConversationInfoRow info_from_row(const PgRows& r, int i) {
  ConversationInfoRow c;
  c.name = r.text(i, 0);
  c.model_id = r.int64(i, 1);
  c.count = r.int64(i, 2);
  c.title = r.text(i, 3);
  c.metadata = r.text(i, 4);
  c.parent = r.text(i, 5);
  c.forked_at = r.int64(i, 6);
  c.created_ms = r.int64(i, 7);
  c.updated_ms = r.int64(i, 8);
  c.last_used_ms = r.int64(i, 9);
  c.stored_bytes = r.int64(i, 10);
  c.evicted = r.int64(i, 11) != 0;
  c.precision = r.text(i, 12);
  return c;
}

const char* set_text_sql(ConversationText column) {
  switch (column) {
    case ConversationText::kName:
      return "UPDATE conversations SET name = $1, generation = generation + 1, updated_ms = $2 WHERE name = $3 AND tenant_id = $4";
    case ConversationText::kMetadata:
      return "UPDATE conversations SET metadata = $1, generation = generation + 1, updated_ms = $2 WHERE name = $3 AND tenant_id = $4";
    case ConversationText::kTitle:
      break;
  }
  return "UPDATE conversations SET title = $1, generation = generation + 1, updated_ms = $2 WHERE name = $3 AND tenant_id = $4";
}

}  // namespace

void PgCatalog::touch_used_if_idle(const std::string& name, int64_t) {
  // Best effort, as with SQLite: never waits for a writer's row lock (SKIP
  // LOCKED) and is not worth a WAL flush (synchronous_commit off for it).
  if (conn_.in_transaction()) return;
  try {
    conn_.ensure_connected("recording a load");
    conn_.exec("BEGIN; SET LOCAL synchronous_commit = off", "recording a load");
    PgParams p;
    p.add(name).add(tenant_id_);
    conn_.query("UPDATE conversations SET last_used_ms = " COLIKV_PG_SERVER_MS " WHERE conversation_id = "
                "(SELECT conversation_id FROM conversations WHERE name = $1 AND tenant_id = $2 FOR UPDATE SKIP LOCKED)",
                p, "recording a load");
    conn_.exec("COMMIT", "recording a load");
  } catch (const Error&) {
    conn_.abandon_transaction();  // a lost connection too: the next call reconnects
  }
}

bool PgCatalog::set_text(const std::string& name, ConversationText column, const std::string& value, int64_t now_ms) {
  PgParams p;
  p.add(value).add(now_ms).add(name).add(tenant_id_);
  try {
    return run(set_text_sql(column), p, "updating a conversation").affected() != 0;
  } catch (const Error& e) {
    // The core found the new name free; a racing writer created it since.
    if (column == ConversationText::kName && e.code() == ErrorCode::kConflict) throw_name_taken();
    throw;
  }
}

std::optional<ConversationInfoRow> PgCatalog::conversation_info(const std::string& name) {
  PgParams p;
  p.add(name).add(tenant_id_);
  PgRows r = conn_.query(info_select("SELECT * FROM conversations WHERE name = $1 AND tenant_id = $2"), p,
                         "reading a conversation");
  if (r.size() == 0) return std::nullopt;
  return info_from_row(r, 0);
}

std::vector<ConversationInfoRow> PgCatalog::list_conversations(int64_t limit, int64_t offset) {
  PgParams p;
  if (limit < 0)
    p.add_null();  // LIMIT NULL: all
  else
    p.add(limit);
  p.add(offset).add(tenant_id_);
  PgRows r = conn_.query(info_select("SELECT * FROM conversations WHERE tenant_id = $3 "
                                     "ORDER BY last_used_ms DESC, conversation_id DESC LIMIT $1 OFFSET $2") +
                             "ORDER BY c.last_used_ms DESC, c.conversation_id DESC",
                         p, "listing conversations");
  std::vector<ConversationInfoRow> out;
  for (int i = 0; i < r.size(); ++i) out.push_back(info_from_row(r, i));
  return out;
}

int64_t PgCatalog::conversation_count() {
  PgParams p;
  p.add(tenant_id_);
  return run("SELECT count(*) FROM conversations WHERE tenant_id = $1", p, "counting conversations").int64(0, 0);
}

void PgCatalog::for_each_token_list(int64_t conversation_id, int64_t from_seq, int64_t end_pos,
                                    const std::function<void(int64_t, int64_t, std::string_view)>& f) {
  PgParams p;
  p.add(conversation_id).add(from_seq).add(end_pos);
  PgRows r = run("SELECT ch.chunk_id, ch.n_tokens, ch.tokens FROM conversation_chunks cc JOIN chunks ch "
                 "ON ch.chunk_id = cc.chunk_id WHERE cc.conversation_id = $1 AND cc.seq >= $2 AND ch.first_pos < $3 "
                 "ORDER BY cc.seq",
                 p, "reading token ids");
  for (int i = 0; i < r.size(); ++i) {
    const std::string tokens = r.text(i, 2);
    f(r.int64(i, 0), r.int64(i, 1), tokens);
  }
}

int PgCatalog::schema_version() { return postgres_schema_version(conn_, "reading the schema version"); }

IntegrityReport PgCatalog::check_integrity() {
  // The server checks its own pages; what it cannot know is colikv's side
  // table: every chunk has its chunk_meta row, recording its payload's size.
  PgRows r = run("SELECT count(*) FROM chunks ch LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id "
                 "WHERE k.chunk_id IS NULL OR k.payload_bytes <> coalesce(octet_length(ch.payload), 0)",
                 PgParams(), "checking chunk_meta");
  const int64_t bad = r.int64(0, 0);
  return {"chunk_meta against chunks",
          bad == 0 ? "ok" : std::to_string(bad) + " chunks whose chunk_meta row is missing or records another payload size"};
}

std::vector<ConversationRow> PgCatalog::conversations_to_verify(const std::string& only) {
  PgParams p;
  p.add(tenant_id_);
  if (!only.empty()) p.add(only);
  PgRows r = only.empty() ? run("SELECT conversation_id, name, model_id, token_count, precision FROM conversations "
                                "WHERE tenant_id = $1 ORDER BY name COLLATE \"C\"",
                                p, "listing conversations")
                          : run("SELECT conversation_id, name, model_id, token_count, precision FROM conversations "
                                "WHERE tenant_id = $1 AND name = $2",
                                p, "reading a conversation");
  std::vector<ConversationRow> out;
  for (int i = 0; i < r.size(); ++i) {
    ConversationRow c;
    c.id = r.int64(i, 0);
    c.name = r.text(i, 1);
    c.model_id = r.int64(i, 2);
    c.count = r.int64(i, 3);
    c.precision = r.text(i, 4);
    out.push_back(c);
  }
  return out;
}

void PgCatalog::for_each_verify_row(int64_t conversation_id, const std::function<void(const VerifyChunkRow&)>& f) {
  // The list without payloads, then each payload on its own: memory stays one chunk.
  PgParams p;
  p.add(conversation_id);
  PgRows r = run("SELECT cc.seq, ch.chunk_id, ch.first_pos, ch.n_tokens, ch.tokens, ch.compression, ch.raw_size, "
                 "ch.checksum, ch.payload IS NOT NULL, ch.hash, ch.model_id, ch.precision, k.digest, "
                 "k.chunk_id IS NOT NULL, k.prev_hash, k.tokens, k.chain_hash "
                 "FROM conversation_chunks cc LEFT JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                 "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id WHERE cc.conversation_id = $1 ORDER BY cc.seq",
                 p, "reading a chunk list");
  for (int i = 0; i < r.size(); ++i) {
    VerifyChunkRow v;
    v.seq = r.int64(i, 0);
    std::string tokens;
    std::optional<PgRows> payload;
    if (!r.is_null(i, 1)) {
      v.chunk_id = r.int64(i, 1);
      v.first_pos = r.int64(i, 2);
      v.n_tokens = r.int64(i, 3);
      tokens = r.text(i, 4);
      v.tokens_json = tokens;
      v.compression = r.text(i, 5);
      v.raw_size = r.int64(i, 6);
      v.checksum = r.int64(i, 7);
      v.has_payload = r.int64(i, 8) != 0;
      v.key = r.hash(i, 9);
      v.model_id = r.int64(i, 10);
      v.precision = r.text(i, 11);
      v.digest = r.optional_hash(i, 12);
      v.has_index = r.int64(i, 13) != 0;
      if (!r.is_null(i, 14))
        v.index_prev.emplace(reinterpret_cast<const char*>(r.bytes(i, 14)), static_cast<size_t>(r.length(i, 14)));
      if (v.has_index) v.index_tokens_json = r.text(i, 15);
      v.index_chain = r.optional_hash(i, 16);
      if (v.has_payload) {
        PgParams id;
        id.add(*v.chunk_id);
        payload.emplace(run("SELECT payload FROM chunks WHERE chunk_id = $1", id, "reading a payload"));
        v.has_payload = payload->size() == 1 && !payload->is_null(0, 0);
        if (v.has_payload) {
          v.payload = payload->bytes(0, 0);
          v.payload_bytes = static_cast<size_t>(payload->length(0, 0));
        }
      }
    }
    f(v);
  }
}

std::vector<LineageRow> PgCatalog::lineage() {
  PgParams p;
  p.add(tenant_id_);
  PgRows r = run("SELECT conversation_id, name, coalesce(parent_id, 0), forked_at FROM conversations WHERE tenant_id = $1",
                 p, "reading the fork tree");
  std::vector<LineageRow> out;
  for (int i = 0; i < r.size(); ++i) out.push_back({r.int64(i, 0), r.text(i, 1), r.int64(i, 2), r.int64(i, 3)});
  return out;
}

void PgCatalog::for_each_undigested_share(const std::function<void(const ChunkUse&)>& f) {
  PgRows r = run("SELECT ch.chunk_id, ch.first_pos, ch.n_tokens, cc.conversation_id FROM chunks ch "
                 "JOIN conversation_chunks cc ON cc.chunk_id = ch.chunk_id "
                 "JOIN conversations c ON c.conversation_id = cc.conversation_id AND c.tenant_id = $1 "
                 "LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id "
                 "WHERE k.digest IS NULL AND ch.payload IS NOT NULL "
                 "AND ch.chunk_id IN (SELECT chunk_id FROM conversation_chunks GROUP BY chunk_id HAVING count(*) > 1) "
                 "ORDER BY ch.chunk_id",
                 PgParams().add(tenant_id_), "reading shared chunks");
  for (int i = 0; i < r.size(); ++i) f({{r.int64(i, 0), r.int64(i, 1), r.int64(i, 2)}, r.int64(i, 3)});
}

Strays PgCatalog::strays() {
  Strays out;
  // A queued one is on its way out (0006_chunks_to_free.sql), not left behind.
  PgRows r = run("SELECT chunk_id, first_pos, n_tokens FROM chunks ch WHERE NOT EXISTS "
                 "(SELECT 1 FROM conversation_chunks cc WHERE cc.chunk_id = ch.chunk_id) AND NOT EXISTS "
                 "(SELECT 1 FROM chunks_to_free f WHERE f.chunk_id = ch.chunk_id)",
                 PgParams(), "reading unused chunks");
  for (int i = 0; i < r.size(); ++i) out.unused_chunks.push_back({r.int64(i, 0), r.int64(i, 1), r.int64(i, 2)});
  // The server enforces the foreign key; a superuser with its triggers off
  // (session_replication_role = replica) does not.
  PgRows c = run("SELECT conversation_id, tenant_id FROM conversations c WHERE NOT EXISTS "
                 "(SELECT 1 FROM tenants t WHERE t.tenant_id = c.tenant_id) ORDER BY conversation_id",
                 PgParams(), "reading conversations of no tenant");
  for (int i = 0; i < c.size(); ++i) out.conversations_of_no_tenant.push_back({c.int64(i, 0), c.int64(i, 1)});
  return out;
}

// A tenant's chunks are those its conversations use (a chunk no list names
// is no tenant's: gc's). Tenants share none (their chain hashes differ).
#define COLIKV_TENANT_CHUNK                                                                \
  "ch.chunk_id IN (SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c " \
  "ON c.conversation_id = cc.conversation_id WHERE c.tenant_id = $1)"

TenantUsage PgCatalog::usage() {
  // One round trip: the evicted counts, the tenant's alone, are computed once
  // (uncorrelated) and repeated on each model's row; a tenant of no model has
  // no chunk either.
  PgRows r = run("SELECT m.model_id, m.chunk_tokens, m.record_bytes, "
                 " (SELECT count(*) FROM conversations c WHERE c.model_id = m.model_id AND c.tenant_id = $1), "
                 " (SELECT coalesce(sum(token_count), 0)::bigint FROM conversations c WHERE c.model_id = m.model_id "
                 "    AND c.tenant_id = $1), "
                 " (SELECT count(*) FROM chunks ch WHERE ch.model_id = m.model_id AND " COLIKV_TENANT_CHUNK "), "
                 " (SELECT coalesce(sum(n_tokens), 0)::bigint FROM chunks ch WHERE ch.model_id = m.model_id AND "
                 COLIKV_TENANT_CHUNK "), "
                 " (SELECT coalesce(sum(octet_length(payload)), 0)::bigint FROM chunks ch WHERE ch.model_id = m.model_id "
                 "    AND " COLIKV_TENANT_CHUNK "), "
                 " (SELECT count(DISTINCT ch.chunk_id) FROM chunks ch JOIN conversation_chunks cc "
                 "    ON cc.chunk_id = ch.chunk_id JOIN conversations c ON c.conversation_id = cc.conversation_id "
                 "    WHERE ch.payload IS NULL AND c.tenant_id = $1), "
                 " (SELECT count(DISTINCT cc.conversation_id) FROM chunks ch JOIN conversation_chunks cc "
                 "    ON cc.chunk_id = ch.chunk_id JOIN conversations c ON c.conversation_id = cc.conversation_id "
                 "    WHERE ch.payload IS NULL AND c.tenant_id = $1) "
                 "FROM models m WHERE m.tenant_id = $1 ORDER BY m.model_id",
                 PgParams().add(tenant_id_), "reading model usage");
  TenantUsage out;
  for (int i = 0; i < r.size(); ++i) {
    ModelUsageRow u;
    u.model_id = r.int64(i, 0);
    u.chunk_tokens = r.int64(i, 1);
    u.record_bytes = r.int64(i, 2);
    u.conversations = r.int64(i, 3);
    u.tokens = r.int64(i, 4);
    u.chunks = r.int64(i, 5);
    u.chunk_tokens_sum = r.int64(i, 6);
    u.stored_bytes = r.int64(i, 7);
    out.models.push_back(u);
    out.evicted_chunks = r.int64(i, 8);
    out.evicted_conversations = r.int64(i, 9);
  }
  return out;
}

int64_t PgCatalog::stored_payload_bytes(Scope scope) {
  if (scope == Scope::kStore)
    return run("SELECT coalesce(sum(payload_bytes), 0)::bigint FROM chunk_meta", PgParams(), "summing payload bytes")
        .int64(0, 0);
  return run("SELECT coalesce(sum(k.payload_bytes), 0)::bigint FROM chunk_meta k WHERE k.chunk_id IN "
             "(SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c "
             "ON c.conversation_id = cc.conversation_id WHERE c.tenant_id = $1)",
             PgParams().add(tenant_id_), "summing payload bytes")
      .int64(0, 0);
}

void PgCatalog::visit_least_recent(Scope scope, const PrefixIndex::ConversationVisitor& f) {
  // In pages, after the last row seen: the visitor queries and updates chunks
  // between rows, and a budget just exceeded costs a page, not every row.
  const int64_t kPage = 64;
  int64_t after_used = INT64_MIN, after_id = INT64_MIN;
  for (;;) {
    PgParams p;
    p.add(after_used).add(after_id).add(kPage);
    // $4 NULL: every tenant's.
    if (scope == Scope::kStore)
      p.add_null();
    else
      p.add(tenant_id_);
    PgRows r = run("SELECT conversation_id, name, last_used_ms FROM conversations "
                   "WHERE (last_used_ms, conversation_id) > ($1::bigint, $2::bigint) "
                   "AND ($4::bigint IS NULL OR tenant_id = $4::bigint) "
                   "ORDER BY last_used_ms ASC, conversation_id ASC LIMIT $3",
                   p, "choosing conversations to evict");
    for (int i = 0; i < r.size(); ++i) {
      if (f(r.int64(i, 0), r.text(i, 1))) return;
      after_used = r.int64(i, 2);
      after_id = r.int64(i, 0);
    }
    if (r.size() < kPage) return;
  }
}

std::vector<PayloadChunk> PgCatalog::claim_chunks(int64_t conversation_id) {
  PgParams p;
  p.add(conversation_id);
  // Every chunk the list names, with a chunk_meta row or without
  // (catalog_maintenance.h), and a writer's claim on them, in one round
  // trip. SKIP LOCKED: a chunk another writer holds is being linked (or
  // freed or evicted) by it; it is kept rather than waited for. The users counted
  // next, in a new snapshot, stay true: a new link would need the row lock
  // (FOR SHARE, or its foreign key's KEY SHARE). `listed` is the one list
  // both queries read; built per call, not kept in a static: a Store closed
  // from an atexit handler may run a retention after statics are destroyed.
  const std::string listed =
      "(SELECT cc.chunk_id, coalesce(max(k.payload_bytes), 0) AS payload_bytes, count(*) AS own "
      "FROM conversation_chunks cc LEFT JOIN chunk_meta k ON k.chunk_id = cc.chunk_id "
      "WHERE cc.conversation_id = $1 GROUP BY cc.chunk_id) l ";
  const std::string sql =
      writing_ ? "SELECT l.chunk_id, l.payload_bytes, l.own, c.chunk_id IS NOT NULL FROM " + listed +
                     "LEFT JOIN (SELECT chunk_id FROM chunks WHERE chunk_id IN (SELECT chunk_id FROM "
                     "conversation_chunks WHERE conversation_id = $1) ORDER BY chunk_id FOR UPDATE SKIP LOCKED) c "
                     "ON c.chunk_id = l.chunk_id ORDER BY l.chunk_id"
               // A read's snapshot holds still: every chunk counted.
               : "SELECT l.chunk_id, l.payload_bytes, l.own, true FROM " + listed + "ORDER BY l.chunk_id";
  PgRows r = run(sql.c_str(), p, writing_ ? "claiming a conversation's chunks" : "reading a conversation's chunks");
  std::vector<PayloadChunk> out;
  std::vector<int64_t> ids;
  std::map<int64_t, int64_t> users;  // of the claimed ones: 0 until counted
  for (int i = 0; i < r.size(); ++i) {
    out.push_back({r.int64(i, 0), r.int64(i, 1), std::nullopt, r.int64(i, 2)});
    ids.push_back(r.int64(i, 0));
    if (r.int64(i, 3) != 0) users[r.int64(i, 0)] = 0;
  }
  if (ids.empty()) return out;
  const std::string id_list = id_array(ids);
  PgRows counts = run("SELECT chunk_id, count(*) FROM conversation_chunks WHERE chunk_id = ANY($1::bigint[]) "
                      "GROUP BY chunk_id",
                      PgParams().add(id_list), "counting chunks' users");
  for (int i = 0; i < counts.size(); ++i) {
    auto u = users.find(counts.int64(i, 0));
    if (u != users.end()) u->second = counts.int64(i, 1);
  }
  for (PayloadChunk& c : out) {
    auto u = users.find(c.chunk_id);
    if (u != users.end()) c.users = u->second;
  }
  return out;
}

void PgCatalog::evict_payload(int64_t chunk_id) {
  PgParams p;
  p.add(chunk_id);
  run("UPDATE chunks SET payload = NULL WHERE chunk_id = $1", p, "evicting a chunk");
  run("UPDATE chunk_meta SET payload_bytes = 0 WHERE chunk_id = $1", p, "evicting a chunk");
}

std::vector<TenantRow> PgCatalog::tenant_usage() {
  PgRows r = run("SELECT t.name, (SELECT count(*) FROM conversations c WHERE c.tenant_id = t.tenant_id), "
                 " (SELECT coalesce(sum(k.payload_bytes), 0)::bigint FROM chunk_meta k WHERE k.chunk_id IN "
                 "   (SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c "
                 "     ON c.conversation_id = cc.conversation_id WHERE c.tenant_id = t.tenant_id)), "
                 " t.max_bytes, t.max_idle_ms "
                 "FROM tenants t ORDER BY t.name COLLATE \"C\"",
                 PgParams(), "reading the tenants");
  std::vector<TenantRow> out;
  for (int i = 0; i < r.size(); ++i) {
    TenantRow t{r.text(i, 0), r.int64(i, 1), r.int64(i, 2), {}};
    if (!r.is_null(i, 3)) t.limits.max_bytes = r.int64(i, 3);
    if (!r.is_null(i, 4)) t.limits.max_idle_ms = r.int64(i, 4);
    out.push_back(std::move(t));
  }
  return out;
}

GaugeUsage PgCatalog::gauge_usage() {
  // As SQLite's (sqlite_catalog_read.cpp): conversations, then distinct chunks, by tenant and model.
  std::map<std::pair<std::string, int64_t>, GaugeUsageRow> rows;
  PgRows convs = run("SELECT t.name, c.model_id, count(*), coalesce(sum(c.token_count), 0)::bigint FROM conversations c "
                     "JOIN tenants t ON t.tenant_id = c.tenant_id GROUP BY t.name, c.model_id",
                     PgParams(), "reading usage by tenant and model");
  for (int i = 0; i < convs.size(); ++i) {
    GaugeUsageRow& r = rows[{convs.text(i, 0), convs.int64(i, 1)}];
    r.conversations = convs.int64(i, 2);
    r.tokens = convs.int64(i, 3);
  }
  PgRows chunks = run(
      "SELECT t.name, ch.model_id, coalesce(sum(k.payload_bytes), 0)::bigint, "
      " coalesce(sum(CASE WHEN ch.payload IS NULL THEN ch.n_tokens * m.record_bytes ELSE 0 END), 0)::bigint "
      "FROM (SELECT DISTINCT c.tenant_id AS tenant_id, cc.chunk_id AS chunk_id FROM conversation_chunks cc "
      "      JOIN conversations c ON c.conversation_id = cc.conversation_id) u "
      "JOIN chunks ch ON ch.chunk_id = u.chunk_id JOIN models m ON m.model_id = ch.model_id "
      "JOIN tenants t ON t.tenant_id = u.tenant_id LEFT JOIN chunk_meta k ON k.chunk_id = ch.chunk_id "
      "GROUP BY t.name, ch.model_id",
      PgParams(), "reading chunk usage by tenant and model");
  for (int i = 0; i < chunks.size(); ++i) {
    GaugeUsageRow& r = rows[{chunks.text(i, 0), chunks.int64(i, 1)}];
    r.stored_bytes = chunks.int64(i, 2);
    r.evicted_bytes = chunks.int64(i, 3);
  }
  GaugeUsage out;
  for (auto& e : rows) {
    e.second.tenant = e.first.first;
    e.second.model_id = e.first.second;
    out.rows.push_back(std::move(e.second));
  }
  // No WAL of its own, and one transaction per turn: no chunk is held before its link.
  out.file_bytes = file_bytes();
  return out;
}

TenantLimits PgCatalog::tenant_limits() {
  PgRows r = run("SELECT max_bytes, max_idle_ms FROM tenants WHERE tenant_id = $1", PgParams().add(tenant_id_),
                 "reading the tenant's limits");
  TenantLimits l;
  if (r.size() == 0) return l;  // deleted by hand meanwhile: no limits to apply
  if (!r.is_null(0, 0)) l.max_bytes = r.int64(0, 0);
  if (!r.is_null(0, 1)) l.max_idle_ms = r.int64(0, 1);
  return l;
}

TenantLimits PgCatalog::set_tenant_limits(const TenantLimits& limits, unsigned fields) {
  TenantLimits merged = limits;
  if ((fields & kAllTenantLimits) != kAllTenantLimits) {
    // The kept limit read under the row's lock, so that another writer's
    // change to it is kept. NO KEY UPDATE: the conversations' foreign key
    // (KEY SHARE) and the appends' plain reads of the limits go on.
    PgRows r = run("SELECT max_bytes, max_idle_ms FROM tenants WHERE tenant_id = $1 FOR NO KEY UPDATE",
                   PgParams().add(tenant_id_), "locking the tenant's limits");
    if (r.size() == 1) {
      if (!(fields & kTenantMaxBytes)) merged.max_bytes = r.is_null(0, 0) ? std::nullopt : std::optional<int64_t>(r.int64(0, 0));
      if (!(fields & kTenantMaxIdle)) merged.max_idle_ms = r.is_null(0, 1) ? std::nullopt : std::optional<int64_t>(r.int64(0, 1));
    }
  }
  PgParams p;
  if (merged.max_bytes) p.add(*merged.max_bytes); else p.add_null();
  if (merged.max_idle_ms) p.add(*merged.max_idle_ms); else p.add_null();
  p.add(tenant_id_);
  PgRows r = run("UPDATE tenants SET max_bytes = $1::bigint, max_idle_ms = $2::bigint WHERE tenant_id = $3", p,
                 "setting the tenant's limits");
  if (r.affected() != 1) conn_.raise(PgError(ErrorCode::kNotFound, "no such tenant (deleted meanwhile)"));
  return merged;
}

std::vector<IdleConversation> PgCatalog::idle_conversations(int64_t used_before_ms) {
  // The caller's threshold is its host's clock less the idle time; the
  // last-used times are the server's (COLIKV_PG_SERVER_MS): the idle time is
  // measured back from the server's clock, so that a host whose clock is
  // ahead deletes nothing early.
  const int64_t idle_ms = now_ms() - used_before_ms;
  // A writer locks those it will delete; one another writer holds is in use,
  // not idle. A row another writer updated since this statement's snapshot
  // is re-checked against its new last_used_ms before it is locked.
  const std::string sql = std::string("SELECT conversation_id, name, generation FROM conversations "
                                      "WHERE tenant_id = $1 AND last_used_ms < " COLIKV_PG_SERVER_MS " - $2::bigint "
                                      "ORDER BY last_used_ms ASC, conversation_id ASC") +
                          (writing_ ? " FOR UPDATE SKIP LOCKED" : "");
  PgRows r = run(sql.c_str(), PgParams().add(tenant_id_).add(idle_ms), "choosing conversations that expired");
  std::vector<IdleConversation> out;
  for (int i = 0; i < r.size(); ++i) out.push_back({r.int64(i, 0), r.text(i, 1), r.int64(i, 2)});
  return out;
}

Catalog::CompactOutcome PgCatalog::compact(const std::string& what, int64_t,
                                           const std::function<void(int64_t, int64_t)>& progress) {
  // VACUUM FULL rewrites each table without its dead rows and gives the space
  // back to the file system (plain VACUUM only marks it reusable).
  // One table at a time, so that a table the role may not vacuum is named.
  conn_.vacuum_full({"models", "conversations", "chunks", "chunk_meta", "conversation_chunks"}, what);
  // The server says nothing while it rewrites: done, at the end.
  if (progress) progress(1, 1);
  return {};
}

bool PgCatalog::erase_deleted(const std::string& what) {
  // What a client may do: a plain VACUUM (which also vacuums each table's
  // TOAST table, where the payloads are) drops the dead rows and their index
  // entries and makes their space reusable at once, without blocking readers
  // or writers. It does not overwrite them: their bytes stay in the tables'
  // free space until later rows reuse it, or until VACUUM FULL (Store::vacuum)
  // rewrites the tables; and in the server's WAL (pg_wal), its archive and
  // replicas, which only the server's administrator controls
  // (docs/postgres.md).
  try {
    conn_.ensure_connected(what);
    conn_.exec("VACUUM conversations, chunks, chunk_meta, conversation_chunks", what);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

int64_t PgCatalog::file_bytes() {
  // The schema's oid, resolved at open: its name is never parsed again.
  PgParams p;
  p.add(conn_.schema_oid());
  return run("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c "
             "WHERE c.relkind = 'r' AND c.relnamespace = $1::oid",
             p, "measuring the store")
      .int64(0, 0);
}

PrefixIndex& PgCatalog::prefix_index() {
  if (!prefix_index_) prefix_index_ = std::make_unique<PgPrefixIndex>(conn_, tenant_id_, anchor_);
  return *prefix_index_;
}

}  // namespace detail
}  // namespace colikv
