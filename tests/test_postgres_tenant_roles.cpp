// One server role per tenant (Store::grant_tenant, colikv tenant --grant):
// two login roles on a real server, each granted one tenant, through the
// library, the CLI and the real psql shell; the owner still sees every
// tenant; bad grants change nothing. Tag [postgres] (one at a time); the
// SQLite refusal is a plain [tenants] case.
#include <catch2/catch.hpp>

#include <limits>
#include <string>
#include <vector>

#include "backend.h"
#include "cli_run.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "pg_test_roles.h"
#include "postgres/pg_migrations.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv_test::EngineBuffers;
using colikv_test::loads_as;
using colikv_test::psql;
using colikv_test::psql_int;
using colikv_test::Run;
using colikv_test::store_int;
using colikv_test::store_query;
using colikv_test::TestRole;
using colikv_test::with_search_path;

namespace {

colikv::Options tenant_options(const std::string& tenant) {
  colikv::Options o;
  o.chunk_target_bytes = 4 * colikv_test::tiny_model().record_bytes();
  o.tenant = tenant;
  return o;
}

EngineBuffers history(int64_t n, uint32_t seed) {
  return colikv_test::branched_history(colikv_test::tiny_model(), n, 0, seed, seed);
}

void append(const std::string& uri, const std::string& tenant, const std::string& id, const EngineBuffers& h,
            int64_t n) {
  colikv::Store s(uri, tenant_options(tenant));
  s.append(id, h.model, h.tokens.data(), n, h.source());
}

// The code and message of what f throws (kOk and "" when nothing).
template <class F>
std::pair<ErrorCode, std::string> failure_of(F&& f) {
  try {
    f();
  } catch (const colikv::Error& e) {
    return {e.code(), e.what()};
  }
  return {ErrorCode::kOk, ""};
}

// Every relation of the store a role may select from, as psql prints it
// (bytea as \x and hex): what "anything A can select" holds.
std::string everything_visible(const std::string& uri) {
  std::string out;
  for (const char* rel : {"conversations", "chunks", "chunk_meta", "conversation_chunks", "chunks_to_free", "tenants",
                          "tenant_roles", "models", "colikv_schema", "conversation_summary", "conversation_tokens", "model_summary"}) {
    const Run r = psql(uri, std::string("SELECT * FROM ") + rel);
    INFO(rel << ": " << r.err);
    REQUIRE(r.code == 0);
    out += r.out;
  }
  return out;
}

// The columns of schema.table, quoted, in order.
std::string columns_of(const std::string& schema, const std::string& table) {
  return store_query(colikv_test::test_pg_uri(),
                     "SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position) "
                     "FROM information_schema.columns WHERE table_schema = ?::text AND table_name = ?::text",
                     {schema, table})[0][0];
}

std::string tenant_id_of(const std::string& uri, const std::string& name) {
  return std::to_string(store_int(uri, "SELECT tenant_id FROM tenants WHERE name = ?", {name}));
}

// A store of two tenants, "a" (conversation a1) and "b" (b1), 40 tokens
// each, whose tenant a is granted to role ra.
struct GrantedStore {
  GrantedStore() {
    append(uri, "a", "a1", a, 40);
    append(uri, "b", "b1", b, 40);
    colikv::Store s(uri, tenant_options("a"));
    s.grant_tenant(ra.name());
  }
  const std::string schema = colikv_test::fresh_pg_schema();
  const std::string uri = with_search_path(colikv_test::test_pg_uri(), {schema});
  const TestRole ra{"ra"};
  const std::string ra_uri = with_search_path(ra.uri(), {schema});
  const EngineBuffers a = history(40, 11), b = history(40, 22);
};

}  // namespace

TEST_CASE("postgres: a tenant's role reads and writes its tenant and nothing of another's, even with psql",
          "[postgres][tenants]") {
  const std::string schema = colikv_test::fresh_pg_schema();
  const std::string uri = with_search_path(colikv_test::test_pg_uri(), {schema});
  TestRole ra("ra"), rb("rb");
  const std::string ra_uri = with_search_path(ra.uri(), {schema}), rb_uri = with_search_path(rb.uri(), {schema});
  const EngineBuffers a = history(64, 11), b = history(64, 22), a2 = history(40, 33);
  // The owner stores both tenants' conversations, and a conversation of the
  // default tenant, before any grant.
  append(uri, "a", "a1", a, 64);
  append(uri, "b", "b1", b, 64);
  append(uri, "", "d1", b, 40);
  {
    colikv::Store s(uri, tenant_options("a"));
    s.grant_tenant(ra.name());
  }
  {  // the CLI's grant, of the other tenant
    const Run r = colikv_test::tool({"tenant", uri, "b", "--grant", rb.name(), "--json"});
    INFO(colikv_test::describe({"colikv tenant"}, r));
    REQUIRE(r.code == 0);
    CHECK(r.out.find("\"granted\": \"" + rb.name() + "\"") != std::string::npos);
  }
  const std::string a_id = tenant_id_of(uri, "a"), b_id = tenant_id_of(uri, "b");

  // Role ra through the library: its tenant, read and written.
  {
    colikv::Store s(ra_uri, tenant_options("a"));
    CHECK(loads_as(s, "a1", a, 64) == "");
    s.append("a2", a2.model, a2.tokens.data(), 40, a2.source());
    CHECK(loads_as(s, "a2", a2, 40) == "");
    // A model the store does not know yet: the role records it.
    colikv::ModelSignature own = colikv_test::tiny_model();
    own.weights_id = "ra-own-weights";
    const EngineBuffers a3 = colikv_test::branched_history(own, 16, 0, 5, 5);
    s.append("a3", a3.model, a3.tokens.data(), 16, a3.source());
    CHECK(loads_as(s, "a3", a3, 16) == "");
    std::vector<std::string> ids;
    for (const auto& c : s.list()) ids.push_back(c.id);
    CHECK(ids == std::vector<std::string>{"a3", "a2", "a1"});
    CHECK(s.verify().problems.empty());
    const std::vector<colikv::TenantInfo> tenants = s.tenants();
    REQUIRE(tenants.size() == 1);
    CHECK(tenants[0].name == "a");
    // b's prompt matches nothing of ra's (nor could it see b1).
    CHECK(s.match(b.model, b.tokens.data(), 64).tokens == 0);
  }
  // ... and no other tenant, not even the default one.
  for (const std::string& other : {std::string("b"), std::string("")}) {
    for (const bool read_only : {true, false}) {
      colikv::Options o = tenant_options(other);
      o.read_only = read_only;
      const auto f = failure_of([&] { colikv::Store s(ra_uri, o); });
      INFO(f.second);
      CHECK(f.first == ErrorCode::kNotFound);
      CHECK(f.second.find("no such tenant '" + other + "' granted to role '" + ra.name() + "'") != std::string::npos);
    }
  }
  CHECK(store_int(uri, "SELECT count(*) FROM tenants") == 3);  // ra's writable open created none

  // Role ra through the CLI.
  {
    const Run ls = colikv_test::tool({"ls", ra_uri, "--tenant", "a", "--json"});
    INFO(colikv_test::describe({"colikv ls"}, ls));
    REQUIRE(ls.code == 0);
    CHECK(ls.out.find("\"a1\"") != std::string::npos);
    CHECK(ls.out.find("\"a2\"") != std::string::npos);
    const Run tenants = colikv_test::tool({"tenants", ra_uri, "--tenant", "a", "--json"});
    INFO(colikv_test::describe({"colikv tenants"}, tenants));
    CHECK(tenants.code == 0);
    CHECK(tenants.out.find("\"name\": \"a\"") != std::string::npos);
    CHECK(tenants.out.find("\"name\": \"b\"") == std::string::npos);
    const Run other = colikv_test::tool({"ls", ra_uri, "--tenant", "b"});
    CHECK(other.code == 1);
    CHECK(other.err.find("no such tenant 'b'") != std::string::npos);
    CHECK(other.out.find("b1") == std::string::npos);
  }

  // Role ra with psql: counts of its own rows only, and no byte of b's
  // payloads or token ids in anything it can select.
  const int64_t a_chunks = store_int(uri, "SELECT count(*) FROM chunks WHERE tenant_id = " + a_id);
  const int64_t all_chunks = store_int(uri, "SELECT count(*) FROM chunks");
  REQUIRE(a_chunks > 0);
  REQUIRE(all_chunks > a_chunks);
  CHECK(psql_int(ra_uri, "SELECT count(*) FROM chunks") == a_chunks);
  CHECK(psql_int(ra_uri, "SELECT count(*) FROM chunk_meta") == a_chunks);
  CHECK(psql_int(ra_uri, "SELECT count(*) FROM conversations") == 3);
  CHECK(psql_int(ra_uri, "SELECT count(*) FROM conversation_chunks") ==
        store_int(uri, "SELECT count(*) FROM conversation_chunks cc JOIN conversations c "
                       "ON c.conversation_id = cc.conversation_id WHERE c.tenant_id = " + a_id));
  CHECK(psql_int(ra_uri, "SELECT count(*) FROM conversation_summary") == 3);
  CHECK(psql_int(ra_uri, "SELECT count(*) FROM tenants") == 1);
  CHECK(psql_int(ra_uri, "SELECT count(*) FROM pg_stats WHERE tablename = 'chunks'") == 0);
  const std::string visible = everything_visible(ra_uri);
  const colikv_test::SqlRows b_rows = store_query(
      uri, "SELECT encode(substr(payload, 1, 48), 'hex'), tokens FROM chunks WHERE tenant_id <> " + a_id +
               " AND payload IS NOT NULL");
  REQUIRE(b_rows.size() >= 2);
  for (const auto& row : b_rows) {
    CHECK(visible.find(row[0]) == std::string::npos);
    CHECK(visible.find(row[1]) == std::string::npos);
  }
  // A key of b's it can compute gives no unique violation (the key is unique
  // per tenant), and it can neither write into b nor link b's chunk.
  const colikv_test::SqlRows b_chunk = store_query(
      uri, "SELECT chunk_id, model_id, encode(hash, 'hex') FROM chunks WHERE tenant_id = " + b_id + " LIMIT 1");
  REQUIRE(b_chunk.size() == 1);
  // (Under A's own model: since schema 7 a row of A may name no model of b's.)
  const std::string fake = "INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, compression, raw_size, "
                           "checksum, tenant_id) VALUES ((SELECT min(model_id) FROM models), '\\x" + b_chunk[0][2] +
                           "', 0, 1, '[1]', 'none', 0, 0, ";
  {
    const Run r = psql(ra_uri, "BEGIN; " + fake + a_id + ") ON CONFLICT DO NOTHING RETURNING 1; ROLLBACK");
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(r.out == "1\n");  // inserted: nothing there to conflict with
  }
  {
    const Run r = psql(ra_uri, "BEGIN; " + fake + b_id + "); ROLLBACK");
    CHECK(r.code != 0);
    CHECK(r.err.find("row-level security") != std::string::npos);
  }
  {
    const Run r = psql(ra_uri, "BEGIN; INSERT INTO conversation_chunks (conversation_id, seq, chunk_id) SELECT "
                               "conversation_id, 1000, " + b_chunk[0][0] + " FROM conversations LIMIT 1; ROLLBACK");
    CHECK(r.code != 0);
    CHECK(r.err.find("row-level security") != std::string::npos);
  }
  {  // a store-wide statement reaches its own rows only
    const Run r = psql(ra_uri, "BEGIN; UPDATE chunks SET payload = NULL; ROLLBACK");
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(psql_int(ra_uri, "WITH d AS (DELETE FROM conversations RETURNING 1) SELECT count(*) FROM d") == 3);
  }
  CHECK(store_int(uri, "SELECT count(*) FROM conversations") == 2);  // the DELETE was ra's: its three

  // rb sees b, not a; ra's store-wide eviction evicts its own only.
  {
    colikv::Store s(rb_uri, tenant_options("b"));
    CHECK(loads_as(s, "b1", b, 64) == "");
    CHECK_FALSE(s.exists("a1"));
  }
  {
    colikv::Store s(ra_uri, tenant_options("a"));
    append(ra_uri, "a", "a1", a, 64);  // back after psql's DELETE
    append(ra_uri, "a", "a2", a2, 40);
    const colikv::EvictionReport r = s.gc(0);
    CHECK(r.conversations.size() == 2);
    CHECK(s.stats().total.stored_bytes == 0);
  }
  // The owner still sees and loads everything.
  {
    colikv::Store s(uri, tenant_options("b"));
    CHECK(loads_as(s, "b1", b, 64) == "");
    colikv::Store d(uri, tenant_options(""));
    CHECK(loads_as(d, "d1", b, 40) == "");
    CHECK(d.tenants().size() == 3);
    CHECK(psql_int(uri, "SELECT count(*) FROM conversation_summary") == 4);
  }
}

TEST_CASE("postgres: a bad grant or revoke is a clear error that changes nothing", "[postgres][tenants]") {
  const std::string schema = colikv_test::fresh_pg_schema();
  const std::string uri = with_search_path(colikv_test::test_pg_uri(), {schema});
  TestRole ra("ra"), rb("rb");
  const EngineBuffers a = history(24, 11);
  append(uri, "a", "a1", a, 24);
  // What a grant changes: the grants, row-level security, the role's privileges.
  const auto state = [&] {
    return store_query(uri,
                       "SELECT (SELECT count(*) FROM tenant_roles), (SELECT count(*) FROM tenants), "
                       "(SELECT count(*) FROM pg_class WHERE relnamespace = to_regnamespace(?::text) AND relrowsecurity), "
                       "has_table_privilege(?::name, 'conversations', 'SELECT'), "
                       "has_table_privilege(?::name, 'conversations', 'SELECT')",
                       {schema, ra.name(), rb.name()});
  };
  const colikv_test::SqlRows before = state();
  CHECK(before[0][2] == "0");  // no row-level security before the first grant

  colikv::Store s(uri, tenant_options("a"));
  auto f = failure_of([&] { s.grant_tenant("colikv_no_such_role"); });
  CHECK(f.first == ErrorCode::kNotFound);
  CHECK(f.second.find("no such role 'colikv_no_such_role'") != std::string::npos);
  CHECK(f.second.find("tenant 'a'") != std::string::npos);
  // The suite's own role is a superuser: the policies do not apply to it.
  const std::string self = store_query(uri, "SELECT current_user::text")[0][0];
  f = failure_of([&] { s.grant_tenant(self); });
  CHECK(f.first == ErrorCode::kInvalidArgument);
  CHECK(f.second.find("sees every tenant anyway") != std::string::npos);
  f = failure_of([&] { s.grant_tenant(""); });
  CHECK(f.first == ErrorCode::kInvalidArgument);
  f = failure_of([&] { s.revoke_tenant(ra.name()); });
  CHECK(f.first == ErrorCode::kNotFound);
  CHECK(f.second.find("holds no grant of this tenant") != std::string::npos);
  {  // a tenant the store does not hold
    const Run r = colikv_test::tool({"tenant", uri, "nosuch", "--grant", ra.name()});
    CHECK(r.code == 1);
    CHECK(r.err.find("no such tenant 'nosuch'") != std::string::npos);
    // No change asked: the tenant shown (its usage and limits), nothing granted.
    const Run u = colikv_test::tool({"tenant", uri, "a", "--json"});
    CHECK(u.code == 0);
    CHECK(u.out.find("\"max_bytes\": null") != std::string::npos);
  }
  {  // a role that does not own the tables, though it may write them
    ra.grant_store(schema);
    colikv::Store as_ra(with_search_path(ra.uri(), {schema}), tenant_options("a"));
    f = failure_of([&] { as_ra.grant_tenant(rb.name()); });
    CHECK(f.first == ErrorCode::kReadOnly);
    CHECK(f.second.find("only the store's owner grants tenants") != std::string::npos);
  }
  colikv_test::SqlRows after = state();
  after[0][3] = before[0][3];  // ra's privileges are grant_store's
  CHECK(after == before);

  // Revoke: the role's last tenant takes its privileges with it.
  s.grant_tenant(rb.name());
  {
    colikv::Store other(uri, tenant_options("c"));  // made by the owner's writable open
    other.grant_tenant(rb.name());
  }
  const std::string rb_uri = with_search_path(rb.uri(), {schema});
  CHECK(psql_int(rb_uri, "SELECT count(*) FROM tenants") == 2);
  s.revoke_tenant(rb.name());
  CHECK(psql_int(rb_uri, "SELECT count(*) FROM tenants") == 1);
  const auto gone = failure_of([&] { colikv::Store x(rb_uri, tenant_options("a")); });
  CHECK(gone.first == ErrorCode::kNotFound);
  {
    const Run r = colikv_test::tool({"tenant", uri, "c", "--revoke", rb.name()});
    INFO(r.err);
    CHECK(r.code == 0);
  }
  const Run denied = psql(rb_uri, "SELECT count(*) FROM " + colikv_test::quoted_identifier(schema) + ".chunks");
  INFO(colikv_test::describe({"psql"}, denied));
  CHECK(denied.code != 0);
  CHECK(denied.err.find("permission denied") != std::string::npos);
}

TEST_CASE("tenant roles on a SQLite store: unsupported, said so", "[tenants]") {
  colikv_test::TempDir dir;
  const std::string path = dir.file("s.db");
  append(path, "a", "a1", history(8, 1), 8);
  colikv::Store s(path, tenant_options("a"));
  const auto f = failure_of([&] { s.grant_tenant("alice"); });
  CHECK(f.first == ErrorCode::kUnsupported);
  CHECK(f.second.find("tenant roles need a PostgreSQL store") != std::string::npos);
  const Run r = colikv_test::tool({"tenant", path, "a", "--revoke", "alice"});
  CHECK(r.code == 1);
  CHECK(r.err.find("tenant roles need a PostgreSQL store") != std::string::npos);
}

TEST_CASE("postgres: a store of the schema before tenant roles migrates unchanged, each chunk taking its tenant",
          "[postgres][migrations][tenants]") {
  const std::string now = colikv_test::fresh_pg_schema("now"), old = colikv_test::fresh_pg_schema("old");
  const std::string now_uri = with_search_path(colikv_test::test_pg_uri(), {now});
  const std::string old_uri = with_search_path(colikv_test::test_pg_uri(), {old});
  // What this library writes: two tenants, a fork, a tail in pieces.
  // Each tenant its own model, so that schema 3's models (one row per
  // signature) hold every row of the copy.
  colikv::ModelSignature dm = colikv_test::tiny_model();
  dm.weights_id = "d-weights";
  const EngineBuffers d = colikv_test::branched_history(dm, 50, 0, 11, 11), t = history(37, 22);
  append(now_uri, "", "d1", d, 50);
  append(now_uri, "t", "t1", t, 30);
  append(now_uri, "t", "t1", t, 37);
  {
    colikv::Store s(now_uri, tenant_options("t"));
    s.fork("t1", "t1f", 20);
  }
  // The schema before tenant roles, made by its own migrations (whatever
  // number tenant roles has), holding those rows.
  int roles_version = 0;
  for (const auto& m : colikv::detail::embedded_postgres_migrations())
    if (std::string(m.name).find("tenant_roles") != std::string::npos) roles_version = m.version;
  REQUIRE(roles_version > 1);
  const std::vector<std::string> tables{"tenants", "models", "conversations", "chunks", "conversation_chunks",
                                        "chunk_meta"};
  std::vector<std::string> cols;
  {
    colikv_test::Admin conn(old_uri, colikv_test::Admin::Settings());
    conn.exec("CREATE TABLE colikv_schema (version integer NOT NULL); INSERT INTO colikv_schema VALUES (" +
                  std::to_string(roles_version - 1) + ")",
              "making the old schema");
    for (const auto& m : colikv::detail::embedded_postgres_migrations())
      if (m.version < roles_version) conn.exec(m.sql, m.name);
    for (const std::string& table : tables) {
      cols.push_back(columns_of(old, table));
      conn.exec("INSERT INTO " + table + " (" + cols.back() + ") SELECT " + cols.back() + " FROM " +
                    colikv_test::quoted_identifier(now) + "." + table + " ORDER BY 1 ON CONFLICT DO NOTHING",
                "copying " + table);
    }
    for (const char* id : {"tenants.tenant_id", "models.model_id", "conversations.conversation_id", "chunks.chunk_id"}) {
      const std::string table = std::string(id).substr(0, std::string(id).find('.'));
      const std::string column = std::string(id).substr(table.size() + 1);
      conn.exec("SELECT setval(pg_get_serial_sequence('" + table + "', '" + column + "'), (SELECT max(" + column +
                    ") FROM " + table + "))",
                "moving a sequence on");
    }
    // A chunk no conversation links (another key): no tenant's.
    conn.exec("INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, precision, compression, raw_size, "
              "checksum, payload) SELECT model_id, sha256(hash), first_pos, n_tokens, tokens, precision, compression, "
              "raw_size, checksum, payload FROM chunks ORDER BY chunk_id LIMIT 1",
              "adding an unlinked chunk");
    conn.exec("INSERT INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, chain_hash, "
              "digest) SELECT (SELECT max(chunk_id) FROM chunks), model_id, precision, prev_hash, tokens, payload_bytes, "
              "chain_hash, digest FROM chunk_meta ORDER BY chunk_id LIMIT 1",
              "indexing the unlinked chunk");
  }
  CHECK(cols[0].find("tenant_id") != std::string::npos);
  CHECK(cols[3].find("tenant_id") == std::string::npos);  // chunks: no tenant yet
  std::vector<colikv_test::SqlRows> before;
  for (size_t i = 0; i < tables.size(); ++i)
    before.push_back(store_query(old_uri, "SELECT " + cols[i] + " FROM " + tables[i] + " ORDER BY 1, 2"));

  {
    colikv::Store s(old_uri, tenant_options("t"));  // migrates
    CHECK(s.schema_version() == colikv::detail::latest_postgres_schema_version());
  }
  // Every earlier column byte for byte, payloads and hashes included.
  for (size_t i = 0; i < tables.size(); ++i) {
    INFO(tables[i]);
    CHECK(store_query(old_uri, "SELECT " + cols[i] + " FROM " + tables[i] + " ORDER BY 1, 2") == before[i]);
  }
  {
    colikv::Store s(old_uri, tenant_options("t"));
    CHECK(loads_as(s, "t1", t, 37) == "");
    CHECK(loads_as(s, "t1f", t, 20) == "");
    std::string problems;
    for (const auto& p : s.verify().problems) problems += p.what + "\n";
    CHECK(problems == "chunk is not used by any conversation\n");  // the unlinked one: the owner sees it
  }
  // Each chunk has its conversations' tenant, as the write path sets it; the unlinked one none.
  const std::string tenants_sql = "SELECT ch.chunk_id, ch.tenant_id, k.tenant_id FROM chunks ch "
                                  "JOIN chunk_meta k ON k.chunk_id = ch.chunk_id WHERE ch.tenant_id IS NOT NULL ORDER BY 1";
  CHECK(store_query(old_uri, tenants_sql) == store_query(now_uri, tenants_sql));
  CHECK(store_int(old_uri, "SELECT count(*) FROM chunks WHERE tenant_id IS NULL") == 1);
  CHECK(store_int(old_uri, "SELECT count(*) FROM chunk_meta WHERE tenant_id IS NULL") == 1);
  CHECK(store_int(now_uri, "SELECT count(*) FROM chunks WHERE tenant_id IS NULL") == 0);
  // Nothing is under row-level security, and no role holds a tenant.
  CHECK(store_int(old_uri, "SELECT count(*) FROM tenant_roles") == 0);
  CHECK(store_int(old_uri, "SELECT count(*) FROM pg_class WHERE relnamespace = to_regnamespace(?::text) "
                           "AND relrowsecurity",
                  {old}) == 0);
  colikv::Store s(old_uri, tenant_options(""));
  CHECK(loads_as(s, "d1", d, 50) == "");
  s.append("d2", d.model, d.tokens.data(), 50, d.source());  // the sequences go on
  CHECK(loads_as(s, "d2", d, 50) == "");
  CHECK(s.gc(0).conversations.size() == 2);
}

TEST_CASE("postgres: a chunk whose tenant was changed by hand is corrupt to the tenant's role, and to no one else's data",
          "[postgres][tenants]") {
  const GrantedStore g;
  const std::string &uri = g.uri, &ra_uri = g.ra_uri;
  const EngineBuffers &a = g.a, &b = g.b;
  const std::string a_id = tenant_id_of(uri, "a");
  // One of a1's chunks moved, by hand, out of tenant a (to no tenant).
  colikv_test::store_exec(uri, "UPDATE chunks SET tenant_id = NULL WHERE chunk_id = (SELECT min(chunk_id) FROM chunks "
                               "WHERE tenant_id = " + a_id + ")");
  {
    colikv::Store s(ra_uri, tenant_options("a"));
    EngineBuffers out(a.model, 43);
    out.poison();
    const auto f = failure_of([&] { s.load("a1", a.model, out.tokens.data(), out.capacity, out.target()); });
    INFO(f.second);
    CHECK(f.first == ErrorCode::kCorrupt);
    CHECK(f.second.find("tenant 'a'") != std::string::npos);
    CHECK(colikv_test::untouched_from(out, 0) == "");  // nothing written into the caller's buffers
    const colikv::VerifyReport v = s.verify();
    REQUIRE_FALSE(v.problems.empty());
    CHECK(v.problems[0].conversation == "a1");
  }
  // The owner's reads do not depend on the column; b is untouched.
  {
    colikv::Store s(uri, tenant_options("a"));
    CHECK(loads_as(s, "a1", a, 40) == "");
    colikv::Store t(uri, tenant_options("b"));
    CHECK(loads_as(t, "b1", b, 40) == "");
  }
}

// Schema 6's queue of chunks to free (0006_chunks_to_free.sql), on a store
// whose tenants were granted before it: the roles granted then may use it,
// under the same policy as the chunks.
TEST_CASE("postgres: a granted store of schema 5 gains its queue of chunks to free under the tenants' policy",
          "[postgres][tenants][migrations]") {
  const GrantedStore g;
  const std::string &uri = g.uri, &ra_uri = g.ra_uri;
  const EngineBuffers &a = g.a, &b = g.b;
  colikv_test::store_exec(uri, "DROP TABLE chunks_to_free");
  colikv_test::store_exec(uri, "UPDATE colikv_schema SET version = 5");
  {
    colikv::Store s(uri, tenant_options("a"));  // the owner migrates
    CHECK(s.schema_version() == colikv::detail::latest_postgres_schema_version());
  }
  CHECK(store_int(uri, "SELECT relrowsecurity::int FROM pg_class WHERE oid = 'chunks_to_free'::regclass") == 1);
  const std::string a_id = tenant_id_of(uri, "a"), b_id = tenant_id_of(uri, "b");
  // The role queues for its own tenant, never for another's.
  CHECK(psql(ra_uri, "INSERT INTO chunks_to_free VALUES (987654, " + a_id + ")").code == 0);
  const Run foreign = psql(ra_uri, "INSERT INTO chunks_to_free VALUES (987655, " + b_id + ")");
  CHECK(foreign.code != 0);
  CHECK(foreign.err.find("row-level security") != std::string::npos);
  {
    colikv::Store s(ra_uri, tenant_options("a"));
    s.gc(std::numeric_limits<int64_t>::max());  // frees its queue: that chunk is gone, its row goes
    CHECK(loads_as(s, "a1", a, 40) == "");
    CHECK(s.verify().problems.empty());
  }
  CHECK(store_int(uri, "SELECT count(*) FROM chunks_to_free") == 0);
  colikv::Store t(uri, tenant_options("b"));
  CHECK(loads_as(t, "b1", b, 40) == "");
}
