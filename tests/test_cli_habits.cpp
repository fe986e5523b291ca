// The colikv tool as people use such tools (issue 35): --version, sizes with
// units, --json on every command that changes a store, rm of several ids,
// suggestions for a typo, the bash completion and the man page.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "colikv/store.h"
#include "colikv/version.h"
#include "cli_run.h"
#include "test_support.h"

using colikv_test::contains;
using colikv_test::describe;
using colikv_test::dump_store;
using colikv_test::EngineBuffers;
using colikv_test::Run;
using colikv_test::TempDir;

namespace {

Run tool(const std::vector<std::string>& args) { return colikv_test::run_program(colikv_test::kTool, args); }

#define RUN_OK(code_, ...)                       \
  [&]() {                                        \
    std::vector<std::string> args_ = __VA_ARGS__; \
    Run r_ = tool(args_);                        \
    INFO(describe(args_, r_));                   \
    REQUIRE(r_.code == (code_));                 \
    return r_;                                   \
  }()

// A .coli_kv file of n generated records.
std::string make_file(const TempDir& dir, const std::string& name, int64_t n, uint32_t seed) {
  const EngineBuffers b = colikv_test::history(colikv_test::tiny_model(), n, seed);
  const std::string path = dir.file(name);
  colikv_test::write_coli_kv(path, b, n);
  return path;
}

// A store holding conversations a, b and c (40 tokens each).
std::string three_conversations(const TempDir& dir) {
  const std::string store = dir.file("s.db");
  int seed = 1;
  for (const char* id : {"a", "b", "c"})
    RUN_OK(0, {"import", store, make_file(dir, std::string(id) + ".coli_kv", 40, seed++), "--id", id, "--sync", "normal"});
  return store;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("cli habits: --version and version --json name the tool's and the linked library's versions", "[cli]") {
  Run r = RUN_OK(0, {"--version"});
  CHECK(r.err.empty());
  CHECK(r.out == std::string("colikv ") + COLIKV_VERSION_STRING + " (library " + colikv::version() + ", SQLite schema " +
                     std::to_string(colikv::Store::library_schema_version()) + ")\n");
  CHECK(RUN_OK(0, {"version"}).out == r.out);
  r = RUN_OK(0, {"version", "--json"});
  CHECK(r.out == std::string("{\n  \"tool_version\": \"") + COLIKV_VERSION_STRING + "\",\n  \"library_version\": \"" +
                     colikv::version() + "\",\n  \"library_version_number\": " +
                     std::to_string(colikv::version_number()) + ",\n  \"schema_version\": " +
                     std::to_string(colikv::Store::library_schema_version()) + "\n}\n");
  r = RUN_OK(2, {"--version", "extra"});
  CHECK(contains(r.err, "unexpected argument 'extra'"));
  CHECK(contains(RUN_OK(0, {"--help"}).out, "--version"));
}

TEST_CASE("cli habits: --max-bytes takes sizes with units, and refuses garbage naming it", "[cli]") {
  TempDir dir;
  const std::string store = three_conversations(dir);
  struct Size {
    const char* text;
    int64_t bytes;
  };
  for (const Size& s : {Size{"512MiB", int64_t{512} << 20}, Size{"1G", 1000000000}, Size{"1GB", 1000000000},
                        Size{"1GiB", int64_t{1} << 30}, Size{"64k", 64000}, Size{"64K", 64000},
                        Size{"2TiB", int64_t{2} << 40}, Size{"7", 7}, Size{"7B", 7}, Size{"0", 0}}) {
    Run r = RUN_OK(0, {"tenant", store, "", "--max-bytes", s.text, "--json"});
    CHECK(contains(r.out, "\"max_bytes\": " + std::to_string(s.bytes) + ","));
  }
  RUN_OK(0, {"tenant", store, "", "--max-bytes", "none"});
  const std::string before = dump_store(store);
  for (const char* bad : {"1.5G", "12X", "-1", "+1", "G", "", "1 G", "1g", "1Gi", "1gib",
                          "9999999999999999999", "9000000000T", "8388608TiB"}) {
    for (const std::string cmd : {"gc", "tenant"}) {
      std::vector<std::string> args{cmd, store};
      if (cmd == "tenant") args.push_back("");
      args.insert(args.end(), {"--max-bytes", bad});
      Run r = tool(args);
      INFO(describe(args, r));
      CHECK(r.code == 2);
      colikv_test::require_error_line(r, cmd);
      CHECK(contains(r.err, std::string("'") + bad + "' for --max-bytes"));
    }
  }
  CHECK(dump_store(store) == before);
  // A budget in units evicts as the same budget in bytes: 1k holds none of the data.
  Run r = RUN_OK(0, {"gc", store, "--max-bytes", "1k", "--json"});
  CHECK(contains(r.out, "\"max_bytes\": 1000,"));
  CHECK(contains(RUN_OK(0, {"gc", "--help"}).out, "1G = 10^9 bytes"));
  CHECK(contains(RUN_OK(0, {"gc", "--help"}).out, "1GiB = 2^30 bytes"));
}

TEST_CASE("cli habits: rename, fork, truncate and rm say what they did in --json", "[cli]") {
  TempDir dir;
  const std::string store = three_conversations(dir);
  Run r = RUN_OK(0, {"rename", store, "a", "a2", "--json"});
  CHECK(r.out == "{\n  \"store\": \"" + store + "\",\n  \"tenant\": \"\",\n  \"id\": \"a2\",\n  \"old_id\": \"a\"\n}\n");
  r = RUN_OK(0, {"fork", store, "a2", "f", "--at", "30", "--json"});
  CHECK(r.out == "{\n  \"store\": \"" + store +
                     "\",\n  \"tenant\": \"\",\n  \"id\": \"f\",\n  \"forked_from\": \"a2\",\n  \"tokens\": 30\n}\n");
  r = RUN_OK(0, {"truncate", store, "f", "10", "--json"});
  CHECK(r.out == "{\n  \"store\": \"" + store +
                     "\",\n  \"tenant\": \"\",\n  \"id\": \"f\",\n  \"tokens_before\": 30,\n  \"tokens\": 10\n}\n");
  r = RUN_OK(0, {"rm", store, "f", "--json"});
  CHECK(r.out == "{\n  \"store\": \"" + store +
                     "\",\n  \"tenant\": \"\",\n  \"removed\": [\n    {\n      \"id\": \"f\",\n      \"tokens\": 10\n"
                     "    }\n  ],\n  \"failed\": []\n}\n");
  r = RUN_OK(0, {"gc", store, "--max-bytes", "0", "--json"});
  CHECK(contains(r.out, "\"store\": \"" + store + "\",\n  \"tenant\": \"\",\n"));
  // Every key is in the command's --help.
  for (const std::string c : {"rename", "fork", "truncate", "rm"}) {
    const std::string h = RUN_OK(0, {c, "--help"}).out;
    CHECK(contains(h, "--json keys"));
    CHECK(contains(h, "tenant"));
  }
  CHECK(contains(RUN_OK(0, {"truncate", "--help"}).out, "tokens_before"));
  CHECK(contains(RUN_OK(0, {"rename", "--help"}).out, "old_id"));
  CHECK(contains(RUN_OK(0, {"fork", "--help"}).out, "forked_from"));
  CHECK(contains(RUN_OK(0, {"rm", "--help"}).out, "failed[]"));
}

TEST_CASE("cli habits: rm deletes each id it is given and reports the ones it cannot", "[cli]") {
  TempDir dir;
  const std::string store = three_conversations(dir);
  Run r = RUN_OK(0, {"rm", store, "a", "b"});
  CHECK(r.out == "removed 'a' (40 tokens)\nremoved 'b' (40 tokens)\n");
  CHECK(RUN_OK(0, {"ls", store, "--ids"}).out == "c\n");

  RUN_OK(0, {"import", store, make_file(dir, "a.coli_kv", 40, 1), "--id", "a", "--sync", "normal"});
  r = RUN_OK(1, {"rm", store, "missing", "a", "--json"});
  CHECK(contains(r.out, "\"removed\": [\n    {\n      \"id\": \"a\",\n      \"tokens\": 40\n    }\n  ],"));
  CHECK(contains(r.out, "\"failed\": [\n    {\n      \"id\": \"missing\",\n      \"error\": \""));
  CHECK(contains(r.out, "no such conversation"));
  CHECK(RUN_OK(0, {"ls", store, "--ids"}).out == "c\n");
  r = RUN_OK(1, {"rm", store, "c", "gone"});
  CHECK(r.out == "removed 'c' (40 tokens)\n");
  colikv_test::require_error_line(r, "rm");
  CHECK(contains(r.err, "'gone'"));
  CHECK(RUN_OK(0, {"ls", store, "--ids"}).out.empty());
}

TEST_CASE("cli habits: a mistyped command or option gets the nearest one suggested", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("s.db");
  Run r = RUN_OK(2, {"sttas", store});
  CHECK(r.err == "colikv: unknown command 'sttas' (did you mean stats?) (see colikv --help)\n");
  r = RUN_OK(2, {"improt", store});
  CHECK(contains(r.err, "(did you mean import?)"));
  r = RUN_OK(2, {"help", "tenats"});
  CHECK(contains(r.err, "(did you mean tenants?)"));
  r = RUN_OK(2, {"--verison"});
  CHECK(contains(r.err, "unknown option '--verison' (did you mean --version?)"));
  r = RUN_OK(2, {"gc", store, "--max-byte", "1"});
  CHECK(r.err == "colikv: gc: unknown option '--max-byte' (did you mean --max-bytes?) (see colikv gc --help)\n");
  r = RUN_OK(2, {"ls", store, "--jsno"});
  CHECK(contains(r.err, "(did you mean --json?)"));
  // Nothing near: no guess.
  r = RUN_OK(2, {"frobnicate", store});
  CHECK(r.err == "colikv: unknown command 'frobnicate' (see colikv --help)\n");
  r = RUN_OK(2, {"ls", store, "--zzzzzz"});
  CHECK_FALSE(contains(r.err, "did you mean"));
  CHECK_FALSE(colikv_test::file_exists(store));
}

TEST_CASE("cli habits: the top-level help says a store is a SQLite file or a PostgreSQL URI", "[cli]") {
  const std::string h = RUN_OK(0, {"--help"}).out;
  CHECK(contains(h, "STORE is a SQLite file"));
  CHECK(contains(h, "PostgreSQL connection URI (postgresql://"));
}

TEST_CASE("cli habits: bash completion, installed by cmake --install, completes commands, options and ids", "[cli]") {
  TempDir dir;
  const std::string store = three_conversations(dir);
  RUN_OK(0, {"import", store, make_file(dir, "x.coli_kv", 40, 9), "--id", "with space", "--sync", "normal"});
  RUN_OK(0, {"import", store, make_file(dir, "y.coli_kv", 40, 8), "--id", "alices", "--tenant", "alice"});
  // An id that a shell would run if it expanded it.
  const std::string trap = "$(touch " + dir.file("pwned") + ")";
  RUN_OK(0, {"import", store, make_file(dir, "z.coli_kv", 40, 7), "--id", trap, "--sync", "normal"});
  const std::string prefix = dir.file("prefix");
  Run inst = colikv_test::run_program(COLIKV_CMAKE_COMMAND, {"--install", COLIKV_BINARY_DIR, "--prefix", prefix, "--component", "cli"});
  INFO(describe({"cmake", "--install"}, inst));
  REQUIRE(inst.code == 0);
  const std::string script = prefix + "/share/bash-completion/completions/colikv";
  REQUIRE(colikv_test::file_exists(script));
  if (*COLIKV_MAN_PAGE_PATH) CHECK(colikv_test::file_exists(prefix + "/share/man/man1/colikv.1"));

  // COMPREPLY for a command line, one element a line, from the installed script.
  auto complete = [&](const std::string& words, int cword) {
    const std::string tool_dir = std::string(colikv_test::kTool).substr(0, colikv_test::kTool.rfind('/'));
    const std::string program = "source '" + script + "' || exit 3\n"
                                "complete -p colikv >/dev/null || exit 4\n"
                                "PATH='" + tool_dir + "':$PATH\n"
                                "COMP_WORDS=(" + words + "); COMP_CWORD=" + std::to_string(cword) + "\n"
                                "_colikv\n"
                                "((${#COMPREPLY[@]} == 0)) || printf '%s\\n' \"${COMPREPLY[@]}\" | LC_ALL=C sort\n";
    Run r = colikv_test::run_program("/bin/bash", {"--norc", "-c", program});
    INFO(program << "\n" << describe({"bash"}, r));
    REQUIRE(r.code == 0);
    return r.out;
  };
  CHECK(complete("colikv st", 1) == "stats\n");
  CHECK(complete("colikv t", 1) == "tenant\ntenants\ntruncate\n");
  CHECK(complete("colikv --v", 1) == "--version\n");
  CHECK(complete("colikv gc s.db --max", 3) == "--max-bytes\n--max-idle\n");
  CHECK(complete("colikv rm s.db --js", 3) == "--json\n");
  CHECK(complete("colikv rm s.db --sync ''", 4) == "full\nnormal\n");
  // The store's ids: every one after the store (rm takes several), with spaces kept.
  // The store's ids: every one after the store (rm takes several), quoted
  // for the shell, never expanded.
  const std::string quoted_trap = "\\$\\(touch\\ " + dir.file("pwned") + "\\)";
  CHECK(complete("colikv rm '" + store + "' ''", 3) == quoted_trap + "\na\nb\nc\nwith\\ space\n");
  CHECK_FALSE(colikv_test::file_exists(dir.file("pwned")));
  CHECK(complete("colikv rm '" + store + "' a w", 4) == "with\\ space\n");
  CHECK(complete("colikv info --tenant alice '" + store + "' ''", 5) == "alices\n");
  CHECK(complete("colikv export '" + store + "' --sync normal b", 5) == "b\n");
  CHECK(complete("colikv fork '" + store + "' a ''", 4).empty());  // NEW: a new id, nothing to offer
  // A store that cannot be read completes no id, says nothing and is not created.
  CHECK(complete("colikv rm '" + dir.file("missing.db") + "' ''", 3).empty());
  CHECK_FALSE(colikv_test::file_exists(dir.file("missing.db")));
}

TEST_CASE("cli habits: the man page the build writes holds every command's --help, word for word", "[cli]") {
  const std::string path = COLIKV_MAN_PAGE_PATH;
  if (path.empty()) FAIL("the build was configured with -DCOLIKV_MAN_PAGE=OFF: no man page to check");
  std::string page = read_text(path);
  REQUIRE(page.rfind(".TH COLIKV 1 ", 0) == 0);
  // As it reads: roff's escapes undone (\- a minus, \e a backslash, \& nothing).
  page = std::regex_replace(page, std::regex(R"(\\&)"), "");
  page = std::regex_replace(page, std::regex(R"(\\-)"), "-");
  page = std::regex_replace(page, std::regex(R"(\\e)"), "\\");
  const std::string main_help = RUN_OK(0, {"--help"}).out;
  CHECK(contains(page, main_help));
  std::istringstream names(RUN_OK(0, {"help", "--commands"}).out);
  int n = 0;
  for (std::string c; std::getline(names, c); ++n) {
    INFO(c);
    CHECK(contains(main_help, "  " + c + " "));
    CHECK(contains(page, ".SS " + c + "\n"));
    CHECK(contains(page, RUN_OK(0, {c, "--help"}).out));
  }
  CHECK(n >= 18);
}

TEST_CASE("cli habits: gc --dry-run says what gc would do, by gc's own code, and changes nothing", "[cli]") {
  TempDir dir;
  const std::string store = three_conversations(dir);
  // a was last used two hours ago; b before c.
  colikv_test::sql_exec(store, "UPDATE conversations SET last_used_ms = last_used_ms - 7200000 WHERE name = 'a'");
  colikv_test::sql_exec(store, "UPDATE conversations SET last_used_ms = last_used_ms - 60000 WHERE name = 'b'");
  const std::string before = dump_store(store);
  const std::vector<std::string> args{"gc", store, "--max-idle", "1h", "--max-bytes", "1", "--json"};
  std::vector<std::string> dry = args;
  dry.push_back("--dry-run");
  Run plan = RUN_OK(0, dry);
  CHECK(dump_store(store) == before);
  // Expiry first, as gc: a is deleted, so not evicted; b then c lose their KV data.
  CHECK(contains(plan.out, "\"dry_run\": true,"));
  CHECK(contains(plan.out, "\"expired\": [\"a\"],"));
  CHECK(contains(plan.out, "\"evicted\": [\"b\", \"c\"],"));
  Run text = RUN_OK(0, {"gc", store, "--max-idle", "1h", "--max-bytes", "1", "--dry-run"});
  CHECK(text.out.rfind("dry run: nothing was changed\nwould delete 1 conversation idle longer than 1h", 0) == 0);
  CHECK(contains(text.out, "would evict"));
  CHECK(dump_store(store) == before);
  // The real gc does what the plan said, key for key.
  Run done = RUN_OK(0, args);
  std::string expected = plan.out;
  expected.replace(expected.find("\"dry_run\": true"), 15, "\"dry_run\": false");
  CHECK(done.out == expected);
  CHECK(dump_store(store) != before);
  CHECK(RUN_OK(0, {"ls", store, "--ids"}).out == "c\nb\n");
  // Without a limit there is nothing to plan: the same usage error as gc's.
  Run r = RUN_OK(2, {"gc", store, "--dry-run"});
  CHECK(contains(r.err, "--max-bytes N or --max-idle DURATION is required"));
}

TEST_CASE("cli habits: gc and vacuum show progress on stderr when asked, as import does", "[cli]") {
  TempDir dir;
  const std::string store = dir.file("s.db");
  for (int i = 0; i < 6; ++i)
    RUN_OK(0, {"import", store, make_file(dir, "f" + std::to_string(i) + ".coli_kv", 3000, 10 + i), "--id",
               "c" + std::to_string(i), "--sync", "normal"});
  Run r = RUN_OK(0, {"gc", store, "--max-bytes", "0", "--progress"});
  INFO(r.err);
  CHECK(contains(r.err, "\rgc: evicting, then giving pages back: 100.0%"));
  CHECK(contains(r.err, " bytes"));
  CHECK(r.err.back() == '\n');
  // Not asked, and stderr no terminal: nothing.
  RUN_OK(0, {"import", store, make_file(dir, "g.coli_kv", 3000, 30), "--id", "g", "--sync", "normal"});
  CHECK(RUN_OK(0, {"gc", store, "--max-bytes", "0"}).err.empty());
  r = RUN_OK(0, {"gc", store, "--max-idle", "0s", "--progress"});
  CHECK(contains(r.err, "\rgc: deleting idle conversations: 100.0%  7/7 conversations"));
  // vacuum: the free pages the deletes left, given back in steps.
  RUN_OK(0, {"import", store, make_file(dir, "h.coli_kv", 3000, 31), "--id", "h", "--sync", "normal"});
  RUN_OK(0, {"rm", store, "h"});
  r = RUN_OK(0, {"vacuum", store, "--progress"});
  INFO(r.err);
  CHECK(contains(r.err, "\rvacuum: giving free space back: 100.0%"));
  CHECK(RUN_OK(0, {"vacuum", store}).err.empty());
  CHECK(contains(RUN_OK(0, {"gc", "--help"}).out, "--progress"));
  CHECK(contains(RUN_OK(0, {"vacuum", "--help"}).out, "--quiet"));
}
