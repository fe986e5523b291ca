// The views a person reads at psql, as those at the sqlite3 shell
// (tests/test_cli_views.cpp): unique bytes, stored/raw, tenants by name and in
// a view of their own, metadata and zoned times; a tenant's role reading the
// new view sees its tenant only. Through the real psql. Tag [postgres].
#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "backend.h"
#include "cli_run.h"
#include "colikv/store.h"
#include "pg_test_roles.h"
#include "test_support.h"

using colikv_test::EngineBuffers;
using colikv_test::Run;

namespace {

colikv::Options tenant_options(const std::string& tenant) {
  colikv::Options o;
  o.chunk_target_bytes = 4 * colikv_test::tiny_model().record_bytes();
  o.tenant = tenant;
  return o;
}

// psql, unaligned and quiet, stopping at the first error; its output.
std::string psql(const std::string& uri, const std::string& sql) {
  const std::string shell = COLIKV_PSQL_SHELL;
  REQUIRE_FALSE(shell.empty());  // psql (Debian postgresql-client) is needed for these tests
  const Run r = colikv_test::run_program(shell, {"-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", uri, "-c", sql});
  INFO(colikv_test::describe({"psql", sql}, r));
  REQUIRE(r.code == 0);
  return r.out;
}

}  // namespace

TEST_CASE("postgres: psql sees unique bytes, stored/raw, tenants by name, metadata and zoned times", "[postgres]") {
  const std::string schema = colikv_test::fresh_pg_schema();
  const std::string uri = colikv_test::with_search_path(colikv_test::test_pg_uri(), {schema});
  const EngineBuffers h = colikv_test::branched_history(colikv_test::tiny_model(), 40, 0, 1, 1);
  const EngineBuffers g = colikv_test::branched_history(colikv_test::tiny_model(), 20, 0, 2, 2);
  {
    colikv::Store s(uri, tenant_options(""));
    s.append("long", h.model, h.tokens.data(), 40, h.source());
    s.fork("long", "long-fork", 17);
    s.set_metadata("long", R"({"user":"u-7"})");
    colikv::Store a(uri, tenant_options("alice"));
    a.append("a1", g.model, g.tokens.data(), 20, g.source());
  }
  // The old columns first, in their order, then the new ones.
  CHECK(psql(uri, "SELECT string_agg(column_name::text, ',' ORDER BY ordinal_position) FROM "
                  "information_schema.columns WHERE table_schema = current_schema() "
                  "AND table_name = 'conversation_summary'") ==
        "conversation,model,tokens,precision,raw_bytes,stored_bytes,ratio,evicted,title,forked_from,created,updated,"
        "last_used,tenant,unique_bytes,stored_ratio,tenant_name,metadata,created_utc,updated_utc,last_used_utc\n");
  // The fork shares long's first chunks: neither holds them alone.
  const int64_t shared = std::stoll(psql(uri, "SELECT sum(octet_length(payload)) FROM chunks WHERE chunk_id IN "
                                              "(SELECT chunk_id FROM conversation_chunks GROUP BY chunk_id "
                                              "HAVING count(*) > 1)"));
  REQUIRE(shared > 0);
  CHECK(psql(uri, "SELECT conversation, stored_bytes - unique_bytes FROM conversation_summary ORDER BY conversation") ==
        "a1|0\nlong|" + std::to_string(shared) + "\nlong-fork|" + std::to_string(shared) + "\n");
  CHECK(psql(uri, "SELECT count(*) FROM conversation_summary WHERE abs(stored_ratio * ratio - 1) < 0.005") == "3\n");
  CHECK(psql(uri, "SELECT count(*) FROM conversation_summary WHERE stored_ratio = round(stored_bytes::numeric / "
                  "raw_bytes, 3)") == "3\n");
  CHECK(psql(uri, "SELECT conversation, tenant, tenant_name, metadata FROM conversation_summary ORDER BY conversation") ==
        "a1|alice|alice|{}\nlong||(default)|{\"user\":\"u-7\"}\nlong-fork||(default)|{}\n");
  const std::string times = psql(uri, "SELECT created_utc, last_used_utc FROM conversation_summary WHERE conversation = 'long'");
  CHECK(std::regex_match(times, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\n)")));
  CHECK(psql(uri, "SELECT count(*) FROM conversation_summary WHERE created_utc::timestamptz = created") == "3\n");
  CHECK(psql(uri, "SELECT tenant, tenant_name, conversations, tokens, created_utc IS NULL FROM tenant_summary "
                  "ORDER BY tenant") == "|(default)|2|57|t\nalice|alice|1|20|f\n");
  CHECK(psql(uri, "SELECT sum(stored_bytes) = (SELECT sum(octet_length(payload)) FROM chunks) FROM tenant_summary") ==
        "t\n");

  // A tenant's role reads the new view under its policies: its tenant only.
  const colikv_test::TestRole ra{"rv"};
  {
    colikv::Store a(uri, tenant_options("alice"));
    a.grant_tenant(ra.name());
  }
  const std::string ra_uri = colikv_test::with_search_path(ra.uri(), {schema});
  CHECK(psql(ra_uri, "SELECT tenant, conversations FROM tenant_summary ORDER BY tenant") == "alice|1\n");
  CHECK(psql(ra_uri, "SELECT conversation FROM conversation_summary") == "a1\n");
}
