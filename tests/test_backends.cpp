// Which backends this build has (the CMake option COLIKV_WITH_POSTGRES): a
// postgresql:// location in a build without PostgreSQL fails clearly,
// naming the option, and creates nothing.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "colikv/colikv.h"
#include "colikv/store.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::Store;

#if !COLIKV_WITH_POSTGRES
TEST_CASE("backends: without the PostgreSQL backend a postgresql:// location fails naming the build option",
          "[store]") {
  colikv_test::TempDir dir;
  const std::string uri = "postgresql://colikv:secret@127.0.0.1:1/colikv";
  try {
    Store s(uri);
    FAIL("a postgresql:// store opened in a build without the PostgreSQL backend");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    const std::string what = e.what();
    CHECK(what.find("COLIKV_WITH_POSTGRES") != std::string::npos);
    CHECK(what.find("secret") == std::string::npos);  // the password is never shown
  }
  try {
    Store::library_schema_version(uri);
    FAIL("library_schema_version answered for a backend this build does not have");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
  }
  CHECK(Store::library_schema_version(dir.file("s.colikv")) == Store::library_schema_version());
  // The C API says the same.
  colikv_store* s = nullptr;
  CHECK(colikv_open(uri.c_str(), COLIKV_CREATE, &s) == COLIKV_ERR_INVALID);
  REQUIRE(s != nullptr);
  CHECK(std::string(colikv_errmsg(s)).find("COLIKV_WITH_POSTGRES") != std::string::npos);
  colikv_close(s);
}
#endif
