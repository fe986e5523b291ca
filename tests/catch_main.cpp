#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "backend.h"

namespace {

bool schemas_left = false;

// Drops the test case's PostgreSQL schemas when it ends, whatever its result,
// so that a developer's own server does not fill up; a schema that cannot be
// dropped fails the run.
class SchemaCleanup : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    if (colikv_test::drop_test_schemas() != 0) {
      std::fprintf(stderr, "after the test case '%s'\n", stats.testInfo.name.c_str());
      schemas_left = true;
    }
    TestEventListenerBase::testCaseEnded(stats);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(SchemaCleanup)

int main(int argc, char** argv) {
  if (const int skip = colikv_test::check_backend_configured()) return skip;
  const int failed = Catch::Session().run(argc, argv);
  return failed != 0 ? failed : schemas_left ? 1 : 0;
}
