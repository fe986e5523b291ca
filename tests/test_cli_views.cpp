// The views a person reads at the sqlite3 shell (issue 35): what each
// conversation alone holds, the ratio as the README reads it, tenants by a
// readable name and in a view of their own, metadata, times with their zone;
// and the old columns kept as they were. Queried through the real sqlite3.
#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "colikv/store.h"
#include "cli_run.h"
#include "test_support.h"

using colikv_test::contains;
using colikv_test::describe;
using colikv_test::EngineBuffers;
using colikv_test::Run;
using colikv_test::TempDir;

namespace {

const char* const kSqlite3 = COLIKV_SQLITE3_SHELL;

#define TOOL_OK(...)                                                    \
  [&]() {                                                               \
    std::vector<std::string> args_ = __VA_ARGS__;                       \
    Run r_ = colikv_test::run_program(colikv_test::kTool, args_);        \
    INFO(describe(args_, r_));                                          \
    REQUIRE(r_.code == 0);                                              \
    return r_;                                                          \
  }()

std::string make_file(const TempDir& dir, const std::string& name, int64_t n, uint32_t seed) {
  const EngineBuffers b = colikv_test::history(colikv_test::tiny_model(), n, seed);
  const std::string path = dir.file(name);
  colikv_test::write_coli_kv(path, b, n);
  return path;
}

}  // namespace

TEST_CASE("cli views: the sqlite3 shell sees unique bytes, stored/raw, tenants by name, metadata and zoned times",
          "[cli]") {
  if (*kSqlite3 == '\0') FAIL("no sqlite3 shell was found when configuring (Debian package sqlite3): install it and reconfigure");
  TempDir dir;
  const std::string store = dir.file("s.colikv");
  TOOL_OK({"import", store, make_file(dir, "long.coli_kv", 3000, 1), "--id", "long", "--sync", "normal"});
  TOOL_OK({"fork", store, "long", "long-fork", "--at", "1500"});
  TOOL_OK({"import", store, make_file(dir, "other.coli_kv", 700, 2), "--id", "other", "--sync", "normal"});
  TOOL_OK({"import", store, make_file(dir, "a.coli_kv", 300, 3), "--id", "a1", "--tenant", "alice"});
  TOOL_OK({"tenant", store, "alice", "--max-bytes", "1G"});
  {
    colikv::Store s(store);
    s.set_metadata("long", R"({"user":"u-7","lang":"fr"})");
  }
  auto sql = [&](const std::string& query) {
    Run r = colikv_test::run_program(kSqlite3, {store, query});
    INFO(describe({"sqlite3", store, query}, r));
    REQUIRE(r.code == 0);
    REQUIRE(r.err.empty());
    return r.out;
  };
  auto number = [&](const std::string& query) { return std::stoll(sql(query)); };

  // The old columns first, in their order, then the new ones.
  CHECK(sql("SELECT group_concat(name, ',') FROM pragma_table_info('conversation_summary');") ==
        "tenant,conversation,model,tokens,precision,raw_bytes,stored_bytes,ratio,evicted,title,forked_from,"
        "created,updated,last_used,unique_bytes,stored_ratio,tenant_name,metadata,created_utc,updated_utc,"
        "last_used_utc\n");

  // unique_bytes: the fork shares long's first chunk, which neither holds alone.
  const int64_t shared = number("SELECT length(payload) FROM chunks WHERE chunk_id IN "
                                "(SELECT chunk_id FROM conversation_chunks GROUP BY chunk_id HAVING count(*) > 1);");
  REQUIRE(shared > 0);
  for (const std::string id : {"long", "long-fork"}) {
    const std::string where = " FROM conversation_summary WHERE conversation = '" + id + "';";
    CHECK(number("SELECT unique_bytes" + where) == number("SELECT stored_bytes" + where) - shared);
  }
  CHECK(number("SELECT unique_bytes - stored_bytes FROM conversation_summary WHERE conversation = 'other';") == 0);
  // Summed, with the shared chunk once, it is what the store holds; stored_bytes is more.
  const int64_t payloads = number("SELECT sum(length(payload)) FROM chunks;");
  CHECK(number("SELECT sum(unique_bytes) FROM conversation_summary;") + shared == payloads);
  CHECK(number("SELECT sum(stored_bytes) FROM conversation_summary;") == payloads + shared);

  // stored_ratio is stored / raw, as the README says; ratio stays raw / stored.
  const std::string row = sql("SELECT stored_bytes, raw_bytes, stored_ratio, ratio FROM conversation_summary "
                              "WHERE conversation = 'long';");
  std::smatch m;
  REQUIRE(std::regex_match(row, m, std::regex(R"((\d+)\|(\d+)\|([\d.]+)\|([\d.]+)\n)")));
  const double stored = std::stod(m[1]), raw = std::stod(m[2]);
  CHECK(std::stod(m[3]) == Approx(stored / raw).margin(0.0006));
  CHECK(std::stod(m[4]) == Approx(raw / stored).margin(0.0006));

  // Tenants by a readable name; the exact name stays in tenant.
  CHECK(sql("SELECT conversation, tenant, tenant_name FROM conversation_summary ORDER BY conversation;") ==
        "a1|alice|alice\nlong||(default)\nlong-fork||(default)\nother||(default)\n");
  // Metadata, and times with their zone (the same instants as the old columns).
  CHECK(sql("SELECT metadata FROM conversation_summary WHERE conversation = 'long';") ==
        "{\"user\":\"u-7\",\"lang\":\"fr\"}\n");
  CHECK(sql("SELECT metadata FROM conversation_summary WHERE conversation = 'other';") == "{}\n");
  const std::string times = sql("SELECT created_utc, updated_utc, last_used_utc, created, last_used "
                                "FROM conversation_summary WHERE conversation = 'long';");
  REQUIRE(std::regex_match(times, m, std::regex(R"(((\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d\.\d{3})Z\|){2})"
                                                R"((\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d\.\d{3})Z\|)"
                                                R"((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\|)"
                                                R"((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\n)")));
  CHECK(m[7].str() == m[4].str() + " " + m[5].str());  // last_used is last_used_utc without its zone
  CHECK(number("SELECT count(*) FROM conversation_summary WHERE julianday(created_utc) = julianday(created);") == 4);

  // One row per tenant, agreeing with colikv tenants.
  CHECK(sql("SELECT tenant, tenant_name, conversations, tokens, max_bytes, max_idle_ms IS NULL, created_utc IS NULL "
            "FROM tenant_summary ORDER BY tenant;") ==
        "|(default)|3|5200||1|1\nalice|alice|1|300|1000000000|1|0\n");
  const std::string tenants = TOOL_OK({"tenants", store, "--json"}).out;
  for (const std::string t : {"", "alice"}) {
    const int64_t bytes = number("SELECT stored_bytes FROM tenant_summary WHERE tenant = '" + t + "';");
    CHECK(contains(tenants, "\"name\": \"" + t + "\",\n      \"conversations\": " +
                                (t.empty() ? "3" : "1") + ",\n      \"stored_bytes\": " + std::to_string(bytes)));
  }
  CHECK(number("SELECT sum(stored_bytes) FROM tenant_summary;") == payloads);
  CHECK(number("SELECT raw_bytes FROM tenant_summary WHERE tenant = '';") ==
        number("SELECT sum(raw_bytes) FROM conversation_summary WHERE tenant = '';"));
  CHECK(std::regex_match(sql("SELECT created_utc, last_used_utc FROM tenant_summary WHERE tenant = 'alice';"),
                         std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\n)")));
  TOOL_OK({"gc", store, "--max-bytes", "0", "--tenant", "alice"});
  CHECK(sql("SELECT evicted_conversations FROM tenant_summary ORDER BY tenant;") == "0\n1\n");

  TOOL_OK({"verify", store});
}
