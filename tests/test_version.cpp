// The version is written once (colikv/version.h): the macros, the C and C++
// calls and the version CMake gives colikv.pc and the package agree.
#include <catch2/catch.hpp>

#include <string>

#include "colikv/colikv.h"
#include "colikv/version.h"

TEST_CASE("version: the header, the C and C++ calls and CMake's project version agree", "[version]") {
  CHECK(std::string(colikv_version()) == COLIKV_VERSION_STRING);
  CHECK(std::string(colikv::version()) == COLIKV_VERSION_STRING);
  CHECK(colikv_version_number() == COLIKV_VERSION_NUMBER);
  CHECK(colikv::version_number() == colikv::kVersionNumber);
  CHECK(COLIKV_VERSION_NUMBER == COLIKV_VERSION_MAJOR * 10000 + COLIKV_VERSION_MINOR * 100 + COLIKV_VERSION_PATCH);
  const std::string parts = std::to_string(colikv::kVersionMajor) + "." + std::to_string(colikv::kVersionMinor) + "." +
                            std::to_string(colikv::kVersionPatch);
  CHECK(parts == COLIKV_VERSION_STRING);
  // What colikv.pc and colikvConfigVersion.cmake are written with.
  CHECK(std::string(COLIKV_PROJECT_VERSION) == COLIKV_VERSION_STRING);
}
