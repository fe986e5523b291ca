// Running the colikv tool (or any program) as a child process, and the
// .coli_kv files the CLI tests feed it. Shared by tests/test_cli*.cpp.
#ifndef COLIKV_TESTS_CLI_RUN_H
#define COLIKV_TESTS_CLI_RUN_H

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sqlite3.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "test_support.h"

namespace colikv_test {

inline const std::string kTool = COLIKV_TOOL_PATH;

// ---------------------------------------------------------------------------
// Running a program.

struct Run {
  int code = -1;     // exit status, or 128 + signal
  std::string out;   // stdout
  std::string err;   // stderr
};

struct RunOptions {
  // As root: the child keeps its user but loses the capabilities that let
  // root ignore file modes (dropped from its bounding set, so that execve
  // does not give them back), and file modes stop it as they stop the
  // files' owner. Its own user, so the tool and its libraries stay reachable
  // wherever the build is. Exit 126 if they cannot be dropped.
  bool bound_by_file_modes = false;
  // RLIMIT_FSIZE in the child, SIGXFSZ left at its default (killing): the
  // tool must ignore it itself to report the failed write.
  int64_t file_size_limit = -1;
};

inline std::string describe(const std::vector<std::string>& argv, const Run& r) {
  std::string s = "$";
  for (const auto& a : argv) s += " " + a;
  s += "\nexit " + std::to_string(r.code) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
  return s;
}

inline Run run_program(const std::string& program, const std::vector<std::string>& args, const RunOptions& ro = {}) {
  std::vector<std::string> full{program};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) FAIL("pipe2: " << std::strerror(errno));
  pid_t pid = fork();
  if (pid < 0) FAIL("fork: " << std::strerror(errno));
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    if (ro.file_size_limit >= 0) {
      signal(SIGXFSZ, SIG_DFL);
      struct rlimit rl;
      rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(ro.file_size_limit);
      if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(125);
    }
    if (ro.bound_by_file_modes)
      for (int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER})
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) _exit(126);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  Run r;
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      FAIL("poll: " << std::strerror(errno));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline Run tool(const std::vector<std::string>& args, const RunOptions& ro = {}) { return run_program(kTool, args, ro); }

// Runs the tool and requires the exit code; returns the result.
#define RUN_EXPECT(code_, ...)                                   \
  [&]() {                                                        \
    std::vector<std::string> args_ = __VA_ARGS__;                \
    Run r_ = tool(args_);                                      \
    INFO(describe(args_, r_));                                   \
    REQUIRE(r_.code == (code_));                                 \
    return r_;                                                   \
  }()

// A small tmpfs mounted for the test's life (the test runs as root).
class SmallFilesystem {
 public:
  SmallFilesystem(const std::string& dir, const std::string& size) : dir_(dir) {
    ::mkdir(dir.c_str(), 0755);
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~SmallFilesystem() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallFilesystem(const SmallFilesystem&) = delete;
  SmallFilesystem& operator=(const SmallFilesystem&) = delete;
  bool mounted() const { return mounted_; }
  // Even root can then create nothing in it.
  bool remount_read_only() {
    return mounted_ && ::mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
};


inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

inline bool contains_ci(const std::string& hay, const std::string& needle) { return contains(lower(hay), lower(needle)); }

// A failure or usage error: one line on stderr, "colikv: CMD: ...".
inline void require_error_line(const Run& r, const std::string& command) {
  INFO("stderr: " << r.err);
  CHECK(r.err.rfind("colikv: " + command + ": ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK((!r.err.empty() && r.err.back() == '\n'));
}

inline bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}
// ---------------------------------------------------------------------------
// Generated .coli_kv files.

// The bytes of a .coli_kv file of n generated records under header count nrec.
inline std::string coli_bytes(const colikv::ModelSignature& m, int64_t n, uint32_t seed, int64_t nrec = -1,
                       void (*tweak)(EngineBuffers&) = nullptr) {
  EngineBuffers b(m, std::max<int64_t>(n, 1));
  b.fill(0, n, seed);
  b.tokens = colikv_test::make_tokens(std::max<int64_t>(n, 1), m.vocab, seed);
  if (tweak) tweak(b);
  TempDir tmp;
  colikv_test::write_coli_kv(tmp.file("f"), b, n, nrec);
  return read_file(tmp.file("f"));
}

// A store's content, for "unchanged" checks: every row of every table (blobs
// in hex), the schema and user_version, read directly with SQLite.

inline std::string dump_store(const std::string& path) {
  if (!file_exists(path)) return "<no store file>";
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::string m = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    FAIL("cannot open " << path << ": " << m);
  }
  std::string out;
  auto query = [&](const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      std::string m = sqlite3_errmsg(db);
      sqlite3_close(db);
      FAIL(sql << ": " << m);
    }
    std::vector<std::string> rows;
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        row += c ? "|" : "";
        switch (sqlite3_column_type(st, c)) {
          case SQLITE_NULL: row += "NULL"; break;
          case SQLITE_BLOB: {
            const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(st, c));
            int n = sqlite3_column_bytes(st, c);
            static const char* hex = "0123456789abcdef";
            row += "x'";
            for (int i = 0; i < n; ++i) { row += hex[p[i] >> 4]; row += hex[p[i] & 15]; }
            row += "'";
            break;
          }
          default: row += reinterpret_cast<const char*>(sqlite3_column_text(st, c)); break;
        }
      }
      rows.push_back(row);
    }
    sqlite3_finalize(st);
    return rows;
  };
  for (const auto& r : query("PRAGMA user_version")) out += "user_version " + r + "\n";
  std::vector<std::string> tables = query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  for (const auto& r : query("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")) out += r + "\n";
  for (const auto& t : tables) {
    out += "== " + t + "\n";
    for (const auto& r : query("SELECT * FROM \"" + t + "\" ORDER BY 1, 2")) out += r + "\n";
  }
  sqlite3_close(db);
  return out;
}

// Runs one SQL statement on a store (the tests' own tampering).
inline void sql_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
  char* msg = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg);
  std::string m = msg ? msg : "";
  sqlite3_free(msg);
  sqlite3_close(db);
  INFO(sql << ": " << m);
  REQUIRE(rc == SQLITE_OK);
}

}  // namespace colikv_test

#endif  // COLIKV_TESTS_CLI_RUN_H
