// How a store location is told apart and shown: libpq's own parse decides
// what is a secret, the scheme's case does not matter, and a keyword/value
// connection string is refused rather than taken as a file name.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "cli_run.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "test_support.h"

using colikv::shown_store_location;

TEST_CASE("location: every secret of a URI is masked, whatever its characters", "[location]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"postgresql://u:S3cr?t#x@h:5/db", "S3cr"},
      {"postgresql://u:qz%2Fyy@h/db", "qz"},
      {"postgresql://u:qz/yy@h/db", "qz"},  // not a password libpq reads: nothing after the scheme shows
      {"postgresql://u:qz/yy@h/db", "yy"},
      {"postgres://u@h/db?sslpassword=k3y&password=p%26q", "k3y"},
      {"postgres://u@h/db?sslpassword=k3y&password=p%26q", "p&q"},
      {"postgres://u@h/db?sslpassword=k3y&password=p%26q", "p%26q"},
      {"POSTGRESQL://u:Upper@h/db", "Upper"},
      {"PostgreS://u:Mixed@h/db", "Mixed"},
      {"postgresql://u:pw@h/db?%zz=1", "pw"},  // libpq cannot parse it: none of it shows
  };
  for (const auto& [uri, secret] : cases) {
    INFO(uri << " -> " << shown_store_location(uri));
    CHECK(shown_store_location(uri).find(secret) == std::string::npos);
    CHECK(colikv::is_postgres_location(uri));
  }
#if COLIKV_WITH_POSTGRES
  CHECK(shown_store_location("postgresql://u:pw@db.example:5433/kv?application_name=a%0Ab") ==
        "postgresql://u@db.example:5433/kv?password=***&application_name=a%0Ab");
#else
  // Without libpq nothing parses a URI: none of it after the scheme shows.
  CHECK(shown_store_location("postgresql://u:pw@db.example:5433/kv?application_name=a%0Ab") ==
        "postgresql://(not shown: this build has no PostgreSQL backend)");
#endif
  CHECK(shown_store_location("/tmp/a=b.db") == "/tmp/a=b.db");
  CHECK(!colikv::is_postgres_location("/tmp/a=b.db"));
  CHECK(shown_store_location("host=h password=pw dbname=x").find("pw") == std::string::npos);
}

TEST_CASE("location: a libpq keyword/value string is refused, and no file is made of it", "[location]") {
  const std::string conninfo = "host=127.0.0.1 port=1 dbname=x password=Hunter2";
  const colikv::Error e = [&] {
    try {
      colikv::Store s(conninfo);
    } catch (const colikv::Error& err) {
      return err;
    }
    return colikv::Error(colikv::ErrorCode::kOk, "opened");
  }();
  CHECK(e.code() == colikv::ErrorCode::kInvalidArgument);
  CHECK(std::string(e.what()).find("keyword/value") != std::string::npos);
  CHECK(std::string(e.what()).find("Hunter2") == std::string::npos);
  CHECK(access(conninfo.c_str(), F_OK) != 0);

  const colikv_test::Run r = colikv_test::tool({"ls", conninfo, "--json"});
  CHECK(r.code != 0);
  CHECK(r.err.find("keyword/value") != std::string::npos);
  CHECK(r.out.find("Hunter2") == std::string::npos);
  CHECK(r.err.find("Hunter2") == std::string::npos);
  CHECK(access(conninfo.c_str(), F_OK) != 0);
  std::remove(conninfo.c_str());  // what a failed run left in the working directory
}
