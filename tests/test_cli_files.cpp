// The colikv tool's file handling under hostile conditions, run as separate
// processes: racing imports, stores behind symbolic links and file: URIs,
// export's output path, terminal escapes from a store, full disks and
// file-size limits, and input files whose size a command must not trust.
#include <dirent.h>
#include <sys/file.h>
#include <sys/mount.h>

#include <chrono>
#include <thread>

#include "cli_run.h"
#include "colikv/coli_kv.h"
#include "proc_util.h"

namespace {

using colikv_test::ChildProcess;
using colikv_test::Run;
using colikv_test::TempDir;
using colikv_test::coli_bytes;
using colikv_test::contains;
using colikv_test::file_exists;
using colikv_test::kTool;
using colikv_test::read_file;
using colikv_test::require_error_line;
using colikv_test::tool;
using colikv_test::write_file;

// The names in a directory other than "." and "..", sorted.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool is_symlink(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// A file that import refuses only at its last record (a token id outside the
// vocabulary), so that the refusing import runs for a while.
std::string refused_at_the_end(const colikv::ModelSignature& m, int64_t n) {
  std::string bytes = coli_bytes(m, n, 7);
  const int32_t bad = -1;
  std::memcpy(&bytes[static_cast<size_t>(colikv::kColiKvHeaderBytes + (n - 1) * m.record_bytes())], &bad, 4);
  return bytes;
}

}  // namespace

TEST_CASE("cli files: a failed import never deletes a store another import is filling", "[cli][files]") {
  // The race: B, whose file is refused, starts first and would create
  // the store; A starts 30 ms later and imports a larger file into it. The
  // old tool unlinked the store when B failed while A's import was not yet
  // committed: A reported success and the store was gone.
  TempDir dir;
  const auto wide = colikv_test::wide_model();
  write_file(dir.file("bad.coli_kv"), refused_at_the_end(wide, 1200));
  write_file(dir.file("big.coli_kv"), coli_bytes(wide, 4000, 2));
  for (int round = 0; round < 3; ++round) {
    const std::string store = dir.file("race" + std::to_string(round) + ".db");
    ChildProcess b({kTool, "import", store, dir.file("bad.coli_kv"), "--id", "B"}, false, dir.file("b.err"));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    ChildProcess a({kTool, "import", store, dir.file("big.coli_kv"), "--id", "A"}, false, dir.file("a.err"));
    const int code_a = exit_code(a.wait());
    const int code_b = exit_code(b.wait());
    INFO("round " << round << "\nA: " << read_file(dir.file("a.err")) << "\nB: " << read_file(dir.file("b.err")));
    CHECK(code_b == 1);
    CHECK(contains(read_file(dir.file("b.err")), "token id -1"));
    REQUIRE(code_a == 0);
    REQUIRE(file_exists(store));
    Run ls = tool({"ls", store, "--json"});
    CHECK(ls.code == 0);
    CHECK(contains(ls.out, "\"id\": \"A\""));
    CHECK(contains(ls.out, "\"tokens\": 4000"));
  }
  // Neither import left a temporary store behind.
  for (const auto& name : names_in(dir.path())) CHECK(name.find(".colikv-import-") == std::string::npos);
}

TEST_CASE("cli files: two imports creating the same store both land in it", "[cli][files]") {
  TempDir dir;
  const auto wide = colikv_test::wide_model();
  write_file(dir.file("one.coli_kv"), coli_bytes(wide, 600, 1));
  write_file(dir.file("two.coli_kv"), coli_bytes(wide, 600, 2));
  const std::string store = dir.file("s.db");
  ChildProcess one({kTool, "import", store, dir.file("one.coli_kv")}, false, dir.file("one.err"));
  ChildProcess two({kTool, "import", store, dir.file("two.coli_kv")}, false, dir.file("two.err"));
  const int code_one = exit_code(one.wait());
  const int code_two = exit_code(two.wait());
  INFO(read_file(dir.file("one.err")) << read_file(dir.file("two.err")));
  CHECK(code_one == 0);
  CHECK(code_two == 0);
  // Nothing beside the store: no temporary store, no WAL left unfolded.
  CHECK(names_in(dir.path()) == std::vector<std::string>{"one.coli_kv", "one.err", "s.db", "two.coli_kv", "two.err"});
  Run ls = tool({"ls", store, "--json"});
  CHECK(contains(ls.out, "\"id\": \"one\""));
  CHECK(contains(ls.out, "\"id\": \"two\""));
}

TEST_CASE("cli files: a failed import through a symbolic link or a file: URI leaves no store", "[cli][files]") {
  TempDir dir;
  const auto tiny = colikv_test::tiny_model();
  write_file(dir.file("good.coli_kv"), coli_bytes(tiny, 20, 1));
  write_file(dir.file("bad.coli_kv"), "not a coli_kv file at all, wrong magic");
  const std::vector<std::string> inputs = {"bad.coli_kv", "good.coli_kv"};

  SECTION("a dangling symbolic link") {
    REQUIRE(::symlink("target.db", dir.file("link.db").c_str()) == 0);
    Run r = tool({"import", dir.file("link.db"), dir.file("bad.coli_kv")});
    CHECK(r.code == 1);
    CHECK(contains(r.err, "wrong magic"));
    CHECK(is_symlink(dir.file("link.db")));  // the old tool removed the link, and left its target
    CHECK_FALSE(file_exists(dir.file("target.db")));
    // A successful import creates the link's target and keeps the link.
    r = tool({"import", dir.file("link.db"), dir.file("good.coli_kv")});
    CHECK(r.code == 0);
    CHECK(is_symlink(dir.file("link.db")));
    CHECK(file_exists(dir.file("target.db")));
    CHECK(contains(tool({"ls", dir.file("target.db")}).out, "good"));
  }
  SECTION("a file: URI") {
    Run r = tool({"import", "file:" + dir.file("u.db"), dir.file("bad.coli_kv")});
    CHECK(r.code == 1);
    CHECK(contains(r.err, "wrong magic"));
    CHECK(names_in(dir.path()) == inputs);
    r = tool({"import", "file://localhost" + dir.file("u%2edb") + "?mode=rwc", dir.file("good.coli_kv")});
    CHECK(r.code == 0);
    CHECK(contains(tool({"ls", dir.file("u.db")}).out, "good"));
  }
}
