#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "backend.h"

int main(int argc, char** argv) {
  if (const int skip = colikv_test::check_backend_configured()) return skip;
  return Catch::Session().run(argc, argv);
}
