// What one tenant's role may write that another tenant's statements meet
// (issue 33, defects 4 and 5; migrations/postgres/0007_tenant_writes.sql and
// 0009_parent_tenant.sql):
// with psql, role A tries every row its grant let it write ahead of tenant
// B (identity values, queue rows, model rows); B's writes then all succeed
// as if A had done nothing. Tag [postgres] (one at a time).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backend.h"
#include "cli_run.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "pg_test_roles.h"
#include "postgres/pg_migrations.h"
#include "test_support.h"

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

EngineBuffers history(const colikv::ModelSignature& m, int64_t n, uint32_t seed) {
  return colikv_test::branched_history(m, n, 0, seed, seed);
}

// A store of tenants a and b, each with a conversation, granted to roles ra and rb.
struct TwoTenants {
  TwoTenants() {
    for (const char* t : {"a", "b"}) {
      colikv::Store s(uri, tenant_options(t));
      const EngineBuffers h = history(colikv_test::tiny_model(), 40, t[0]);
      s.append(std::string(t) + "1", h.model, h.tokens.data(), 40, h.source());
      s.grant_tenant(t[0] == 'a' ? ra.name() : rb.name());
    }
    a_id = std::to_string(store_int(uri, "SELECT tenant_id FROM tenants WHERE name = 'a'"));
    b_id = std::to_string(store_int(uri, "SELECT tenant_id FROM tenants WHERE name = 'b'"));
  }
  const std::string schema = colikv_test::fresh_pg_schema();
  const std::string uri = with_search_path(colikv_test::test_pg_uri(), {schema});
  const TestRole ra{"ra"}, rb{"rb"};
  const std::string ra_uri = with_search_path(ra.uri(), {schema}), rb_uri = with_search_path(rb.uri(), {schema});
  std::string a_id, b_id;
};

// psql as `uri` ran `sql` and the server refused it, for `why`.
void refused(const std::string& uri, const std::string& sql, const std::string& why) {
  const Run r = psql(uri, sql);
  INFO(sql << "\n" << r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find(why) != std::string::npos);
}

}  // namespace

TEST_CASE("postgres: a tenant's role cannot choose an id, so no row of it fails another tenant's writes",
          "[postgres][tenants]") {
  const TwoTenants t;
  const std::string next_conversation = "(SELECT max(conversation_id) FROM conversations) + g";
  const std::string next_chunk = "(SELECT max(chunk_id) FROM chunks) + g";
  // Ids just ahead of the shared sequences (A sees only its own: it takes
  // a range, skipping the taken ones), as INSERT, as OVERRIDING SYSTEM
  // VALUE, as UPDATE.
  refused(t.ra_uri,
          "INSERT INTO conversations (conversation_id, name, model_id, created_ms, updated_ms, last_used_ms, "
          "tenant_id) SELECT " + next_conversation + ", 'squat' || g, (SELECT min(model_id) FROM models), 0, 0, 0, " +
              t.a_id + " FROM generate_series(1, 200) g ON CONFLICT DO NOTHING",
          "permission denied");
  refused(t.ra_uri,
          "INSERT INTO conversations (conversation_id, name, model_id, created_ms, updated_ms, last_used_ms, "
          "tenant_id) OVERRIDING SYSTEM VALUE SELECT " + next_conversation +
              ", 'squat' || g, (SELECT min(model_id) FROM models), 0, 0, 0, " + t.a_id +
              " FROM generate_series(1, 200) g ON CONFLICT DO NOTHING",
          "permission denied");
  refused(t.ra_uri,
          "INSERT INTO chunks (chunk_id, model_id, hash, first_pos, n_tokens, tokens, compression, raw_size, "
          "checksum, tenant_id) SELECT " + next_chunk + ", (SELECT min(model_id) FROM models), decode(md5(g::text), "
          "'hex'), 0, 1, '[1]', 'none', 1, 0, " + t.a_id + " FROM generate_series(1, 200) g ON CONFLICT DO NOTHING",
          "permission denied");
  refused(t.ra_uri, "UPDATE conversations SET conversation_id = conversation_id + 1000", "permission denied");
  refused(t.ra_uri, "UPDATE chunks SET chunk_id = chunk_id + 1000", "permission denied");
  // What the grant still gives: its own rows, ids from the sequence.
  CHECK(psql(t.ra_uri, "INSERT INTO conversations (name, model_id, created_ms, updated_ms, last_used_ms, tenant_id) "
                       "SELECT 'own', min(model_id), 0, 0, 0, " + t.a_id + " FROM models")
            .code == 0);
  CHECK(psql_int(t.ra_uri, "WITH r AS (UPDATE conversations SET title = 'x' RETURNING 1) SELECT count(*) FROM r") == 2);

  // A queued chunk is the queuer's: a row of A naming B's chunk id leaves B's own queueing of it in place.
  const std::string b_chunk = std::to_string(
      store_int(t.uri, "SELECT min(chunk_id) FROM chunks WHERE tenant_id = " + t.b_id));
  CHECK(psql(t.ra_uri, "INSERT INTO chunks_to_free (chunk_id, tenant_id) VALUES (" + b_chunk + ", " + t.a_id + ")")
            .code == 0);
  // What free_unused_chunks runs (pg_catalog.cpp).
  CHECK(psql_int(t.rb_uri, "WITH r AS (INSERT INTO chunks_to_free (chunk_id, tenant_id) SELECT unnest('{" + b_chunk +
                               "}'::bigint[]), " + t.b_id + " ON CONFLICT DO NOTHING RETURNING 1) SELECT count(*) FROM r") ==
        1);
  CHECK(psql_int(t.rb_uri, "WITH r AS (DELETE FROM chunks_to_free RETURNING 1) SELECT count(*) FROM r") == 1);

  // Every new conversation and chunk of B, and a fork, after all that.
  colikv::Store b(t.rb_uri, tenant_options("b"));
  for (int i = 0; i < 6; ++i) {
    const EngineBuffers h = history(colikv_test::tiny_model(), 40, static_cast<uint32_t>(100 + i));
    const std::string id = "b-new-" + std::to_string(i);
    REQUIRE_NOTHROW(b.append(id, h.model, h.tokens.data(), 40, h.source()));
    CHECK(loads_as(b, id, h, 40) == "");
  }
  REQUIRE_NOTHROW(b.fork("b1", "b1-fork", 22));
  CHECK(b.count("b1-fork") == 22);
  CHECK(b.verify().ok());
}

TEST_CASE("postgres: a tenant's model rows are its own, and only rows colikv writes are accepted",
          "[postgres][tenants]") {
  const TwoTenants t;
  // The models B will use, recorded first by A with values colikv never
  // writes (W3, W4), or with a chunk size B would not choose (W2).
  const std::string sig = "n_layers=2 kv_lora=8 qk_rope=4 index_hd=0 n_indexed=0 vocab=50000 weights=";
  const auto row = [&](const std::string& w, const std::string& fields, const std::string& tenant) {
    return "INSERT INTO models (signature, n_layers, kv_lora, qk_rope, index_hd, n_indexed, vocab, weights_id, "
           "record_bytes, chunk_tokens, created_ms, tenant_id) VALUES ('" + sig + w + "', " + fields + ", 0, " +
           tenant + ")";
  };
  // Another tenant's row: the policy refuses it.
  refused(t.ra_uri, row("W2", "2, 8, 4, 0, 0, 50000, 'W2', 100, 1", t.b_id), "row-level security");
  // Its own rows: only those colikv writes, whoever inserts them (the owner too).
  for (const std::string& uri : {t.ra_uri, t.uri}) {
    refused(uri, row("W3", "2, 8, 4, 0, 0, 50000, 'W3', 100, 9000000000000000000", t.a_id), "models_chunk_tokens");
    refused(uri, row("W4", "3, 16, 4, 0, 0, 50000, 'W4', 244, 64", t.a_id), "models_signature_fields");
    refused(uri, row("W5", "2, 8, 4, 0, 0, 50000, 'W5', 7, 64", t.a_id), "models_record_bytes");
    refused(uri, row("W6", "2, 8, 4, 0, 0, 50000, 'W6', 100, 48", t.a_id), "models_chunk_tokens");
  }
  refused(t.ra_uri, "UPDATE models SET chunk_tokens = 1", "permission denied");
  CHECK(psql(t.ra_uri, row("W2", "2, 8, 4, 0, 0, 50000, 'W2', 100, 1", t.a_id)).code == 0);  // valid, and A's alone
  CHECK(psql_int(t.rb_uri, "SELECT count(*) FROM models") == 1);  // B sees its own model only

  colikv::ModelSignature m;
  m.n_layers = 2, m.kv_lora = 8, m.qk_rope = 4, m.vocab = 50000;
  colikv::Options o = tenant_options("b");
  o.chunk_target_bytes = 4 * m.record_bytes();
  colikv::Store b(t.rb_uri, o);
  for (const std::string w : {"W2", "W3", "W4"}) {
    m.weights_id = w;
    const EngineBuffers h = history(m, 300, 7);
    INFO(w);
    REQUIRE_NOTHROW(b.append("conv-" + w, m, h.tokens.data(), 300, h.source()));
    CHECK(loads_as(b, "conv-" + w, h, 300) == "");
    // B's chunk size, from B's own options: 4 positions a chunk.
    CHECK(store_int(t.uri, "SELECT chunk_tokens FROM models WHERE signature = ? AND tenant_id = " + t.b_id,
                    {sig + w}) == 4);
    CHECK(store_int(t.uri, "SELECT count(*) FROM conversation_chunks cc JOIN conversations c USING (conversation_id) "
                           "WHERE c.name = ?",
                    {"conv-" + w}) == 75);
  }
  CHECK(b.verify().ok());
  // A chunk or conversation of A may not name B's model.
  const std::string b_model = std::to_string(
      store_int(t.uri, "SELECT min(model_id) FROM models WHERE tenant_id = " + t.b_id));
  refused(t.ra_uri,
          "INSERT INTO conversations (name, model_id, created_ms, updated_ms, last_used_ms, tenant_id) VALUES "
          "('borrowed', " + b_model + ", 0, 0, 0, " + t.a_id + ")",
          "row-level security");
  refused(t.ra_uri,
          "INSERT INTO chunks (model_id, hash, first_pos, n_tokens, tokens, compression, raw_size, checksum, "
          "tenant_id) VALUES (" + b_model + ", '\\x00', 0, 1, '[1]', 'none', 1, 0, " + t.a_id + ")",
          "row-level security");
}

TEST_CASE("postgres: a granted store of schema 6 gets its models per tenant and its roles' grants without ids",
          "[postgres][tenants][migrations]") {
  // A store of this library, then what schema 6 had: one model row shared
  // by the tenants, and the table-wide grant.
  const TwoTenants t;
  colikv_test::Admin owner(t.uri, colikv_test::Admin::Settings());
  const auto run = [&](const std::string& sql) { owner.exec(sql, "making a store of schema 6"); };
  const std::string shared = std::to_string(store_int(t.uri, "SELECT min(model_id) FROM models"));
  run("UPDATE conversations SET model_id = " + shared);
  run("UPDATE chunks SET model_id = " + shared);
  run("UPDATE chunk_meta SET model_id = " + shared);
  run("DELETE FROM models WHERE model_id <> " + shared);
  // The policies of schema 6 first: they name models.tenant_id.
  run("ALTER POLICY conversations_own ON conversations WITH CHECK (tenant_id IN "
      "(SELECT tenant_id FROM tenant_roles)); ALTER POLICY chunks_own ON chunks WITH CHECK "
      "(tenant_id IN (SELECT tenant_id FROM tenant_roles)); DROP POLICY models_own ON models; "
      "ALTER TABLE models DISABLE ROW LEVEL SECURITY; DROP VIEW model_summary");
  run("ALTER TABLE models DROP COLUMN tenant_id; "
      "ALTER TABLE models ADD CONSTRAINT models_signature_key UNIQUE (signature); "
      "ALTER TABLE models DROP CONSTRAINT models_signature_fields; "
      "ALTER TABLE models DROP CONSTRAINT models_record_bytes; "
      "ALTER TABLE models DROP CONSTRAINT models_chunk_tokens; "
      "ALTER TABLE chunks_to_free DROP CONSTRAINT chunks_to_free_pkey; "
      "ALTER TABLE chunks_to_free ADD PRIMARY KEY (chunk_id); "
      "DROP FUNCTION colikv_grant_tenant_writes(text)");
  // model_summary as schema 6 had it, read as its caller; and schema 6's grant.
  for (const auto& m : colikv::detail::embedded_postgres_migrations())
    if (m.version == 1) {
      const std::string sql = m.sql;
      run(sql.substr(sql.find("CREATE VIEW model_summary")));
    }
  run("ALTER VIEW model_summary SET (security_invoker = true)");
  for (const TestRole* r : {&t.ra, &t.rb})
    run("GRANT SELECT, INSERT, UPDATE, DELETE ON conversations, chunks, chunk_meta, conversation_chunks, "
        "chunks_to_free TO " + r->name() + "; GRANT SELECT, INSERT ON models TO " + r->name() +
        "; GRANT SELECT ON model_summary TO " + r->name());
  run("UPDATE colikv_schema SET version = 6");

  { colikv::Store s(t.uri, tenant_options("a")); }  // the owner migrates
  CHECK(store_int(t.uri, "SELECT max(version) FROM colikv_schema") == colikv::detail::latest_postgres_schema_version());
  // One row per tenant now, each tenant's rows naming its own.
  CHECK(store_int(t.uri, "SELECT count(*) FROM models") == 2);
  CHECK(store_int(t.uri, "SELECT count(*) FROM conversations c JOIN models m USING (model_id) "
                         "WHERE m.tenant_id <> c.tenant_id") == 0);
  CHECK(store_int(t.uri, "SELECT count(*) FROM chunks c JOIN models m USING (model_id) "
                         "WHERE m.tenant_id <> c.tenant_id") == 0);
  CHECK(store_int(t.uri, "SELECT count(*) FROM chunk_meta k JOIN chunks c USING (chunk_id) "
                         "WHERE k.model_id <> c.model_id") == 0);
  // The view still reads as its caller: a role sees its tenant's model.
  CHECK(psql_int(t.ra_uri, "SELECT count(*) FROM model_summary") == 1);
  CHECK(psql_int(t.uri, "SELECT count(*) FROM model_summary") == 2);
  // The roles' grants replaced: no id column, the rest as before.
  for (const TestRole* r : {&t.ra, &t.rb}) {
    INFO(r->name());
    CHECK(store_query(t.uri,
                      "SELECT has_column_privilege(?::text, 'conversations', 'conversation_id', 'INSERT')::text, "
                      "has_column_privilege(?::text, 'chunks', 'chunk_id', 'UPDATE')::text, "
                      "has_column_privilege(?::text, 'conversations', 'name', 'INSERT')::text, "
                      "has_table_privilege(?::text, 'conversations', 'DELETE')::text",
                      {r->name(), r->name(), r->name(), r->name()}) ==
          colikv_test::SqlRows{{"false", "false", "true", "true"}});
  }
  // Each role goes on reading and writing its own.
  for (const char* tenant : {"a", "b"}) {
    colikv::Store s(tenant[0] == 'a' ? t.ra_uri : t.rb_uri, tenant_options(tenant));
    const EngineBuffers h = history(colikv_test::tiny_model(), 40, tenant[0]);
    CHECK(loads_as(s, std::string(tenant) + "1", h, 40) == "");
    s.append(std::string(tenant) + "2", h.model, h.tokens.data(), 40, h.source());
    CHECK(s.match(h.model, h.tokens.data(), 40).tokens == 40);
    CHECK(s.verify().ok());
  }
}

TEST_CASE("postgres: a tenant's role learns nothing of another tenant's conversations from a parent id, nor holds them",
          "[postgres][tenants]") {
  const TwoTenants t;
  const std::string b1 = std::to_string(store_int(t.uri, "SELECT conversation_id FROM conversations WHERE name = 'b1'"));
  const std::string nobody = std::to_string(store_int(t.uri, "SELECT max(conversation_id) + 1000 FROM conversations"));
  const std::string a1 = std::to_string(store_int(t.uri, "SELECT conversation_id FROM conversations WHERE name = 'a1'"));
  const auto insert = [&](const std::string& name, const std::string& parent) {
    return "INSERT INTO conversations (name, model_id, created_ms, updated_ms, last_used_ms, tenant_id, parent_id) "
           "SELECT '" + name + "', min(model_id), 0, 0, 0, " + t.a_id + ", " + parent + " FROM models";
  };
  // B's conversation and an id nobody has are refused alike: the server's
  // foreign key error would tell them apart.
  const Run of_b = psql(t.ra_uri, insert("probe", b1)), of_nobody = psql(t.ra_uri, insert("probe", nobody));
  INFO(of_b.err << "\n" << of_nobody.err);
  CHECK(of_b.code != 0);
  CHECK(of_nobody.code != 0);
  CHECK(of_b.err == of_nobody.err);
  CHECK(of_b.err.find("a conversation's parent must be a conversation of its tenant") != std::string::npos);
  refused(t.ra_uri, "UPDATE conversations SET parent_id = " + b1, "a conversation's parent must be");
  // A parent of its own tenant, as a fork writes it, is taken.
  CHECK(psql(t.ra_uri, insert("own-fork", a1)).code == 0);
  CHECK(store_int(t.uri, "SELECT count(*) FROM conversations WHERE parent_id = " + b1) == 0);
  // No row of A names b1: B's rm of it meets none; A's forks still go in.
  colikv::Store b(t.rb_uri, tenant_options("b"));
  b.remove("b1");
  CHECK_FALSE(b.exists("b1"));
  colikv::Store a(t.ra_uri, tenant_options("a"));
  a.fork("a1", "a1-fork", 10);
  CHECK(a.count("a1-fork") == 10);
}
