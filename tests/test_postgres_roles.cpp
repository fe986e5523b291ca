// What a server store meets from outside the suite's one role: other roles
// and search_paths on one store, schema names that need quoting, a server
// that closes an idle connection, its statement timeout, vacuum by a role that
// does not own the tables, a column whose type was changed by hand. Tag
// [postgres]: run as postgres:... tests, one at a time (one restarts the server).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "backend.h"
#include "cli_run.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "pg_test_roles.h"
#include "postgres/pg_connection.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv_test::EngineBuffers;
using colikv_test::loads_as;
using colikv_test::quoted_identifier;
using colikv_test::with_search_path;
using colikv_test::Admin;
using colikv_test::admin;
using colikv_test::TestRole;

namespace {

colikv::Options small_chunks() {
  colikv::Options o;
  o.chunk_target_bytes = 4 * colikv_test::tiny_model().record_bytes();
  return o;
}

// Positions [0, shared) from seed 1 (the common history), the rest from `seed`.
EngineBuffers branch(int64_t n, int64_t shared, uint32_t seed) {
  return colikv_test::branched_history(colikv_test::tiny_model(), n, shared, 1, seed);
}

using colikv_test::Outcome;
using colikv_test::outcome_of;

}  // namespace

TEST_CASE("postgres: two roles with other search_paths racing on one store lose no update", "[postgres]") {
  // Role alice owns an (empty) schema of her own first in her search_path:
  // her current_schema() is not the store's, yet her writes reach its tables.
  const std::string store = colikv_test::fresh_pg_schema();
  const std::string own = colikv_test::fresh_pg_schema("alice");
  TestRole alice("alice");
  const std::string uri = with_search_path(colikv_test::test_pg_uri(), {store});
  const std::string alice_uri = with_search_path(alice.uri(), {own, store});
  colikv::Options o = small_chunks();
  o.busy_timeout_ms = 60000;
  const EngineBuffers base = branch(100, 100, 1), one = branch(200, 100, 2), two = branch(200, 100, 3);
  {
    colikv::Store s(uri, o);
    s.append("race", base.model, base.tokens.data(), 100, base.source());
  }
  alice.grant_store(store);
  Admin a = admin();
  a.exec("ALTER SCHEMA " + quoted_identifier(own) + " OWNER TO " + alice.name(), "giving alice her schema");

  // Both writers inside their transactions at once: a third connection holds
  // the conversation's row until both wait for a lock.
  colikv::Store host1(uri, o), host2(alice_uri, o);
  const auto [r1, r2] = colikv_test::released_together(
      uri, "SELECT 1 FROM conversations WHERE name = 'race' FOR UPDATE",
      [&] { host1.append("race", one.model, one.tokens.data(), 200, one.source()); },
      [&] { host2.append("race", two.model, two.tokens.data(), 200, two.source()); });

  INFO("host 1: " << r1.message << "; host 2: " << r2.message);
  // One of them wins; the other learns that it lost (never both OK).
  REQUIRE(((r1.code == ErrorCode::kOk) != (r2.code == ErrorCode::kOk)));
  const Outcome& lost = r1.code == ErrorCode::kOk ? r2 : r1;
  CHECK((lost.code == ErrorCode::kConflict || lost.code == ErrorCode::kDiverged));
  colikv::Store s(uri, o);
  CHECK(s.count("race") == 200);
  CHECK(loads_as(s, "race", r1.code == ErrorCode::kOk ? one : two, 200) == "");
  const colikv::VerifyReport v = s.verify();
  CHECK(v.ok());
}

TEST_CASE("postgres: schemas named \"MyStore\" and \"a.b\" are measured and vacuumed as themselves", "[postgres]") {
  // A lowercase twin with more data: a name parsed again would measure it instead.
  const std::string mixed = colikv_test::fresh_pg_schema("MyStore");
  const std::string lower = colikv_test::fresh_pg_schema("mystore");
  const std::string dotted = colikv_test::fresh_pg_schema("a.b");
  const std::string mixed_lower = mixed.substr(0, mixed.size() - 7) + "mystore";
  const EngineBuffers h = branch(300, 300, 4);
  {
    // The twin of mixed's name folded to lower case, holding more.
    const std::string twin = with_search_path(colikv_test::test_pg_uri(), {mixed_lower});
    Admin a = admin();
    a.exec("CREATE SCHEMA IF NOT EXISTS " + quoted_identifier(mixed_lower), "creating the twin");
    colikv::Store t(twin, small_chunks());
    t.append("big", h.model, h.tokens.data(), 300, h.source());
  }
  for (const std::string& schema : {mixed, dotted, lower}) {
    INFO(schema);
    const std::string uri = with_search_path(colikv_test::test_pg_uri(), {schema});
    colikv::Store s(uri, small_chunks());
    s.append("c", h.model, h.tokens.data(), 20, h.source());
    const int64_t own_bytes = colikv_test::store_int(
        colikv_test::test_pg_uri(),
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = ?",
        {schema});
    CHECK(s.stats().file_bytes == own_bytes);
    const colikv::VacuumReport v = s.vacuum();
    CHECK(v.file_bytes_before == own_bytes);
    CHECK(s.count("c") == 20);
  }
  Admin a = admin();
  a.exec("DROP SCHEMA " + quoted_identifier(mixed_lower) + " CASCADE", "dropping the twin");
}

TEST_CASE("postgres: a call after the server closed an idle connection reconnects and goes on", "[postgres]") {
  const EngineBuffers h = branch(300, 300, 5);
  SECTION("a server restart") {
    const std::string uri = colikv_test::fresh_pg_store();
    colikv::Store s(uri, small_chunks());
    s.append("idle", h.model, h.tokens.data(), 100, h.source());
    const char* dir = std::getenv("COLIKV_TEST_PG_DIR");
    REQUIRE(dir != nullptr);  // tools/dev.sh test sets it
    const std::string restart =
        std::string(COLIKV_SOURCE_DIR) + "/tools/postgres.sh pg_ctl " + dir + " restart -m fast -w -t 60 > /dev/null";
    REQUIRE(std::system(restart.c_str()) == 0);
    s.append("idle", h.model, h.tokens.data(), 200, h.source());
    REQUIRE(std::system(restart.c_str()) == 0);
    CHECK(loads_as(s, "idle", h, 200) == "");
    REQUIRE(std::system(restart.c_str()) == 0);
    s.append_async("idle", h.model, h.tokens.data(), 300, h.source());
    s.wait("idle");
    CHECK(s.count("idle") == 300);
  }
  SECTION("the server's idle_session_timeout") {
    const std::string uri = colikv_test::fresh_pg_store() + "%20-cidle_session_timeout%3D200";
    colikv::Store s(uri, small_chunks());
    s.append("idle", h.model, h.tokens.data(), 100, h.source());
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the server closes it meanwhile
    s.append("idle", h.model, h.tokens.data(), 200, h.source());
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    CHECK(s.count("idle") == 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    CHECK(loads_as(s, "idle", h, 200) == "");
  }
}

TEST_CASE("postgres: a transaction whose connection is lost still fails, and changes nothing", "[postgres]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers h = branch(200, 200, 6);
  colikv::Options o = small_chunks();
  o.busy_timeout_ms = 60000;
  colikv::Store s(uri, o);
  s.append("c", h.model, h.tokens.data(), 100, h.source());
  Admin blocker(uri, Admin::Settings());
  blocker.exec("BEGIN; SELECT 1 FROM conversations WHERE name = 'c' FOR UPDATE", "holding the row");
  Outcome r;
  std::thread writer([&] { r = outcome_of([&] { s.append("c", h.model, h.tokens.data(), 200, h.source()); }); });
  colikv_test::wait_for_pg_lock_waiters(1);
  // The writer's backend goes while its transaction waits for the row.
  colikv_test::store_exec(colikv_test::test_pg_uri(),
                          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                          "AND application_name = 'colikv'");
  writer.join();
  blocker.exec("COMMIT", "releasing the row");
  INFO(r.message);
  CHECK(r.code == ErrorCode::kIO);
  CHECK(s.count("c") == 100);
  CHECK(s.verify().ok());
  s.append("c", h.model, h.tokens.data(), 200, h.source());  // the next call reconnects
  CHECK(loads_as(s, "c", h, 200) == "");
}

TEST_CASE("postgres: a statement timeout is reported as the server's, not as lock contention", "[postgres]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers h = branch(200, 200, 7);
  colikv::Options o = small_chunks();
  o.busy_timeout_ms = 60000;  // colikv's lock wait is not what fires
  colikv::Store s(uri + "%20-cstatement_timeout%3D300", o);
  s.append("c", h.model, h.tokens.data(), 100, h.source());
  Admin blocker(uri, Admin::Settings());
  blocker.exec("BEGIN; SELECT 1 FROM conversations WHERE name = 'c' FOR UPDATE", "holding the row");
  const Outcome r = outcome_of([&] { s.append("c", h.model, h.tokens.data(), 200, h.source()); });
  blocker.exec("COMMIT", "releasing the row");
  INFO(r.message);
  CHECK(r.code == ErrorCode::kBusy);
  CHECK(r.message.find("statement_timeout") != std::string::npos);
  CHECK(r.message.find("busy timeout") == std::string::npos);
  CHECK(s.count("c") == 100);
}

TEST_CASE("postgres: vacuum by a role that does not own the tables fails with the server's warning", "[postgres]") {
  const std::string schema = colikv_test::fresh_pg_schema();
  const std::string uri = with_search_path(colikv_test::test_pg_uri(), {schema});
  const EngineBuffers h = branch(40, 40, 8);
  {
    colikv::Store s(uri, small_chunks());
    s.append("c", h.model, h.tokens.data(), 40, h.source());
  }
  TestRole bob("bob");
  bob.grant_store(schema);
  const std::string bob_uri = with_search_path(bob.uri(), {schema});
  colikv::Store s(bob_uri, small_chunks());
  CHECK(s.count("c") == 40);  // bob may use the store
  const Outcome r = outcome_of([&] { s.vacuum(); });
  INFO(r.message);
  CHECK(r.code == ErrorCode::kReadOnly);
  CHECK(r.message.find("nothing was vacuumed") != std::string::npos);
  CHECK(r.message.find("conversation_chunks") != std::string::npos);
  CHECK(r.message.find("owner") != std::string::npos);  // the server's own words
  const colikv_test::Run cli = colikv_test::tool({"vacuum", bob_uri});
  CHECK(cli.code != 0);
  CHECK(cli.err.find("nothing was vacuumed") != std::string::npos);
  CHECK(cli.err.find("pw-bob") == std::string::npos);
}

TEST_CASE("postgres: a column whose type was changed by hand is refused naming its type", "[postgres]") {
  const std::string uri = colikv_test::fresh_pg_store();
  const EngineBuffers h = branch(20, 20, 9);
  {
    colikv::Store s(uri, small_chunks());
    s.append("c", h.model, h.tokens.data(), 20, h.source());
  }
  // (The convenience view depends on the column: whoever changes it by hand drops the view first.)
  colikv_test::store_exec(uri, "DROP VIEW conversation_summary, model_summary, tenant_summary");
  colikv_test::store_exec(uri, "ALTER TABLE conversations ALTER COLUMN token_count TYPE double precision");
  colikv::Store s(uri, small_chunks());
  const Outcome r = outcome_of([&] { s.count("c"); });
  INFO(r.message);
  CHECK(r.code == ErrorCode::kCorrupt);
  CHECK(r.message.find("token_count") != std::string::npos);
  CHECK(r.message.find("double precision") != std::string::npos);
}

TEST_CASE("postgres: a password never shows, whatever its characters or the scheme's case", "[postgres]") {
  const std::string schema = colikv_test::fresh_pg_schema();
  TestRole carol("carol");  // her password is pw-carol-x7
  Admin a = admin();
  // Characters that end a naive URI parse early; libpq reads the user info up to '@'.
  a.exec("ALTER ROLE " + carol.name() + " PASSWORD 'S3cr?t#x'", "setting a password");
  a.exec("ALTER SCHEMA " + quoted_identifier(schema) + " OWNER TO " + carol.name(), "giving carol the store");
  std::string uri = with_search_path(carol.uri(), {schema});
  uri.replace(uri.find("pw-carol-x7"), 11, "S3cr?t#x");
  uri.replace(0, uri.find("://"), "POSTGRESQL");
  colikv_test::TempDir dir;
  const std::string sample = std::string(COLIKV_SAMPLE_DIR) + "/glm_tiny_nodsa_51.coli_kv";
  const std::vector<std::vector<std::string>> commands = {
      {"import", uri, sample, "--id", "s", "--progress"},
      {"ls", uri, "--json"},
      {"stats", uri, "--json"},
      {"verify", uri, "--json"},
      {"verify", uri, "--progress"},
      {"export", uri, "s", dir.file("out.coli_kv"), "--progress"},
      {"vacuum", uri, "--json"},
  };
  for (const auto& args : commands) {
    const colikv_test::Run r = colikv_test::tool(args);
    INFO(args[0] << ": " << r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("S3cr") == std::string::npos);
    CHECK(r.err.find("S3cr") == std::string::npos);
  }
  const colikv_test::Run missing = colikv_test::tool({"info", uri, "nobody"});
  CHECK(missing.code != 0);
  CHECK(missing.err.find("nobody") != std::string::npos);
  CHECK(missing.err.find("S3cr") == std::string::npos);
  // The password libpq refuses: the error names the server, not the password.
  std::string wrong = uri;
  wrong.replace(wrong.find("S3cr?t#x"), 8, "Wr0ng?p/w");
  const colikv_test::Run refused = colikv_test::tool({"ls", wrong, "--json"});
  CHECK(refused.code != 0);
  CHECK(refused.err.find("Wr0ng") == std::string::npos);
  CHECK(refused.err.find("p/w") == std::string::npos);
}
