// The colikv tool's file handling under hostile conditions, run as separate
// processes: racing imports, stores behind symbolic links and file: URIs,
// export's output path, terminal escapes from a store, full disks and
// file-size limits, and input files whose size a command must not trust.
#include <dirent.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/sysmacros.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "cli_run.h"
#include "colikv/coli_kv.h"
#include "proc_util.h"

namespace {

using colikv_test::ChildProcess;
using colikv_test::EngineBuffers;
using colikv_test::Run;
using colikv_test::SmallFilesystem;
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

// A temporary file another colikv process is writing right now: it holds it
// under an flock, as a running export or import does, so cleanup keeps it.
class HeldTemp {
 public:
  explicit HeldTemp(const std::string& path) : path_(path) {
    write_file(path, "");
    fd_ = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd_ >= 0);
    REQUIRE(::flock(fd_, LOCK_EX) == 0);
  }
  ~HeldTemp() { ::close(fd_); }
  HeldTemp(const HeldTemp&) = delete;
  HeldTemp& operator=(const HeldTemp&) = delete;
  const std::string& path() const { return path_; }
  std::string name() const { return path_.substr(path_.rfind('/') + 1); }

 private:
  std::string path_;
  int fd_ = -1;
};

// The temporary files (names starting with prefix) in dir, but for the held
// one and its companions.
std::vector<std::string> temps_in(const std::string& dir, const std::string& prefix, const HeldTemp& held) {
  std::vector<std::string> found;
  for (const auto& n : names_in(dir))
    if (n.rfind(prefix, 0) == 0 && n.rfind(held.name(), 0) != 0) found.push_back(n);
  return found;
}

// Kills the child once busy() holds (or it exits, or 20 s pass).
void kill_when(ChildProcess& child, const std::function<bool()>& busy) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!busy() && std::chrono::steady_clock::now() < deadline && ::waitpid(child.pid(), nullptr, WNOHANG) == 0)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  child.kill_now();
  child.wait();
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

namespace {

// Text a hostile store holds: an OSC 52 clipboard write, a clear screen, a C1
// CSI, a newline and a byte that is not UTF-8.
const std::string kEvil = "x\x1b]52;c;SGVsbG8=\x07\x1b[2J\xc2\x9b" "2J\n\xff";

// The bytes of output that could act on a terminal: C0 controls other than
// newline, DEL, C1 controls (UTF-8 encoded), bytes that are not UTF-8.
std::string terminal_controls(const std::string& text) {
  std::string found;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if ((c < 0x20 && c != '\n') || c == 0x7f || c == 0xff || (c == 0xc2 && next >= 0x80 && next < 0xa0))
      found += "byte " + std::to_string(i) + " (" + std::to_string(c) + ") ";
  }
  return found;
}

}  // namespace

TEST_CASE("cli files: ids, titles and models from a store never reach the terminal raw", "[cli][files]") {
  TempDir dir;
  const std::string store = dir.file("s.db");
  colikv::ModelSignature m = colikv_test::tiny_model();
  m.weights_id = kEvil;
  {
    colikv::Store s(store, colikv_test::chunked_options(m, 4));
    EngineBuffers b(m, 16);
    b.fill(0, 16, 1);
    s.append(kEvil, m, b.tokens.data(), 16, b.source());
    s.fork(kEvil, "child" + kEvil, 8);
    const std::vector<int32_t> other = colikv_test::make_tokens(12, m.vocab, 99);
    s.append("plain", m, other.data(), 12, b.source());
    s.set_title(kEvil, "title" + kEvil);
  }
  write_file(dir.file("evil.coli_kv"), coli_bytes(colikv_test::tiny_model(), 10, 3));
  {
    colikv::Store s(store);
    const std::vector<int32_t> t = s.tokens(kEvil);
    write_file(dir.file("prompt.txt"), std::to_string(t[0]) + " " + std::to_string(t[1]));
  }
  const std::vector<std::vector<std::string>> commands = {
      {"ls", store},
      {"info", store, kEvil},
      {"info", store, "child" + kEvil},
      {"info", store, "missing" + kEvil},
      {"stats", store},
      {"match", store, "--model-of", kEvil, "--tokens", dir.file("prompt.txt")},
      {"import", store, dir.file("evil.coli_kv"), "--id", "imported" + kEvil, "--weights-id", kEvil},
      {"export", store, kEvil, dir.file("out" + kEvil)},
      {"fork", store, kEvil, "fork" + kEvil, "--at", "4"},
      {"rename", store, "fork" + kEvil, "renamed" + kEvil},
      {"truncate", store, "renamed" + kEvil, "2"},
      {"rm", store, "renamed" + kEvil},
      {"gc", store, "--max-bytes", "0"},
  };
  for (const auto& c : commands) {
    Run r = tool(c);
    INFO(colikv_test::describe(c, r));
    CHECK(r.code <= 1);
    CHECK(terminal_controls(r.out) == "");
    CHECK(terminal_controls(r.err) == "");
    // Shown, escaped (an error line has its newlines joined as spaces).
    CHECK(contains(r.out + r.err, "\\x1b]52;c;SGVsbG8=\\x07\\x1b[2J\\u009b2J"));
  }
  // A problem found by verify quotes the conversation.
  colikv_test::sql_exec(store, "UPDATE conversations SET token_count = token_count + 1");
  Run r = tool({"verify", store});
  CHECK(r.code == 1);
  CHECK(contains(r.out, "problem: conversation 'x\\x1b]52"));
  CHECK(terminal_controls(r.out + r.err) == "");
  // --json escapes C1 controls too.
  Run j = tool({"ls", store, "--json"});
  CHECK(terminal_controls(j.out) == "");
  CHECK(contains(j.out, "\\u001b]52;c;SGVsbG8=\\u0007\\u001b[2J\\u009b2J\\n\\ufffd"));
}

namespace {

// A store holding conversation "a" (wide records, so that exports take a while).
std::string store_with_a(const TempDir& dir, int64_t tokens) {
  const std::string store = dir.file("s.db");
  write_file(dir.file("a.coli_kv"), coli_bytes(colikv_test::wide_model(), tokens, 5));
  Run r = tool({"import", store, dir.file("a.coli_kv"), "--id", "a"});
  REQUIRE(r.code == 0);
  return store;
}

mode_t file_type(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

}  // namespace

TEST_CASE("cli files: export never replaces the store, its companions or a non-regular file", "[cli][files]") {
  TempDir dir;
  const std::string store = store_with_a(dir, 40);
  const std::string before = colikv_test::dump_store(store);
  REQUIRE(::link(store.c_str(), dir.file("hardlink.db").c_str()) == 0);
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0644) == 0);
  REQUIRE(::mknod(dir.file("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
  REQUIRE(::symlink("s.db", dir.file("to_store").c_str()) == 0);
  colikv::Store writer(store);  // another process's writer: its -wal stays while the exports run
  REQUIRE(file_exists(store + "-wal"));

  struct Case {
    std::string out;
    std::string phrase;
    mode_t type;  // what must still be there afterwards (0: nothing)
  };
  const std::vector<Case> cases = {
      {store, "the store's own file", S_IFREG},
      {store + "-wal", "the store's own file", S_IFREG},
      {store + "-journal", "the name of the store's own file", 0},
      {dir.file("hardlink.db"), "the store's own file", S_IFREG},
      {dir.file("to_store"), "the store's own file", S_IFLNK},
      {dir.file("fifo"), "a FIFO", S_IFIFO},
      {dir.file("null"), "a character device", S_IFCHR},
      {dir.path(), "a directory", S_IFDIR},
  };
  for (const auto& c : cases) {
    Run r = tool({"export", store, "a", c.out, "--force"});
    INFO(colikv_test::describe({"export", store, "a", c.out, "--force"}, r));
    CHECK(r.code == 1);
    require_error_line(r, "export");
    CHECK(contains(r.err, c.phrase));
    CHECK(file_type(c.out) == c.type);
  }
  CHECK(colikv_test::dump_store(store) == before);
  CHECK(colikv_test::read_file(store + "-wal").empty());
}

TEST_CASE("cli files: export through symbolic links, to standard output and under a long name", "[cli][files]") {
  TempDir dir;
  const std::string store = store_with_a(dir, 40);
  const std::string expected = read_file(dir.file("a.coli_kv"));

  // A dangling link is refused like any existing OUT, with or without --force.
  REQUIRE(::symlink("missing.coli_kv", dir.file("dangling").c_str()) == 0);
  for (const auto& force : {std::vector<std::string>{}, std::vector<std::string>{"--force"}}) {
    std::vector<std::string> args = {"export", store, "a", dir.file("dangling")};
    args.insert(args.end(), force.begin(), force.end());
    Run r = tool(args);
    INFO(colikv_test::describe(args, r));
    CHECK(r.code == 1);
    CHECK(contains(r.err, "a symbolic link to a missing file"));
    CHECK(file_type(dir.file("dangling")) == S_IFLNK);
    CHECK_FALSE(file_exists(dir.file("missing.coli_kv")));
  }

  // A link to a file: with --force the link stays and its target is replaced.
  write_file(dir.file("old.coli_kv"), "old");
  REQUIRE(::symlink("old.coli_kv", dir.file("link").c_str()) == 0);
  CHECK(tool({"export", store, "a", dir.file("link")}).code == 1);
  CHECK(read_file(dir.file("old.coli_kv")) == "old");
  CHECK(tool({"export", store, "a", dir.file("link"), "--force"}).code == 0);
  CHECK(file_type(dir.file("link")) == S_IFLNK);
  CHECK(read_file(dir.file("old.coli_kv")) == expected);

  // '-': the bytes on standard output and nothing else.
  Run r = tool({"export", store, "a", "-"});
  CHECK(r.code == 0);
  CHECK(r.out == expected);
  CHECK(r.err.empty());
  CHECK(tool({"export", store, "a", "-", "--json"}).code == 2);
  // Standard output appended to the store itself is refused, the store kept.
  const std::string before = colikv_test::dump_store(store);
  r = colikv_test::run_program("/bin/sh", {"-c", "'" + kTool + "' export '" + store + "' a - >> '" + store + "'"});
  CHECK(r.code == 1);
  CHECK(contains(r.err, "the output is the store's own file"));
  CHECK(colikv_test::dump_store(store) == before);

  // A name as long as a file name may be: the temporary file's name is short.
  const std::string long_name = dir.file(std::string(255 - 8, 'n') + ".coli_kv");
  r = tool({"export", store, "a", long_name});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(read_file(long_name) == expected);
}

TEST_CASE("cli files: the temporary file of a killed export is removed by the next export", "[cli][files]") {
  TempDir dir;
  const std::string store = store_with_a(dir, 8000);
  const std::string out_dir = dir.file("out");
  REQUIRE(::mkdir(out_dir.c_str(), 0755) == 0);
  const HeldTemp held(out_dir + "/.colikv-export-held00");
  auto temps = [&] { return temps_in(out_dir, ".colikv-export-", held); };
  std::vector<std::string> left;
  for (int attempt = 0; attempt < 5 && left.empty(); ++attempt) {
    ChildProcess e({kTool, "export", store, "a", out_dir + "/a.coli_kv", "--force"});
    kill_when(e, [&] { return !temps().empty(); });
    left = temps();
  }
  INFO("names: " << names_in(out_dir).size());
  REQUIRE(left.size() == 1);  // killed midway: its temporary file is left

  Run r = tool({"export", store, "a", out_dir + "/b.coli_kv"});
  CHECK(r.code == 0);
  CHECK(temps().empty());
  CHECK(file_exists(held.path()));
}

TEST_CASE("cli files: on a full disk the error says what to free, and freeing it lets rm work", "[cli][files][root]") {
  REQUIRE(::geteuid() == 0);  // mounts a tmpfs: ctest runs it as root:..., skipped by name when not root
  TempDir dir;
  SmallFilesystem fs(dir.file("mnt"), "8m");
  REQUIRE(fs.mounted());
  const std::string store = dir.file("mnt/s.db");
  // Room the test frees later, as a person would.
  write_file(dir.file("mnt/filler"), std::string(3 << 20, 'f'));
  const auto wide = colikv_test::wide_model();
  std::string full_error;
  int imported = 0;
  for (int i = 0; i < 20 && full_error.empty(); ++i) {
    write_file(dir.file("in.coli_kv"), coli_bytes(wide, 150, static_cast<uint32_t>(100 + i)));
    Run r = tool({"import", store, dir.file("in.coli_kv"), "--id", "c" + std::to_string(i)});
    if (r.code == 0) ++imported;
    else full_error = r.err;
  }
  INFO(full_error);
  REQUIRE(imported >= 2);
  REQUIRE(contains(full_error, "full"));

  // Every write fails, and says how much to free: about the WAL's size.
  const int64_t wal = colikv_test::file_size(store + "-wal");
  const std::vector<std::vector<std::string>> writes = {
      {"rm", store, "c1"}, {"gc", store, "--max-bytes", "0"}, {"truncate", store, "c1", "1"}, {"vacuum", store}};
  for (const auto& w : writes) {
    Run r = tool(w);
    INFO(colikv_test::describe(w, r));
    CHECK(r.code == 1);
    require_error_line(r, w[0]);
    CHECK(contains(r.err, "full"));
    CHECK(contains(r.err, "B free"));
    CHECK(contains(r.err, store + "-wal"));
    CHECK(contains(r.err, "free about "));
  }
  // Freed as advised: rm works, and the store holds the rest.
  REQUIRE(wal > 0);
  REQUIRE(wal <= (3 << 20));
  REQUIRE(::unlink(dir.file("mnt/filler").c_str()) == 0);
  Run r = tool({"rm", store, "c1"});
  INFO(r.err);
  CHECK(r.code == 0);
  Run ls = tool({"ls", store, "--json"});
  CHECK(contains(ls.out, "\"id\": \"c0\""));
  CHECK_FALSE(contains(ls.out, "\"id\": \"c1\""));
  CHECK(tool({"verify", store}).code == 0);

  // Full to the last byte, SQLite cannot even create the -shm file a reader
  // needs: that is reported as a full disk too, not as an I/O error. (An
  // empty WAL and the -shm of closed connections hold nothing.)
  REQUIRE(colikv_test::file_size(store + "-wal") == 0);
  ::unlink((store + "-wal").c_str());
  ::unlink((store + "-shm").c_str());
  {
    const int fd = ::open(dir.file("mnt/filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    const std::string block(1 << 16, 'f');
    while (::write(fd, block.data(), block.size()) > 0) {
    }
    while (::write(fd, block.data(), 1) > 0) {
    }
    ::close(fd);
  }
  r = tool({"ls", store});
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(contains(r.err, "full"));
  CHECK(contains(r.err, "has 0 B free"));
}

TEST_CASE("cli files: ls --limit 0 lists nothing without calling the store empty", "[cli][files]") {
  TempDir dir;
  const std::string store = store_with_a(dir, 4);
  Run r = tool({"ls", store, "--limit", "0"});
  CHECK(r.code == 0);
  CHECK(r.out == "0 of 1 conversation listed (--limit 0)\n");
  r = tool({"ls", store, "--limit", "0", "--json"});
  CHECK(contains(r.out, "\"conversations\": []"));
  CHECK(tool({"rm", store, "a"}).code == 0);
  CHECK(tool({"ls", store}).out == "no conversations in " + store + "\n");
}

namespace {

struct Measured {
  int code = -1;
  int64_t peak_rss_kib = 0;
  int64_t out_bytes = 0;
};

// The peak resident memory of a process, from its /proc status (VmHWM).
int64_t peak_rss_kib_of(pid_t pid) {
  const std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("VmHWM:");
  return at == std::string::npos ? -1 : std::strtoll(status.c_str() + at + 6, nullptr, 10);
}

// Runs the tool with stdout to a file and returns its exit code and peak
// resident memory. The peak is read when the tool is about to exit (stopped
// there under ptrace): a child's ru_maxrss would count the test process's
// memory it was forked from.
Measured measure_tool(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> full{kTool};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : full) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  // LeakSanitizer cannot run under ptrace: a sanitizer build's tool would die
  // at exit. Its leak check is the rest of the suite's job.
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string no_leak_check = "ASAN_OPTIONS=" + std::string(asan ? asan : "") + ":detect_leaks=0";
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "ASAN_OPTIONS=", 13) != 0) envp.push_back(*e);
  envp.push_back(const_cast<char*>(no_leak_check.c_str()));
  envp.push_back(nullptr);
  const std::string out = dir.file("measured.out");
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  Measured m;
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);  // stopped at the exec
  REQUIRE(WIFSTOPPED(status));
  REQUIRE(::ptrace(PTRACE_SETOPTIONS, pid, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACEEXIT)) == 0);
  for (::ptrace(PTRACE_CONT, pid, nullptr, nullptr); ::waitpid(pid, &status, 0) == pid && WIFSTOPPED(status);) {
    int signal = WSTOPSIG(status);
    if ((status >> 8) == (SIGTRAP | (PTRACE_EVENT_EXIT << 8))) {
      m.peak_rss_kib = peak_rss_kib_of(pid);
      signal = 0;
    }
    ::ptrace(PTRACE_CONT, pid, nullptr, reinterpret_cast<void*>(static_cast<intptr_t>(signal)));
  }
  m.code = exit_code(status);
  m.out_bytes = colikv_test::file_size(out);
  return m;
}

}  // namespace

TEST_CASE("cli files: inspect --tokens N and match --tokens FILE stream, whatever the file holds", "[cli][files]") {
  TempDir dir;
  constexpr int64_t kBoundKib = 32 << 10;
  // A million one-layer records of 12 bytes, all token 0 (a sparse file).
  const int64_t records = 1000000;
  {
    std::string header("COLIKV1\0", 8);
    const int32_t fields[8] = {1, 1, 1, 0, 0, 1000, static_cast<int32_t>(records), 0};
    header.append(reinterpret_cast<const char*>(fields), sizeof fields);
    write_file(dir.file("many.coli_kv"), header);
    REQUIRE(::truncate(dir.file("many.coli_kv").c_str(), 40 + 12 * records) == 0);
  }
  Measured m = measure_tool(dir, {"inspect", dir.file("many.coli_kv"), "--tokens", std::to_string(records), "--json"});
  CHECK(m.code == 0);
  CHECK(m.peak_rss_kib > 0);
  CHECK(m.out_bytes > 3 * records);  // "0, " per token
  CHECK(m.peak_rss_kib < kBoundKib);  // the old tool built a JSON tree of every token
  m = measure_tool(dir, {"inspect", dir.file("many.coli_kv"), "--tokens", std::to_string(records)});
  CHECK(m.code == 0);
  CHECK(m.out_bytes > 2 * records);
  CHECK(m.peak_rss_kib < kBoundKib);
  // Exactly the first N, and " ..." when the header counts more.
  Run r = tool({"inspect", dir.file("many.coli_kv"), "--tokens", "3"});
  CHECK(contains(r.out, "\nfirst tokens  0 0 0 ...\nproblems      none\n"));

  // A prompt of ten million tokens: the match needs no more of it than the
  // longest conversation holds.
  const std::string store = store_with_a(dir, 4);
  const std::vector<int32_t> held = colikv::Store(store).tokens("a");
  std::string prompt;
  for (int32_t t : held) prompt += std::to_string(t) + " ";
  const int64_t filler = 10000000 - static_cast<int64_t>(held.size());
  for (int64_t i = 0; i < filler; ++i) prompt += "7\n";
  write_file(dir.file("prompt.txt"), prompt);
  m = measure_tool(dir, {"match", store, "--model-of", "a", "--tokens", dir.file("prompt.txt"), "--json"});
  CHECK(m.code == 0);
  CHECK(m.peak_rss_kib < kBoundKib);  // the old tool held the text and every token
  const std::string out = read_file(dir.file("measured.out"));
  CHECK(contains(out, "\"prompt_tokens\": 10000000,"));
  CHECK(contains(out, "\"id\": \"a\""));
  CHECK(contains(out, "\"tokens\": 4,"));
  // A bad token far into the file is still found, and named.
  write_file(dir.file("bad.txt"), std::string(1 << 20, ' ') + "1 2 " + std::string(100, '9') + " 3");
  r = tool({"match", store, "--model-of", "a", "--tokens", dir.file("bad.txt")});
  CHECK(r.code == 1);
  CHECK(contains(r.err, "(token 2) is not a token id"));
}

TEST_CASE("cli files: the temporary store of a killed import is removed by the next import", "[cli][files]") {
  TempDir dir;
  write_file(dir.file("big.coli_kv"), coli_bytes(colikv_test::wide_model(), 6000, 4));
  write_file(dir.file("small.coli_kv"), coli_bytes(colikv_test::tiny_model(), 10, 4));
  const std::string out_dir = dir.file("stores");
  REQUIRE(::mkdir(out_dir.c_str(), 0755) == 0);
  const HeldTemp held(out_dir + "/.colikv-import-held00");
  auto temps = [&] { return temps_in(out_dir, ".colikv-import-", held); };
  for (int attempt = 0; attempt < 5 && temps().empty(); ++attempt) {
    ChildProcess i({kTool, "import", out_dir + "/killed.db", dir.file("big.coli_kv")});
    // Killed once the import has written into its temporary store's WAL.
    kill_when(i, [&] {
      for (const auto& n : temps())
        if (n.size() > 4 && n.compare(n.size() - 4, 4, "-wal") == 0 && colikv_test::file_size(out_dir + "/" + n) > 0)
          return true;
      return false;
    });
  }
  INFO("left: " << temps().size());
  REQUIRE_FALSE(temps().empty());  // the store, its -wal, its -shm
  CHECK_FALSE(file_exists(out_dir + "/killed.db"));

  Run r = tool({"import", out_dir + "/next.db", dir.file("small.coli_kv")});
  CHECK(r.code == 0);
  CHECK(temps().empty());
  CHECK(file_exists(held.path()));
  CHECK(names_in(out_dir) == std::vector<std::string>{".colikv-import-held00", "next.db"});
}

TEST_CASE("cli files: export - refuses a terminal as standard output", "[cli][files]") {
  TempDir dir;
  const std::string store = store_with_a(dir, 4);
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  REQUIRE(master >= 0);
  REQUIRE(::grantpt(master) == 0);
  REQUIRE(::unlockpt(master) == 0);
  const std::string terminal = ::ptsname(master);
  // The tool runs in the temporary directory, so that a tool taking '-' for a
  // file name writes it there.
  Run r = colikv_test::run_program(
      "/bin/sh", {"-c", "cd '" + dir.path() + "' && exec '" + kTool + "' export '" + store + "' a - >'" + terminal + "'"});
  ::close(master);
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(contains(r.err, "standard output is a terminal"));
  CHECK_FALSE(file_exists(dir.file("-")));
}

TEST_CASE("cli files: read-only commands leave no -wal or -shm behind while a writer keeps working", "[cli][files]") {
  TempDir dir;
  const std::string store = store_with_a(dir, 40);
  REQUIRE_FALSE(file_exists(store + "-wal"));
  REQUIRE_FALSE(file_exists(store + "-shm"));
  const std::vector<std::vector<std::string>> reads = {
      {"ls", store},     {"ls", store, "--json"}, {"info", store, "a"}, {"verify", store},
      {"stats", store},  {"export", store, "a", dir.file("out.coli_kv"), "--force"},
  };
  for (const auto& r : reads) {
    Run run = tool(r);
    INFO(colikv_test::describe(r, run));
    CHECK(run.code == 0);
    CHECK_FALSE(file_exists(store + "-wal"));
    CHECK_FALSE(file_exists(store + "-shm"));
  }

  // With a writer holding the store open, the companions are its own: each
  // read sees its latest commit and leaves them in place for it.
  const auto wide = colikv_test::wide_model();
  colikv::Store writer(store);
  EngineBuffers b(wide, 64);
  b.fill(0, 64, 9);
  for (int i = 0; i < static_cast<int>(reads.size()); ++i) {
    const std::string id = "w" + std::to_string(i);
    writer.append(id, wide, b.tokens.data(), 8 + i, b.source());
    Run run = tool(reads[static_cast<size_t>(i)]);
    INFO(colikv_test::describe(reads[static_cast<size_t>(i)], run));
    CHECK(run.code == 0);
    CHECK(file_exists(store + "-wal"));
    CHECK(contains(tool({"info", store, id}).out, std::to_string(8 + i)));
  }
  writer.append("w0", wide, b.tokens.data(), 64, b.source());
  CHECK(writer.count("w0") == 64);
  CHECK(tool({"verify", store}).code == 0);
}

namespace {

// The child's exit code, or -1 once it has run for 20 s (then it is killed):
// a command that blocks fails the test instead of stalling the suite.
int exit_code_within_20s(ChildProcess& child) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  siginfo_t info{};
  while (std::chrono::steady_clock::now() < deadline) {
    info.si_pid = 0;
    if (::waitid(P_PID, static_cast<id_t>(child.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0)
      return exit_code(child.wait());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  child.kill_now();
  child.wait();
  return -1;
}

// Runs the tool with stdin on a pipe fed `input`; stdout is returned in out,
// stderr is written to err_path.
int tool_fed(const std::vector<std::string>& args, const std::string& input, const std::string& err_path,
             std::string& out) {
  std::vector<std::string> argv{kTool};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess child(argv, true, err_path);
  child.write_stdin(input);
  child.close_stdin();
  out = child.read_rest();
  return exit_code_within_20s(child);
}

}  // namespace

TEST_CASE("cli files: a FIFO, a device or a directory as the .coli_kv file is refused at once", "[cli][files]") {
  TempDir dir;
  const std::string store = dir.file("s.db");
  const std::string fifo = dir.file("f.coli_kv");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  ::mkdir(dir.file("d.coli_kv").c_str(), 0755);
  const struct {
    std::string path, kind;
  } inputs[] = {{fifo, "a FIFO"}, {"/dev/zero", "a character device"}, {dir.file("d.coli_kv"), "a directory"}};
  for (const auto& in : inputs)
    for (const char* command : {"import", "inspect"}) {
      std::vector<std::string> argv{kTool, command};
      if (std::string(command) == "import") argv.push_back(store);
      argv.push_back(in.path);
      INFO(command << " " << in.path);
      ChildProcess child(argv, false, dir.file("err"));
      CHECK(exit_code_within_20s(child) == 1);  // the old tool blocked forever opening the FIFO
      const std::string err = read_file(dir.file("err"));
      CHECK(contains(err, in.path + ": " + in.kind + ", not a .coli_kv file"));
      ::unlink(dir.file("err").c_str());
    }
  CHECK(names_in(dir.path()) == std::vector<std::string>{"d.coli_kv", "f.coli_kv"});  // no store, no temporary
}

TEST_CASE("cli files: match reads a prompt from a pipe whole", "[cli][files]") {
  TempDir dir;
  const std::string store = store_with_a(dir, 4);
  std::string prompt;
  for (int32_t t : colikv::Store(store).tokens("a")) prompt += std::to_string(t) + " ";
  prompt += "1 2 3\n";
  std::string out;
  // The old tool read the pipe's first bytes to look for a .coli_kv magic,
  // then read the rest as text: "a prefix of the 0 prompt tokens", exit 0.
  CHECK(tool_fed({"match", store, "--model-of", "a", "--tokens", "/dev/stdin", "--json"}, prompt, dir.file("err"),
                 out) == 0);
  INFO(out << read_file(dir.file("err")));
  CHECK(contains(out, "\"prompt_tokens\": 7,"));
  CHECK(contains(out, "\"id\": \"a\""));
  CHECK(contains(out, "\"tokens\": 4,"));
}

TEST_CASE("cli files: copy of an id the source lacks creates no destination", "[cli][files]") {
  TempDir dir;
  const std::string store = store_with_a(dir, 4);
  const std::string dst = dir.file("new.db");
  Run r = tool({"copy", store, dst, "a", "absent"});
  INFO(r.err);
  CHECK(r.code == 1);
  require_error_line(r, "copy");
  CHECK(contains(r.err, "conversation 'absent': no such conversation"));
  CHECK_FALSE(file_exists(dst));  // the old tool created it and copied 'a' first
  CHECK(names_in(dir.path()) == std::vector<std::string>{"a.coli_kv", "s.db"});
}

TEST_CASE("cli files: a copy that fails midway into a new store leaves no store", "[cli][files]") {
  TempDir dir;
  const std::string store = store_with_a(dir, 4);
  const std::string dst = dir.file("new.db");
  // 'a' is copied, then refused the second time: DST holds it by then.
  Run r = tool({"copy", store, dst, "a", "a"});
  INFO(r.err);
  CHECK(r.code == 1);
  require_error_line(r, "copy");
  CHECK(contains(r.err, "'a'"));
  CHECK(r.out.empty());  // nothing said copied: nothing was
  CHECK_FALSE(file_exists(dst));  // the old tool left it, holding 'a'
  CHECK(names_in(dir.path()) == std::vector<std::string>{"a.coli_kv", "s.db"});
  // Into an existing store, the copies before the refused one stay.
  r = tool({"copy", store, dst, "a"});
  CHECK(r.code == 0);
  CHECK(contains(r.out, "copied 'a'"));
  r = tool({"copy", store, dst, "a"});
  CHECK(r.code == 1);
  CHECK(contains(tool({"ls", dst}).out, "a"));
}

TEST_CASE("cli files: an export that fills OUT's filesystem names OUT and that filesystem", "[cli][files][root]") {
  REQUIRE(::geteuid() == 0);  // mounts a tmpfs: ctest runs it as root:..., skipped by name when not root
  TempDir dir;
  const std::string store = store_with_a(dir, 100);  // 0.7 MB of records, on a roomy disk
  SmallFilesystem fs(dir.file("mnt"), "256k");
  REQUIRE(fs.mounted());
  const std::string out = dir.file("mnt/a.coli_kv");
  Run r = tool({"export", store, "a", out});
  INFO(r.err);
  CHECK(r.code == 1);
  require_error_line(r, "export");
  // The old tool named only the temporary file, then advised freeing space
  // beside the store, where there was plenty.
  CHECK(contains(r.err, "colikv: export: " + out + " (its temporary file " + dir.file("mnt/.colikv-export-")));
  CHECK(contains(r.err, "No space left on device; the file takes "));
  CHECK(contains(r.err, " and the filesystem holding " + dir.file("mnt/") + " has "));
  CHECK_FALSE(contains(r.err, "WAL"));
  CHECK(names_in(dir.file("mnt")).empty());  // no partial file, no temporary
}

TEST_CASE("cli files: --weights-id-from refuses a config.json that is a FIFO, a device or a directory", "[cli][files]") {
  TempDir dir;
  const std::string sample = std::string(COLIKV_SAMPLE_DIR) + "/glm_tiny_nodsa_51.coli_kv";
  const struct {
    std::string model, kind;
  } cases[] = {{dir.file("fifo"), "a FIFO"}, {dir.file("zero"), "a character device"}, {dir.file("dir"), "a directory"}};
  for (const auto& c : cases) ::mkdir(c.model.c_str(), 0755);
  REQUIRE(::mkfifo(dir.file("fifo/config.json").c_str(), 0644) == 0);
  REQUIRE(::symlink("/dev/zero", dir.file("zero/config.json").c_str()) == 0);
  REQUIRE(::mkdir(dir.file("dir/config.json").c_str(), 0755) == 0);
  for (const auto& c : cases) {
    // The old tool blocked opening the FIFO, read /dev/zero until memory ran
    // out, and said "basic_filebuf::underflow error reading the file" for the
    // directory. A hang is killed after 20 s.
    Run r = colikv_test::run_program("/usr/bin/timeout", {"-s", "KILL", "20", kTool, "import", dir.file("s.db"), sample,
                                                          "--id", "x", "--weights-id-from", c.model});
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(contains(r.err, c.model + "/config.json is " + c.kind + ", not a regular file"));
  }
  CHECK_FALSE(file_exists(dir.file("s.db")));
}

TEST_CASE("cli files: a store in a directory that cannot be written is refused naming the directory", "[cli][files][root]") {
  REQUIRE(::geteuid() == 0);  // mounts a tmpfs: ctest runs it as root:..., skipped by name when not root
  TempDir dir;
  SmallFilesystem fs(dir.file("mnt"), "8m");
  REQUIRE(fs.mounted());
  write_file(dir.file("a.coli_kv"), coli_bytes(colikv_test::wide_model(), 4, 5));
  const std::string store = dir.file("mnt/s.db");
  REQUIRE(tool({"import", store, dir.file("a.coli_kv"), "--id", "a"}).code == 0);
  const std::string before = read_file(store);  // the whole store: the import left no -wal
  // Root writes any directory it may enter, whatever its mode; a read-only
  // filesystem stops root as a directory without write permission stops
  // another user. SQLite must create the -shm file even to read.
  REQUIRE(fs.remount_read_only());
  for (const std::vector<std::string>& args : {std::vector<std::string>{"ls", store}, {"info", store, "a"}}) {
    Run r = tool(args);
    INFO(colikv_test::describe(args, r));
    CHECK(r.code == 1);
    require_error_line(r, args[0]);
    // The old message: "attempt to write a readonly database".
    CHECK(contains(r.err, "SQLite must create " + store + "-shm beside it, even to read it, and directory " +
                              dir.file("mnt") + " is not writable (Read-only file system)"));
  }
  Run r = tool({"import", store, dir.file("a.coli_kv"), "--id", "b"});
  INFO(r.err);
  CHECK(r.code == 1);
  require_error_line(r, "import");
  CHECK(contains(r.err, "Read-only file system"));
  CHECK(names_in(dir.file("mnt")) == std::vector<std::string>{"s.db"});
  CHECK(read_file(store) == before);
}

TEST_CASE("cli files: export - to a full standard output says so, not what to free beside the store", "[cli][files]") {
  TempDir dir;
  const std::string store = store_with_a(dir, 4);
  Run r = colikv_test::run_program("/bin/sh", {"-c", "exec \"$0\" export \"$1\" a - > /dev/full", kTool, store});
  INFO(r.err);
  CHECK(r.code == 1);
  require_error_line(r, "export");
  // The old tool: "the output: write: ...; the filesystem holding it [the
  // store] has ... free: free space there and retry".
  CHECK(r.err.rfind("colikv: export: standard output: write: No space left on device", 0) == 0);
  CHECK_FALSE(contains(r.err, "free space"));
}
