// The colikv tool's --tenant on every command that takes a store, and
// colikv tenants. The tool runs as a separate process.
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "colikv/store.h"
#include "backend.h"
#include "cli_run.h"
#include "test_support.h"

using colikv_test::EngineBuffers;
using colikv_test::Run;
using colikv_test::TempDir;

namespace {

Run tool(const std::vector<std::string>& args) { return colikv_test::run_program(colikv_test::kTool, args); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A .coli_kv file of 40 generated records.
std::string make_file(const TempDir& dir, const std::string& name, uint32_t seed) {
  const EngineBuffers b = colikv_test::history(colikv_test::tiny_model(), 40, seed);
  const std::string path = dir.file(name);
  colikv_test::write_coli_kv(path, b, 40);
  return path;
}

}  // namespace

TEST_CASE("cli tenants: --tenant scopes every command, and tenants lists them", "[cli][tenants]") {
  TempDir dir;
  const std::string store = dir.file("s.db");
  const std::string f = make_file(dir, "c.coli_kv", 1);
  Run r = tool({"import", store, f, "--id", "c", "--tenant", "alice"});
  INFO(colikv_test::describe({"import"}, r));
  REQUIRE(r.code == 0);
  REQUIRE(tool({"import", store, f, "--id", "c", "--tenant", "bob"}).code == 0);
  REQUIRE(tool({"import", store, f, "--id", "only-bob", "--tenant", "bob"}).code == 0);

  r = tool({"ls", store, "--tenant", "alice", "--json"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "\"id\": \"c\""));
  CHECK_FALSE(has(r.out, "only-bob"));
  r = tool({"ls", store});  // the default tenant holds nothing
  CHECK(r.code == 0);
  CHECK(has(r.out, "no conversations"));

  r = tool({"tenants", store, "--json"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "\"name\": \"\""));
  CHECK(has(r.out, "\"name\": \"alice\""));
  CHECK(has(r.out, "\"name\": \"bob\""));
  r = tool({"tenants", store});
  CHECK(r.code == 0);
  CHECK(has(r.out, "alice"));
  CHECK(has(r.out, "\"\""));

  // stats: each tenant's own chunks, none shared.
  r = tool({"stats", store, "--tenant", "alice", "--json"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "\"conversations\": 1"));
  CHECK(tool({"verify", store, "--tenant", "bob"}).code == 0);
  CHECK(tool({"info", store, "c", "--tenant", "bob"}).code == 0);
  CHECK(tool({"info", store, "only-bob", "--tenant", "alice"}).code == 1);

  // match: alice's prompt is bob's too, but alice matches only alice's.
  r = tool({"match", store, "--model-of", "c", "--tokens", f, "--tenant", "alice", "--json"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "\"id\": \"c\""));
  CHECK(has(r.out, "\"tokens\": 40"));

  // export from each tenant gives the same file back.
  CHECK(tool({"export", store, "c", dir.file("a.coli_kv"), "--tenant", "alice"}).code == 0);
  CHECK(colikv_test::read_file(dir.file("a.coli_kv")) == colikv_test::read_file(f));
  CHECK(tool({"export", store, "only-bob", dir.file("x.coli_kv"), "--tenant", "alice"}).code == 1);

  // fork, rename, truncate, rm, gc: only the named tenant's.
  CHECK(tool({"fork", store, "c", "c2", "--at", "20", "--tenant", "alice"}).code == 0);
  CHECK(tool({"rename", store, "c2", "c3", "--tenant", "alice"}).code == 0);
  CHECK(tool({"truncate", store, "c3", "10", "--tenant", "alice"}).code == 0);
  CHECK(tool({"rm", store, "c3", "--tenant", "bob"}).code == 1);
  CHECK(tool({"rm", store, "c", "--tenant", "alice"}).code == 0);
  CHECK(tool({"gc", store, "--max-bytes", "0", "--tenant", "alice"}).code == 0);
  {
    colikv::Options o;
    o.tenant = "bob";
    colikv::Store s(store, o);
    CHECK(s.count("c") == 40);
    CHECK(s.stats().evicted_conversations == 0);
    o.tenant = "alice";
    colikv::Store a(store, o);
    CHECK(a.count("c3") == 10);
    CHECK(a.stats().evicted_conversations == 1);
  }

  // copy into another tenant (the same store, or another one).
  r = tool({"copy", store, dir.file("d.db"), "c", "--tenant", "bob", "--to-tenant", "carol"});
  CHECK(r.code == 0);
  r = tool({"ls", dir.file("d.db"), "--tenant", "carol", "--json"});
  CHECK(has(r.out, "\"id\": \"c\""));
  CHECK(tool({"ls", dir.file("d.db"), "--tenant", "bob"}).code == 1);  // not there
}

TEST_CASE("cli tenants: an unknown tenant or a bad name is refused and changes nothing", "[cli][tenants]") {
  TempDir dir;
  const std::string store = dir.file("s.db");
  const std::string f = make_file(dir, "c.coli_kv", 2);
  REQUIRE(tool({"import", store, f, "--id", "c", "--tenant", "t"}).code == 0);
  const std::string before = colikv_test::read_file(store);

  for (const char* cmd : {"ls", "stats", "verify"}) {
    INFO(cmd);
    const Run r = tool({cmd, store, "--tenant", "nobody"});
    CHECK(r.code == 1);
    CHECK(has(r.err, "no such tenant 'nobody'"));
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"rm", store, "c", "--tenant", "nobody"},
        std::vector<std::string>{"info", store, "c", "--tenant", "nobody"},
        std::vector<std::string>{"export", store, "c", dir.file("o.coli_kv"), "--tenant", "nobody"}}) {
    INFO(args[0]);
    const Run r = tool(args);
    CHECK(r.code == 1);
    CHECK(has(r.err, "no such tenant 'nobody'"));
  }
  for (const std::string& bad : {std::string("a\nb"), std::string("\x1b[2J"), std::string(300, 'x')}) {
    for (const char* cmd : {"ls", "import"}) {
      INFO(cmd << " with a tenant name of " << bad.size() << " bytes");
      const Run r = std::string(cmd) == "ls" ? tool({"ls", store, "--tenant", bad})
                                             : tool({"import", store, f, "--id", "d", "--tenant", bad});
      CHECK(r.code == 1);
      CHECK(has(r.err, "tenant name"));
      CHECK(r.err.find('\x1b') == std::string::npos);
      CHECK(r.err.find("a\nb") == std::string::npos);
    }
  }
  CHECK(colikv_test::read_file(store) == before);
  CHECK(colikv_test::store_int(store, "SELECT count(*) FROM tenants") == 2);
  CHECK(colikv_test::store_int(store, "SELECT count(*) FROM conversations") == 1);
}

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Makes a conversation of a tenant look last used `days` days ago.
void make_idle(const std::string& store, const std::string& tenant, const std::string& id, int64_t days) {
  colikv_test::store_exec(store,
                          "UPDATE conversations SET last_used_ms = " + std::to_string(now_ms() - days * 86400000) +
                              " WHERE name = ? AND tenant_id = (SELECT tenant_id FROM tenants WHERE name = ?)",
                          {id, tenant});
}

colikv::TenantLimits limits_of(const std::string& store, const std::string& tenant) {
  colikv::Options o;
  o.tenant = tenant;
  o.read_only = true;
  return colikv::Store(store, o).tenant_limits();
}

}  // namespace

TEST_CASE("cli tenant: --max-bytes and --max-idle persist, show in tenants, and bad input changes nothing",
          "[backends][cli][tenants][quotas]") {
  TempDir dir;
  const std::string store = colikv_test::store_at(dir, "s.db");
  const std::string f = make_file(dir, "c.coli_kv", 1);
  REQUIRE(tool({"import", store, f, "--id", "c", "--tenant", "alice"}).code == 0);

  Run r = tool({"tenant", store, "alice", "--json"});
  INFO(colikv_test::describe({"tenant"}, r));
  CHECK(r.code == 0);
  CHECK(has(r.out, "\"max_bytes\": null"));
  CHECK(has(r.out, "\"max_idle_ms\": null"));
  CHECK(has(r.out, "\"conversations\": 1"));

  r = tool({"tenant", store, "alice", "--max-bytes", "100000", "--max-idle", "30d", "--json"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "\"max_bytes\": 100000"));
  CHECK(has(r.out, "\"max_idle_ms\": 2592000000"));
  CHECK(limits_of(store, "alice") == colikv::TenantLimits{100000, 2592000000LL});
  // One option changes that limit only.
  CHECK(tool({"tenant", store, "alice", "--max-idle", "12h"}).code == 0);
  CHECK(limits_of(store, "alice") == colikv::TenantLimits{100000, 12 * 3600000LL});
  // A tenant the store lacks is made with its limits only with --create, as --grant makes it.
  CHECK(tool({"tenant", store, "bob", "--max-bytes", "0"}).code == 1);  // not there, not made
  CHECK(tool({"tenant", store, "bob", "--max-bytes", "0", "--create"}).code == 0);
  CHECK(limits_of(store, "bob") == colikv::TenantLimits{0, std::nullopt});

  r = tool({"tenants", store});
  CHECK(r.code == 0);
  CHECK(has(r.out, "MAX BYTES"));
  CHECK(has(r.out, "MAX IDLE"));
  CHECK(has(r.out, "12h"));
  CHECK(has(r.out, "100000 B"));
  r = tool({"tenant", store, "alice"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "12h"));

  // Bad input: a usage error, nothing changed.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--max-bytes", "-1"}, {"--max-bytes", "12X"}, {"--max-idle", "30"},
        {"--max-idle", "-5m"}, {"--max-idle", "1.5h"}, {"--max-idle", "3w"}, {"--max-idle", "99999999999999999d"},
        {"--max-bytes", "5", "--max-idle", "x"}}) {
    std::vector<std::string> cmd = {"tenant", store, "alice"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    INFO(args[0] << " " << args[1]);
    r = tool(cmd);
    CHECK(r.code == 2);
    CHECK(limits_of(store, "alice") == colikv::TenantLimits{100000, 12 * 3600000LL});
  }
  for (const std::vector<std::string>& args : {std::vector<std::string>{"gc", store, "--max-idle", "7"},
                                               {"gc", store, "--max-bytes", "-3"}}) {
    r = tool(args);
    CHECK(r.code == 2);
  }
  // Unknown tenant, shown read-only: refused by name, not made.
  r = tool({"tenant", store, "nobody"});
  CHECK(r.code == 1);
  CHECK(has(r.err, "no such tenant 'nobody'"));
  r = tool({"tenants", store, "--json"});
  CHECK_FALSE(has(r.out, "nobody"));
  // "none" removes a limit.
  CHECK(tool({"tenant", store, "alice", "--max-bytes", "none", "--max-idle", "none"}).code == 0);
  CHECK(limits_of(store, "alice") == colikv::TenantLimits{});
}

TEST_CASE("cli gc: --max-idle and the tenant's own limits delete its idle conversations, never another tenant's",
          "[backends][cli][tenants][quotas]") {
  TempDir dir;
  const std::string store = colikv_test::store_at(dir, "s.db");
  const std::string f = make_file(dir, "c.coli_kv", 1), g = make_file(dir, "d.coli_kv", 2);
  for (const char* t : {"alice", "bob"}) {
    REQUIRE(tool({"import", store, f, "--id", "old", "--tenant", t}).code == 0);
    REQUIRE(tool({"import", store, g, "--id", "new", "--tenant", t}).code == 0);
    make_idle(store, t, "old", 40);
  }
  // Neither an option nor a limit of the tenant's own: a usage error.
  Run r = tool({"gc", store, "--tenant", "alice"});
  CHECK(r.code == 2);
  CHECK(has(r.err, "--max-idle"));

  r = tool({"gc", store, "--tenant", "alice", "--max-idle", "30d", "--json"});
  INFO(colikv_test::describe({"gc"}, r));
  CHECK(r.code == 0);
  CHECK(has(r.out, "\"expired\": [\"old\"]"));
  CHECK_FALSE(has(r.out, "max_bytes"));  // no byte budget applied

  // The tenant's own retention, applied by gc with no option: bob's "old" goes
  // only once bob has one.
  CHECK(tool({"gc", store, "--tenant", "bob", "--max-bytes", "100000000"}).code == 0);
  {
    colikv::Options o;
    o.tenant = "bob";
    colikv::Store bob(store, o);
    CHECK(bob.exists("old"));
  }
  CHECK(tool({"tenant", store, "bob", "--max-idle", "30d"}).code == 0);
  r = tool({"gc", store, "--tenant", "bob"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "deleted 1 conversation idle longer than 30d"));
  for (const char* t : {"alice", "bob"}) {
    colikv::Options o;
    o.tenant = t;
    colikv::Store s(store, o);
    INFO(t);
    CHECK_FALSE(s.exists("old"));
    CHECK(s.count("new") == 40);
  }
}
