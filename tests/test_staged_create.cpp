// Options::create_staged and Store::publish: a new store that appears whole
// or not at all, never in place of another file.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "fault_vfs.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;
using colikv_test::error_code_of;

namespace {

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

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

int mode_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

colikv::Options staged(colikv::Options o = {}) {
  o.create_staged = true;
  return o;
}

// The test support's deterministic history of the tiny model.
EngineBuffers history(int64_t n, uint32_t seed) { return colikv_test::history(colikv_test::tiny_model(), n, seed); }

void append(colikv::Store& s, const std::string& id, const EngineBuffers& b) {
  s.append(id, b.model, b.tokens.data(), b.capacity, b.source());
}

// The process's umask for a scope.
struct Umask {
  mode_t old;
  explicit Umask(mode_t m) : old(::umask(m)) {}
  ~Umask() { ::umask(old); }
};

}  // namespace

TEST_CASE("staged create: the store appears whole, at publish, and nothing else is left", "[staged]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers a = history(100, 1), b = history(37, 2);
  {
    colikv::Store s(path, staged());
    append(s, "a", a);
    s.append_async("b", b.model, b.tokens.data(), b.capacity, b.source());
    // Being built: nothing under the store's name, one temporary store beside it.
    CHECK_FALSE(exists(path));
    const std::vector<std::string> building = names_in(dir.path());
    REQUIRE_FALSE(building.empty());
    CHECK(building[0].rfind(".colikv-import-", 0) == 0);
    s.publish();  // commits the queued turn of b first
    CHECK(names_in(dir.path()) == std::vector<std::string>{"s.db"});  // no WAL, no temporary files
    // Closed for good: every call is refused, naming why.
    try {
      s.count("a");
      FAIL("a call after publish succeeded");
    } catch (const colikv::Error& e) {
      CHECK(e.code() == ErrorCode::kInvalidArgument);
      CHECK(std::string(e.what()).find("publish") != std::string::npos);
    }
    CHECK(error_code_of([&] { s.schema_version(); }) == ErrorCode::kInvalidArgument);
    CHECK(error_code_of([&] { s.publish(); }) == ErrorCode::kInvalidArgument);
    CHECK(s.path() == path);
  }
  colikv::Store s(path);
  CHECK(colikv_test::loads_as(s, "a", a, 100) == "");
  CHECK(colikv_test::loads_as(s, "b", b, 37) == "");
  CHECK(s.verify().ok());
}

TEST_CASE("staged create: a failure midway leaves no store and no temporary files", "[staged]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers a = history(64, 3);

  SECTION("destroyed without publish, as an exception unwinds") {
    try {
      colikv::Store s(path, staged());
      append(s, "a", a);
      throw std::runtime_error("the caller gives up");
    } catch (const std::runtime_error&) {
    }
  }
  SECTION("an invalid source: an import of a file that is not .coli_kv") {
    colikv_test::write_file(dir.file("bad.coli_kv"), "not a coli_kv file at all, wrong magic");
    {
      colikv::Store s(path, staged());
      CHECK(error_code_of([&] { colikv::import_coli_kv(s, dir.file("bad.coli_kv")); }) ==
            ErrorCode::kInvalidArgument);
    }
    ::unlink(dir.file("bad.coli_kv").c_str());
  }
  SECTION("a full disk (the fault VFS's size cap)") {
    colikv_test::FaultVfs& vfs = colikv_test::FaultVfs::get();
    vfs.reset();
    colikv::Options o = staged();
    o.vfs_name = colikv_test::FaultVfs::kName;
    {
      colikv::Store s(path, o);
      vfs.set_size_cap(64 << 10);
      const EngineBuffers big = history(4000, 4);
      CHECK(error_code_of([&] { append(s, "big", big); }) == ErrorCode::kDiskFull);
    }
    vfs.reset();
  }
  SECTION("a queued turn that fails: publish throws its error and discards the store") {
    colikv_test::FaultVfs& vfs = colikv_test::FaultVfs::get();
    vfs.reset();
    colikv::Options o = staged();
    o.vfs_name = colikv_test::FaultVfs::kName;
    {
      colikv::Store s(path, o);
      append(s, "a", a);
      vfs.set_size_cap(64 << 10);
      const EngineBuffers big = history(4000, 4);
      s.append_async("big", big.model, big.tokens.data(), big.capacity, big.source());
      CHECK(error_code_of([&] { s.publish(); }) == ErrorCode::kDiskFull);
      CHECK_FALSE(exists(path));
    }
    vfs.reset();
  }
  const std::vector<std::string> left = names_in(dir.path());
  for (const std::string& n : left) {
    CHECK(n.rfind(".colikv-import-", 0) != 0);
    CHECK(n.rfind("s.db", 0) != 0);
  }
}

TEST_CASE("staged create: an existing store is refused and left unchanged", "[staged]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  {
    colikv::Store s(path);
    append(s, "old", history(20, 6));
  }
  const std::string before = colikv_test::read_file(path);
  try {
    colikv::Store s(path, staged());
    FAIL("a staged open of an existing store succeeded");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kConflict);
    CHECK(std::string(e.what()).find(path) != std::string::npos);
  }
  CHECK(colikv_test::read_file(path) == before);
  CHECK(names_in(dir.path()) == std::vector<std::string>{"s.db"});

  // One that appears while the new store is built is left as it is, and the
  // new store is discarded.
  const std::string late = dir.file("late.db");
  {
    colikv::Store s(late, staged());
    append(s, "mine", history(30, 7));
    colikv_test::write_file(late, "someone else's file");
    try {
      s.publish();
      FAIL("publish replaced a file that appeared meanwhile");
    } catch (const colikv::Error& e) {
      CHECK(e.code() == ErrorCode::kConflict);
    }
  }
  CHECK(colikv_test::read_file(late) == "someone else's file");
  CHECK(names_in(dir.path()) == (std::vector<std::string>{"late.db", "s.db"}));
}

TEST_CASE("staged create: the store gets Options::file_mode, less the umask", "[staged]") {
  Umask u(022);
  TempDir dir;
  colikv::Options o = staged();
  o.file_mode = 0640;
  {
    colikv::Store s(dir.file("g.db"), o);
    append(s, "a", history(8, 8));
    const std::vector<std::string> building = names_in(dir.path());
    REQUIRE(!building.empty());
    CHECK(mode_of(dir.file(building[0])) == 0640);
    s.publish();
  }
  CHECK(mode_of(dir.file("g.db")) == 0640);
  o.file_mode = 0666;
  {
    colikv::Store s(dir.file("w.db"), o);
    s.publish();
  }
  CHECK(mode_of(dir.file("w.db")) == 0644);
  {
    colikv::Store s(dir.file("d.db"), staged());
    s.publish();
  }
  CHECK(mode_of(dir.file("d.db")) == 0600);
  // Bits outside 0777 are refused before any file is made.
  o.file_mode = 01600;
  CHECK(error_code_of([&] { colikv::Store s(dir.file("bad.db"), o); }) == ErrorCode::kInvalidArgument);
  CHECK(names_in(dir.path()) == (std::vector<std::string>{"d.db", "g.db", "w.db"}));
}

TEST_CASE("staged create: a file: URI and a dangling symbolic link name the file created", "[staged]") {
  TempDir dir;
  const EngineBuffers a = history(12, 9);
  {
    colikv::Store s("file://localhost" + dir.file("u%2edb") + "?mode=rwc", staged());
    append(s, "a", a);
    s.publish();
  }
  {
    colikv::Store s("file:" + dir.file("v.db"), staged());
    s.publish();
  }
  REQUIRE(::symlink("target.db", dir.file("link.db").c_str()) == 0);
  {
    colikv::Store s(dir.file("link.db"), staged());
    append(s, "a", a);
    s.publish();
  }
  struct stat st;
  REQUIRE(::lstat(dir.file("link.db").c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));  // the link is kept, its target created
  CHECK(names_in(dir.path()) == (std::vector<std::string>{"link.db", "target.db", "u.db", "v.db"}));
  colikv::Store u(dir.file("u.db"));
  CHECK(colikv_test::loads_as(u, "a", a, 12) == "");
  colikv::Store t(dir.file("link.db"));
  CHECK(colikv_test::loads_as(t, "a", a, 12) == "");
  CHECK(colikv::store_file_of("file:" + dir.file("x%20y.db") + "#frag") == dir.file("x y.db"));
  CHECK(colikv::store_file_of(dir.file("link.db")) == dir.file("target.db"));
  CHECK(colikv::store_file_of("postgresql://u@h/db").empty());
  CHECK(error_code_of([&] { colikv::Store s("file://elsewhere" + dir.file("r.db"), staged()); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(error_code_of([&] { colikv::Store s("file:", staged()); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("staged create: refused where it cannot apply, changing nothing", "[staged]") {
  TempDir dir;
  colikv::Options ro = staged();
  ro.read_only = true;
  CHECK(error_code_of([&] { colikv::Store s(dir.file("r.db"), ro); }) == ErrorCode::kInvalidArgument);
  // A store on a server is created by its first transaction: refused before
  // any connection is made.
  try {
    colikv::Store s("postgresql://nobody@127.0.0.1:1/none", staged());
    FAIL("a staged open of a postgresql:// location succeeded");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("create_staged") != std::string::npos);
  }
  CHECK(error_code_of([&] { colikv::Store s(dir.file("no/such/dir.db"), staged()); }) == ErrorCode::kNotFound);
  // publish on a Store opened without the option changes nothing.
  colikv::Store s(dir.file("plain.db"));
  append(s, "a", history(5, 10));
  CHECK(error_code_of([&] { s.publish(); }) == ErrorCode::kInvalidArgument);
  CHECK(s.count("a") == 5);
  CHECK(names_in(dir.path()) == std::vector<std::string>{"plain.db", "plain.db-shm", "plain.db-wal"});
}

TEST_CASE("staged create: temporary stores of a killed process are removed, live ones kept", "[staged]") {
  TempDir dir;
  // Left by a killed process: nobody holds its flock.
  colikv_test::write_file(dir.file(".colikv-import-dead00"), "half a store");
  colikv_test::write_file(dir.file(".colikv-import-dead00-wal"), "its WAL");
  // Being built by a live process: held under an flock.
  colikv_test::write_file(dir.file(".colikv-import-live00"), "");
  const int held = ::open(dir.file(".colikv-import-live00").c_str(), O_RDONLY);
  REQUIRE(held >= 0);
  REQUIRE(::flock(held, LOCK_EX) == 0);
  {
    colikv::Store s(dir.file("s.db"), staged());
    s.publish();
  }
  ::close(held);
  CHECK(names_in(dir.path()) == (std::vector<std::string>{".colikv-import-live00", "s.db"}));
}

TEST_CASE("staged create: two threads publishing at once: one publishes, the other is refused", "[staged]") {
  TempDir dir;
  const EngineBuffers a = history(50, 11);
  for (int round = 0; round < 20; ++round) {
    const std::string path = dir.file("s" + std::to_string(round) + ".db");
    colikv::Store s(path, staged());
    s.append_async("a", a.model, a.tokens.data(), a.capacity, a.source());
    std::atomic<int> ok{0}, refused{0};
    auto publish = [&] {
      const ErrorCode c = error_code_of([&] { s.publish(); });
      (c == ErrorCode::kOk ? ok : refused) += c == ErrorCode::kOk || c == ErrorCode::kInvalidArgument ? 1 : 0;
    };
    std::thread t1(publish), t2(publish);
    t1.join();
    t2.join();
    CHECK(ok == 1);
    CHECK(refused == 1);
    colikv::Store again(path);
    CHECK(colikv_test::loads_as(again, "a", a, 50) == "");
  }
  for (const std::string& n : names_in(dir.path())) CHECK(n.rfind(".colikv-import-", 0) != 0);
}
