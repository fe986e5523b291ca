#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

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

// The root: cases (tests/CMakeLists.txt) when not run as root: 77, which
// CTest reports as skipped by name; with COLIKV_REQUIRE_ROOT=1 (CI), 1.
int check_root() {
  const char* as_root = std::getenv("COLIKV_TEST_AS_ROOT");
  if (!as_root || std::string(as_root) != "1" || ::geteuid() == 0) return 0;
  const char* require = std::getenv("COLIKV_REQUIRE_ROOT");
  if (require && std::string(require) == "1") {
    std::fprintf(stderr, "COLIKV_REQUIRE_ROOT=1 but the tests do not run as root: this case needs root\n");
    return 1;
  }
  std::fprintf(stderr, "skipped: this case needs root (it mounts a file system or makes namespaces)\n");
  return 77;
}

}  // namespace

CATCH_REGISTER_LISTENER(SchemaCleanup)

int main(int argc, char** argv) {
  if (const int skip = colikv_test::check_backend_configured()) return skip;
  if (const int skip = check_root()) return skip;
  const int failed = Catch::Session().run(argc, argv);
  return failed != 0 ? failed : schemas_left ? 1 : 0;
}
