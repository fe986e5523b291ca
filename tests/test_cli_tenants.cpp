// The colikv tool's --tenant on every command that takes a store, and
// colikv tenants. The tool runs as a separate process.
#include <sys/wait.h>

#include <catch2/catch.hpp>

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
