// Whether an objects-first writer still runs is what the kernel says (the
// lock byte of its writer id in NAME-writers, sqlite_writer_lock.h), never
// what /proc seems to show: a live writer's held chunks stay whatever pid
// namespace it runs in and however /proc is mounted, and a turn whose
// chunks were taken anyway fails saying so, never linking a chunk id that
// another writer reused. The cases tagged [root] make pid namespaces and
// mount a /proc (ctest names them root:...; skipped by name when not root).
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "chunk_pause.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "proc_util.h"
#include "store/write/append.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::append;
using colikv_test::loads_as;
using colikv_test::Outcome;
using colikv_test::outcome_of;
using colikv_test::TempDir;

namespace {

const colikv::ModelSignature kModel = colikv_test::tiny_model();

// 4-token chunks, as colikv_store_child's.
colikv::Options options(const std::string& tenant = "") {
  colikv::Options o;
  o.chunk_target_bytes = 4 * kModel.record_bytes();
  o.busy_timeout_ms = 2000;
  if (!tenant.empty()) o.tenant = tenant;
  return o;
}

struct ObjectsFirst {
  int64_t saved = colikv::detail::objects_first_min_bytes();
  ObjectsFirst() { colikv::detail::objects_first_min_bytes() = 0; }
  ~ObjectsFirst() { colikv::detail::objects_first_min_bytes() = saved; }
};

int64_t rows(const std::string& path, const std::string& table) {
  return colikv_test::store_int(path, "SELECT count(*) FROM " + table);
}

// colikv_store_child hold: appends 64 tokens of history 5 to "a" in one turn
// of 16 chunks, says "mid-turn" after chunk 3 (chunks 0..3 held, nothing
// linked) and waits for a line on its stdin; `prefix` runs it (unshare ...).
std::vector<std::string> held_writer(const std::vector<std::string>& prefix, const std::string& path) {
  std::vector<std::string> argv = prefix;
  for (const char* a : {COLIKV_STORE_CHILD_PATH, "hold"}) argv.push_back(a);
  for (const std::string& a : {path, std::string("a"), std::string("5"), std::string("64"), std::string("3")})
    argv.push_back(a);
  return argv;
}

// Runs a shell command line; its exit status (-1: not run).
int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The held writer goes on: its turn must commit, whole and exact.
void writer_commits(colikv_test::ChildProcess& child, const std::string& path) {
  child.write_stdin("go\n");
  std::string line;
  REQUIRE(child.read_line(line));
  CHECK(line == "committed 64");
  CHECK(WEXITSTATUS(child.wait()) == 0);
  Store s(path, options());
  CHECK(loads_as(s, "a", colikv_test::history(kModel, 64, 5), 64) == "");
  CHECK(s.verify().ok());
  CHECK(rows(path, "held_chunks") == 0);
  CHECK(colikv_test::orphan_chunks(path, false) == 0);
}

}  // namespace

TEST_CASE("objects first: a turn whose held chunks were taken fails saying so, never linking a reused chunk id",
          "[objects][sync]") {
  ObjectsFirst on;
  // After chunk 1 (the next chunk's hold finds the writer gone), or after the
  // last (the link finds its chunk ids given to another tenant's chunks).
  const int64_t seq = GENERATE(1, 7);
  INFO("paused after chunk " << seq);
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers a = colikv_test::history(kModel, 32, 1), x = colikv_test::history(kModel, 32, 9);
  Store writer(path, options());
  append(writer, "a", a, 4);
  Store other(path, options("other"));
  colikv_test::ChunkPause paused("a", seq);
  Outcome ra;
  std::thread ta([&] { ra = outcome_of([&] { append(writer, "a", a, 32); }); });
  paused.wait_reached();
  REQUIRE(rows(path, "held_chunks") == seq);
  // What a reclaim that took the live writer for dead did (issue 33): its
  // row, its holds and its held chunks gone; then another tenant's append
  // stores new chunks, which take the freed chunk ids.
  colikv_test::store_exec(path, "DELETE FROM chunks WHERE chunk_id IN (SELECT chunk_id FROM held_chunks)");
  colikv_test::store_exec(path, "DELETE FROM held_chunks");
  colikv_test::store_exec(path, "DELETE FROM writers");
  append(other, "x", x, 32);
  paused.release();
  ta.join();
  INFO(ra.message);
  CHECK(ra.code == ErrorCode::kConflict);
  CHECK(ra.message.find("this turn's chunks were taken while it ran") != std::string::npos);
  // Nothing of the turn linked: "a" as it was, the other tenant's "x" intact.
  CHECK(writer.count("a") == 4);
  CHECK(loads_as(writer, "a", a, 4) == "");
  CHECK(loads_as(other, "x", x, 32) == "");
  CHECK(writer.verify().ok());
  CHECK(other.verify().ok());
  // The next turn registers the writer again and commits.
  append(writer, "a", a, 32);
  CHECK(loads_as(writer, "a", a, 32) == "");
  CHECK(rows(path, "held_chunks") == 0);
}

TEST_CASE("objects first: a writer whose process is gone is reclaimed by the lock file, a live one's kept",
          "[objects]") {
  // The lock file beside the store says so, with no /proc read: the writer
  // killed loses its held chunks at the next open, and never before.
  TempDir dir;
  const std::string path = dir.file("s.db");
  { Store s(path, options()); }
  ::setenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES", "0", 1);
  colikv_test::ChildProcess live(held_writer({}, path), true);
  ::unsetenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES");
  std::string line;
  REQUIRE(live.read_line(line));
  REQUIRE(line == "mid-turn");
  struct stat st;
  CHECK(::stat((path + "-writers").c_str(), &st) == 0);
  { Store opened(path, options()); }
  CHECK(rows(path, "held_chunks") == 4);
  writer_commits(live, path);

  ::setenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES", "0", 1);
  colikv_test::ChildProcess killed(held_writer({}, dir.file("t.db")), true);
  ::unsetenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES");
  REQUIRE(killed.read_line(line));
  REQUIRE(line == "mid-turn");
  CHECK(rows(dir.file("t.db"), "held_chunks") == 4);
  killed.kill_now();
  killed.wait();
  { Store opened(dir.file("t.db"), options()); }
  CHECK(rows(dir.file("t.db"), "held_chunks") == 0);
  CHECK(rows(dir.file("t.db"), "writers") == 0);
  CHECK(colikv_test::orphan_chunks(dir.file("t.db"), false) == 0);
}

TEST_CASE("objects first: a live writer in a pid namespace without its own /proc keeps its held chunks",
          "[objects][root]") {
  REQUIRE(::geteuid() == 0);  // run through ctest (root:...), which skips it by name otherwise
  TempDir dir;
  const std::string path = dir.file("s.db");
  { Store s(path, options()); }
  // unshare -p -f without --mount-proc: the writer is pid 1 of a new pid
  // namespace, and /proc is still the parent namespace's.
  ::setenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES", "0", 1);
  colikv_test::ChildProcess child(held_writer({"/usr/bin/unshare", "-p", "-f"}, path), true);
  ::unsetenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES");
  std::string line;
  REQUIRE(child.read_line(line));
  REQUIRE(line == "mid-turn");
  REQUIRE(rows(path, "held_chunks") == 4);
  // Another process of that pid namespace (same /proc) opens the store writable and collects.
  const std::string ns = "/proc/" + std::to_string(child.pid()) + "/ns/pid_for_children";
  CHECK(shell("nsenter --pid=" + ns + " -- " + COLIKV_TOOL_PATH + " gc " + path +
              " --max-bytes 1000000000000 >/dev/null") == 0);
  // And one of this process's namespace, for good measure.
  { Store opened(path, options()); }
  CHECK(rows(path, "held_chunks") == 4);
  writer_commits(child, path);
}

TEST_CASE("objects first: a live writer hidden by /proc's hidepid=2 keeps its held chunks", "[objects][root]") {
  REQUIRE(::geteuid() == 0);  // run through ctest (root:...), which skips it by name otherwise
  TempDir dir;
  REQUIRE(::chmod(dir.path().c_str(), 0777) == 0);
  const std::string path = dir.file("s.db");
  {
    colikv::Options o = options();
    o.file_mode = 0666;  // a store shared with another user
    Store s(path, o);
  }
  ::setenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES", "0", 1);
  colikv_test::ChildProcess child(held_writer({}, path), true);
  ::unsetenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES");
  std::string line;
  REQUIRE(child.read_line(line));
  REQUIRE(line == "mid-turn");
  REQUIRE(rows(path, "held_chunks") == 4);
  for (const char* suffix : {"", "-wal", "-shm"}) ::chmod((path + suffix).c_str(), 0666);
  // User nobody, under a /proc that hides other users' processes (systemd's
  // ProtectProc=invisible), opens the store writable and collects.
  CHECK(shell("unshare -m sh -c 'mount -t proc -o hidepid=2 proc /proc && exec setpriv --reuid=65534 "
              "--regid=65534 --clear-groups " +
              std::string(COLIKV_TOOL_PATH) + " gc " + path + " --max-bytes 1000000000000' >/dev/null") == 0);
  CHECK(rows(path, "held_chunks") == 4);
  writer_commits(child, path);
}
