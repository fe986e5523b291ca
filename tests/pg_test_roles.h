// Server roles for the tests that need more than the suite's one role
// (tests/test_postgres_roles.cpp, tests/test_postgres_tenant_roles.cpp):
// connections as the suite's administrator and login roles dropped at the end;
// and a third connection's lock that releases two racing writers together.
#ifndef COLIKV_TESTS_PG_TEST_ROLES_H
#define COLIKV_TESTS_PG_TEST_ROLES_H

#include <unistd.h>

#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <utility>

#include "backend.h"
#include "cli_run.h"
#include "postgres/pg_connection.h"
#include "test_support.h"

namespace colikv_test {

using Admin = colikv::detail::PgConnection;
inline Admin admin() { return Admin(colikv_test::test_pg_uri(), Admin::Settings()); }

// A login role of the test server, dropped with what it owns when the test ends.
class TestRole {
 public:
  explicit TestRole(const std::string& suffix)
      : name_("colikv_t" + std::to_string(::getpid()) + "_" + suffix), password_("pw-" + suffix + "-x7") {
    Admin a = admin();
    a.exec("DROP ROLE IF EXISTS " + name_ + "; CREATE ROLE " + name_ + " LOGIN PASSWORD '" + password_ + "'",
           "creating a test role");
  }
  ~TestRole() {
    try {
      Admin a = admin();
      a.exec("DROP OWNED BY " + name_ + " CASCADE; DROP ROLE IF EXISTS " + name_, "dropping a test role");
    } catch (const std::exception& e) {
      WARN("test role " << name_ << " not dropped: " << e.what());
    }
  }
  const std::string& name() const { return name_; }
  // The test server's URI as this role.
  std::string uri() const {
    const std::string base = colikv_test::test_pg_uri();
    const size_t from = base.find("://") + 3, at = base.find('@');
    return base.substr(0, from) + name_ + ":" + password_ + base.substr(at);
  }
  // May read and write the store in `schema`, owning none of it.
  void grant_store(const std::string& schema) const {
    const std::string q = quoted_identifier(schema);
    Admin a = admin();
    a.exec("GRANT USAGE ON SCHEMA " + q + " TO " + name_ + "; GRANT ALL ON ALL TABLES IN SCHEMA " + q + " TO " +
               name_ + "; GRANT ALL ON ALL SEQUENCES IN SCHEMA " + q + " TO " + name_,
           "granting a test role a store");
  }

 private:
  std::string name_, password_;
};

// psql, unaligned and quiet, stopping at the first error.
inline Run psql(const std::string& uri, const std::string& sql) {
  const std::string shell = COLIKV_PSQL_SHELL;
  REQUIRE_FALSE(shell.empty());  // psql (Debian postgresql-client) is needed for these tests
  return run_program(shell, {"-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", uri, "-c", sql});
}

inline int64_t psql_int(const std::string& uri, const std::string& sql) {
  const Run r = psql(uri, sql);
  INFO(describe({"psql", sql}, r));
  REQUIRE(r.code == 0);
  return std::stoll(r.out);
}

// Runs first and second on threads of their own while a third connection to
// `uri` holds what `lock_sql` (a SELECT ... FOR UPDATE) locks, until both
// wait for a lock: they reach the held rows together, as no scheduling
// would make them. Their outcomes, in that order.
template <class F1, class F2>
std::pair<Outcome, Outcome> released_together(const std::string& uri, const std::string& lock_sql, F1&& first,
                                              F2&& second) {
  Admin holder(uri, Admin::Settings());
  holder.exec("BEGIN", "holding rows");
  holder.query(lock_sql, "holding rows");
  Outcome r1, r2;
  std::thread t1([&] { r1 = outcome_of(first); });
  std::thread t2([&] { r2 = outcome_of(second); });
  wait_for_pg_lock_waiters(2);
  holder.exec("COMMIT", "releasing the rows");
  t1.join();
  t2.join();
  return {r1, r2};
}

}  // namespace colikv_test

#endif  // COLIKV_TESTS_PG_TEST_ROLES_H
