// Several processes on one store: two append to different conversations at
// the same time while a third reads both over and over (colikv_store_child).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "colikv/store.h"
#include "backend.h"
#include "test_support.h"

using colikv_test::loads_as;

#ifndef COLIKV_STORE_CHILD_PATH
#error "COLIKV_STORE_CHILD_PATH must name the colikv_store_child program (tests/CMakeLists.txt)"
#endif

extern char** environ;

using colikv::ModelSignature;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

// What colikv_store_child uses: tiny_model(), 4-token chunks, histories by seed.
ModelSignature child_model() { return colikv_test::tiny_model(); }
colikv::Options child_options() {
  colikv::Options o;
  o.chunk_target_bytes = 4 * child_model().record_bytes();
  return o;
}

// Child processes started by this test; any still running when it ends
// (a failed REQUIRE) are killed and reaped.
class Children {
 public:
  ~Children() {
    for (pid_t pid : running_) {
      kill(pid, SIGKILL);
      int st = 0;
      waitpid(pid, &st, 0);
    }
  }
  // Starts the child program with args, its stdout going to out_path.
  pid_t spawn(const std::vector<std::string>& args, const std::string& out_path) {
    std::vector<std::string> all{COLIKV_STORE_CHILD_PATH};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
    running_.push_back(pid);
    return pid;
  }
  // Waits for pid; returns its exit status, or 128 + the signal that ended it.
  int wait(pid_t pid) {
    int st = 0;
    pid_t r;
    do {
      r = waitpid(pid, &st, 0);
    } while (r < 0 && errno == EINTR);
    for (auto it = running_.begin(); it != running_.end(); ++it)
      if (*it == pid) {
        running_.erase(it);
        break;
      }
    if (r != pid) return -1;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return -1;
  }

 private:
  std::vector<pid_t> running_;
};


void run_two_appenders_and_a_reader(const TempDir& dir, const std::string& store_path, bool reader_read_only) {
  const int64_t turns = 30, per_turn = 3, final_count = turns * per_turn;
  const uint32_t seed_a = 101, seed_b = 202;
  Children kids;
  const std::string done = dir.file("appenders.done");
  pid_t a = kids.spawn({"append", store_path, "alpha", std::to_string(seed_a), std::to_string(turns), std::to_string(per_turn)},
                       dir.file("alpha.out"));
  pid_t b = kids.spawn({"append", store_path, "beta", std::to_string(seed_b), std::to_string(turns), std::to_string(per_turn)},
                       dir.file("beta.out"));
  pid_t r = kids.spawn({"read", store_path, done, std::to_string(per_turn), reader_read_only ? "1" : "0", "alpha",
                        std::to_string(seed_a), std::to_string(final_count), "beta", std::to_string(seed_b),
                        std::to_string(final_count)},
                       dir.file("reader.out"));
  const int status_a = kids.wait(a);
  const int status_b = kids.wait(b);
  colikv_test::write_file(done, "done\n");  // the reader makes its last pass
  const int status_r = kids.wait(r);
  CHECK(status_a == 0);
  CHECK(status_b == 0);
  CHECK(status_r == 0);

  // Each appender printed the committed count after every turn.
  std::string expected_out;
  for (int64_t t = 1; t <= turns; ++t) expected_out += std::to_string(t * per_turn) + "\n";
  CHECK(colikv_test::read_file(dir.file("alpha.out")) == expected_out);
  CHECK(colikv_test::read_file(dir.file("beta.out")) == expected_out);
  CHECK(colikv_test::read_file(dir.file("reader.out")).rfind("loads ", 0) == 0);

  colikv::Store s(store_path, child_options());
  CHECK(s.conversation_count() == 2);
  CHECK(loads_as(s, "alpha", colikv_test::history(child_model(), final_count, seed_a), final_count) == "");
  CHECK(loads_as(s, "beta", colikv_test::history(child_model(), final_count, seed_b), final_count) == "");
  auto report = s.verify();
  INFO((report.problems.empty() ? std::string() : report.problems[0].what));
  CHECK(report.ok());
}

}  // namespace

TEST_CASE("multiprocess: two appenders and a reader on one store", "[backends][multiprocess]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "shared.colikv");
  { colikv::Store s(path, child_options()); }  // the store exists before the children start
  run_two_appenders_and_a_reader(dir, path, true);
}

TEST_CASE("multiprocess: three processes open a missing store at once", "[multiprocess]") {
  // Creating the file and applying the migrations race too: every process
  // must end up with the same, complete store.
  TempDir dir;
  const std::string path = dir.file("fresh.colikv");
  REQUIRE_FALSE(std::filesystem::exists(path));
  run_two_appenders_and_a_reader(dir, path, false);
  colikv::Store s(path, child_options());
  CHECK(s.schema_version() == colikv::Store::library_schema_version());
}

TEST_CASE("multiprocess: two engine hosts append, load, fork and match overlapping conversations",
          "[backends][multiprocess]") {
  // On PostgreSQL these are two hosts of one deployment: every turn a host
  // acknowledges must read back bit-exact from the other (colikv_store_child
  // host checks each load), and the conversation both extend stays one
  // consistent history.
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "hosts.colikv");
  { colikv::Store s(path, child_options()); }
  const int64_t turns = 12, per_turn = 3, n = turns * per_turn;
  Children kids;
  pid_t a = kids.spawn({"host", path, "a", "11", "b", "22", std::to_string(turns), std::to_string(per_turn)},
                       dir.file("a.out"));
  pid_t b = kids.spawn({"host", path, "b", "22", "a", "11", std::to_string(turns), std::to_string(per_turn)},
                       dir.file("b.out"));
  CHECK(kids.wait(a) == 0);
  CHECK(kids.wait(b) == 0);
  std::string acks;
  for (int64_t t = 1; t <= turns; ++t) acks += "ack " + std::to_string(t * per_turn) + "\n";
  CHECK(colikv_test::read_file(dir.file("a.out")) == acks);
  CHECK(colikv_test::read_file(dir.file("b.out")) == acks);

  colikv::Store s(path, child_options());
  CHECK(loads_as(s, "a", colikv_test::history(child_model(), n, 11), n) == "");
  CHECK(loads_as(s, "b", colikv_test::history(child_model(), n, 22), n) == "");
  // Each host extended "shared" to at least one turn more per turn of its
  // own (two hosts extending to the same length at once make one of them a
  // no-op: the tokens are there already), so it holds n to 2n tokens, whole
  // turns of one consistent history.
  const int64_t shared = s.count("shared");
  CHECK(shared >= n);
  CHECK(shared <= 2 * n);
  CHECK(shared % per_turn == 0);
  CHECK(loads_as(s, "shared", colikv_test::history(child_model(), 2 * n, 777), shared) == "");
  CHECK(loads_as(s, "a/fork" + std::to_string(turns), colikv_test::history(child_model(), n, 11), n / 2) == "");
  CHECK(s.conversation_count() == 3 + 2 * turns);
  auto report = s.verify();
  INFO((report.problems.empty() ? std::string() : report.problems[0].what));
  CHECK(report.ok());
}
