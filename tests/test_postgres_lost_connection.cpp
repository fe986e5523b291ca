// A Store whose server connection is lost inside a transaction (issue 33,
// defect 6): its backend terminated from another connection while it runs
// COMMIT, or the last-used update of a load. The next calls, reads included,
// reconnect and answer; none fails as the rest of the lost transaction.
// The moment is the server's: a trigger sleeps in the statement until the
// test sees the backend there (pg_stat_activity) and terminates it. Run
// only as postgres:... tests (tag [postgres]).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "backend.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "postgres/pg_catalog.h"
#include "postgres/pg_connection.h"
#include "store/store_impl.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv_test::EngineBuffers;
using colikv_test::loads_as;

namespace {

using colikv::detail::PgConnection;
using colikv::detail::PgParams;

PgConnection& connection_of(colikv::Store& s) {
  return static_cast<colikv::detail::PgCatalog&>(colikv::detail::StoreAccess::catalog(s)).connection();
}

colikv::Options options() {
  colikv::Options o;
  o.chunk_target_bytes = 4 * colikv_test::tiny_model().record_bytes();
  return o;
}

// Terminates backend `pid` once it runs a statement starting with `sql`
// (what a trigger holds it in); false when it never got there.
bool terminate_when_running(const std::string& uri, int64_t pid, const std::string& sql) {
  PgConnection admin(uri, PgConnection::Settings());
  PgParams p;
  p.add(pid).add(sql);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < give_up) {
    if (admin.query("SELECT pg_terminate_backend(pid, 5000)::int FROM pg_stat_activity WHERE pid = $1::int "
                    "AND state = 'active' AND starts_with(query, $2::text)",
                    p, "terminating the store's backend")
            .size() > 0)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Every read the issue names, on the same Store: all answer.
void reads_answer(colikv::Store& s, const std::string& id, int64_t count) {
  INFO("after the lost connection");
  CHECK(s.count(id) == count);
  CHECK(s.exists(id));
  CHECK(s.list().size() == 1);
  CHECK(s.info(id).tokens == count);
}

}  // namespace

TEST_CASE("postgres: a connection lost during COMMIT leaves the Store answering every later call", "[postgres]") {
  const std::string uri = colikv_test::fresh_pg_store();
  colikv::Store s(uri, options());
  const EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), 64, 3);
  s.append("c", h.model, h.tokens.data(), 32, h.source());
  // COMMIT sleeps in a deferred trigger of the conversation's update.
  colikv_test::store_exec(uri,
                          "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS "
                          "$$BEGIN PERFORM pg_sleep(60); RETURN NULL; END$$");
  colikv_test::store_exec(uri,
                          "CREATE CONSTRAINT TRIGGER slow_commit AFTER UPDATE ON conversations DEFERRABLE "
                          "INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()");
  const int64_t pid = connection_of(s).query("SELECT pg_backend_pid()::bigint", "test").int64(0, 0);
  bool terminated = false;
  std::thread killer([&] { terminated = terminate_when_running(colikv_test::test_pg_uri(), pid, "COMMIT"); });
  std::string message;
  const ErrorCode code = colikv_test::error_code_of([&] {
    try {
      s.append("c", h.model, h.tokens.data(), 64, h.source());
    } catch (const colikv::Error& e) {
      message = e.what();
      throw;
    }
  });
  killer.join();
  REQUIRE(terminated);
  INFO(message);
  CHECK(code == ErrorCode::kIO);
  colikv_test::store_exec(uri, "DROP TRIGGER slow_commit ON conversations");
  reads_answer(s, "c", 32);  // the server rolled the turn back
  s.append("c", h.model, h.tokens.data(), 64, h.source());
  CHECK(loads_as(s, "c", h, 64) == "");
}

TEST_CASE("postgres: a connection lost in a load's last-used update leaves the Store answering every later call",
          "[postgres]") {
  const std::string uri = colikv_test::fresh_pg_store();
  colikv::Store s(uri, options());
  const EngineBuffers h = colikv_test::history(colikv_test::tiny_model(), 40, 4);
  s.append("c", h.model, h.tokens.data(), 40, h.source());
  // The update of the conversation's row sleeps (a load's read changes no row).
  colikv_test::store_exec(uri,
                          "CREATE FUNCTION slow_update() RETURNS trigger LANGUAGE plpgsql AS "
                          "$$BEGIN PERFORM pg_sleep(60); RETURN NEW; END$$");
  colikv_test::store_exec(uri,
                          "CREATE TRIGGER slow_update BEFORE UPDATE ON conversations FOR EACH ROW "
                          "EXECUTE FUNCTION slow_update()");
  const int64_t pid = connection_of(s).query("SELECT pg_backend_pid()::bigint", "test").int64(0, 0);
  bool terminated = false;
  std::thread killer(
      [&] { terminated = terminate_when_running(colikv_test::test_pg_uri(), pid, "UPDATE conversations SET last_used_ms"); });
  // The load itself succeeded: its last use is recorded at best.
  CHECK(loads_as(s, "c", h, 40) == "");
  killer.join();
  REQUIRE(terminated);
  colikv_test::store_exec(uri, "DROP TRIGGER slow_update ON conversations");
  reads_answer(s, "c", 40);
  CHECK(loads_as(s, "c", h, 40) == "");
}
