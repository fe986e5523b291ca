// File modes: a new store and its -wal and -shm are 0600 unless
// Options::file_mode (colikv_options.file_mode, --file-mode) says otherwise,
// whoever creates it (the library, the C API, colikv import and copy); an
// export's file gets the mode the engine's own .coli_kv files get.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "cli_run.h"
#include "colikv/coli_kv.h"
#include "colikv/colikv.h"
#include "colikv/store.h"
#include "test_support.h"

using namespace colikv_test;

namespace {

// The process's umask for the scope of a test (children inherit it).
struct Umask {
  mode_t old;
  explicit Umask(mode_t m) : old(::umask(m)) {}
  ~Umask() { ::umask(old); }
};

// Permission bits of a file; -1 when it does not exist.
int mode_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

// The modes of a store and its companions while a Store holds it open after
// a write (SQLite creates -wal and -shm on the first open, removes them on
// the last close).
struct Modes {
  int db, wal, shm;
};
Modes modes_while_open(const std::string& path, const colikv::Options& o = {}) {
  colikv::Store s(path, o);
  EngineBuffers b(tiny_model(), 4);
  b.fill(0, 4, 1);
  b.tokens = token_run(1, 4);
  static int n = 0;
  s.append("c" + std::to_string(++n), tiny_model(), b.tokens.data(), 4, b.source());
  return {mode_of(path), mode_of(path + "-wal"), mode_of(path + "-shm")};
}

}  // namespace

TEST_CASE("permissions: a store the library creates is 0600, and so are its -wal and -shm", "[permissions]") {
  Umask u(022);
  TempDir dir;
  const Modes m = modes_while_open(dir.file("s.db"));
  CHECK(m.db == 0600);
  CHECK(m.wal == 0600);
  CHECK(m.shm == 0600);

  colikv::Options group;
  group.file_mode = 0640;
  const Modes g = modes_while_open(dir.file("g.db"), group);
  CHECK(g.db == 0640);
  CHECK(g.wal == 0640);
  CHECK(g.shm == 0640);

  // Masked by the umask, as open(2) does.
  group.file_mode = 0666;
  const Modes w = modes_while_open(dir.file("w.db"), group);
  CHECK(w.db == 0644);

  // An existing store keeps its mode (and its companions take it).
  REQUIRE(::chmod(dir.file("s.db").c_str(), 0644) == 0);
  const Modes again = modes_while_open(dir.file("s.db"));
  CHECK(again.db == 0644);
  CHECK(again.wal == 0644);

  // Bits outside 0777 are refused, naming the mode, and create nothing.
  colikv::Options bad;
  bad.file_mode = 01600;
  try {
    colikv::Store s(dir.file("bad.db"), bad);
    FAIL("a file mode with the sticky bit was accepted");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == colikv::ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("file mode 1600") != std::string::npos);
  }
  CHECK(mode_of(dir.file("bad.db")) == -1);
}

TEST_CASE("permissions: a store the C API creates is 0600 unless colikv_options.file_mode says otherwise",
          "[permissions]") {
  Umask u(022);
  TempDir dir;
  auto open_and_write = [&](const std::string& path, const colikv_options* o) {
    colikv_store* st = nullptr;
    const int rc = colikv_open_ex(path.c_str(), o, &st);
    Modes m{-1, -1, -1};
    if (rc == COLIKV_OK) {
      EngineBuffers b(tiny_model(), 4);
      b.fill(0, 4, 1);
      b.tokens = token_run(1, 4);
      const colikv::ModelSignature sig = tiny_model();
      colikv_model cm{sig.n_layers, sig.kv_lora, sig.qk_rope, sig.index_hd, sig.n_indexed, sig.vocab, nullptr};
      std::vector<const float*> lc, rc2;
      for (auto& v : b.lc) lc.push_back(v.data());
      for (auto& v : b.rc) rc2.push_back(v.data());
      REQUIRE(colikv_append(st, "c", &cm, b.tokens.data(), 4, lc.data(), rc2.data(), nullptr) == COLIKV_OK);
      m = {mode_of(path), mode_of(path + "-wal"), mode_of(path + "-shm")};
    }
    colikv_close(st);
    return std::make_pair(rc, m);
  };
  {
    colikv_store* st = nullptr;
    REQUIRE(colikv_open(dir.file("plain.db").c_str(), COLIKV_CREATE, &st) == COLIKV_OK);
    colikv_close(st);
    CHECK(mode_of(dir.file("plain.db")) == 0600);
  }
  // An old caller's struct: its three fields, no COLIKV_FILE_MODE; what
  // follows them is never read (here: a mode that would be refused).
  colikv_options old_caller;
  std::memset(&old_caller, 0xff, sizeof old_caller);
  old_caller.flags = COLIKV_CREATE;
  old_caller.busy_timeout_ms = 0;
  old_caller.max_store_bytes = 0;
  auto r = open_and_write(dir.file("old.db"), &old_caller);
  CHECK(r.first == COLIKV_OK);
  CHECK(r.second.db == 0600);
  CHECK(r.second.wal == 0600);
  CHECK(r.second.shm == 0600);

  colikv_options o{};
  o.flags = COLIKV_CREATE | COLIKV_FILE_MODE;
  o.file_mode = 0640;
  r = open_and_write(dir.file("group.db"), &o);
  CHECK(r.first == COLIKV_OK);
  CHECK(r.second.db == 0640);
  CHECK(r.second.wal == 0640);
  CHECK(r.second.shm == 0640);

  o.file_mode = 01000;
  r = open_and_write(dir.file("bad.db"), &o);
  CHECK(r.first == COLIKV_ERR_INVALID);
  CHECK(mode_of(dir.file("bad.db")) == -1);
}

TEST_CASE("permissions: stores colikv import and copy create are 0600, or --file-mode", "[permissions][cli]") {
  Umask u(022);
  TempDir dir;
  write_file(dir.file("a.coli_kv"), coli_bytes(tiny_model(), 8, 1));
  RUN_EXPECT(0, {"import", dir.file("i.db"), dir.file("a.coli_kv"), "--quiet"});
  CHECK(mode_of(dir.file("i.db")) == 0600);
  RUN_EXPECT(0, {"import", dir.file("g.db"), dir.file("a.coli_kv"), "--file-mode", "0640", "--quiet"});
  CHECK(mode_of(dir.file("g.db")) == 0640);
  RUN_EXPECT(0, {"copy", dir.file("i.db"), dir.file("c.db"), "--quiet"});
  CHECK(mode_of(dir.file("c.db")) == 0600);
  RUN_EXPECT(0, {"copy", dir.file("i.db"), dir.file("cg.db"), "--file-mode", "640", "--quiet"});
  CHECK(mode_of(dir.file("cg.db")) == 0640);
  // The -wal and -shm of a store the tool made take its mode.
  const Modes m = modes_while_open(dir.file("i.db"));
  CHECK(m.wal == 0600);
  CHECK(m.shm == 0600);

  for (const char* bad : {"8", "01000", "rw", ""}) {
    const Run r = tool({"import", dir.file("bad.db"), dir.file("a.coli_kv"), "--file-mode", bad});
    INFO(describe({"import", "--file-mode", bad}, r));
    CHECK(r.code == 2);
    CHECK(contains(r.err, "--file-mode"));
    CHECK(mode_of(dir.file("bad.db")) == -1);
  }
}

TEST_CASE("permissions: colikv export writes the .coli_kv file with the mode the engine's fopen gives",
          "[permissions][cli]") {
  TempDir dir;
  write_file(dir.file("a.coli_kv"), coli_bytes(tiny_model(), 8, 1));
  RUN_EXPECT(0, {"import", dir.file("s.db"), dir.file("a.coli_kv"), "--id", "a", "--quiet"});
  for (mode_t mask : {mode_t{022}, mode_t{077}, mode_t{027}}) {
    Umask u(mask);
    const std::string engine = dir.file("engine-" + std::to_string(mask));
    std::FILE* f = std::fopen(engine.c_str(), "wb");  // as the engine's kv_persist.h opens a slot file
    REQUIRE(f);
    std::fclose(f);
    const std::string out = dir.file("out-" + std::to_string(mask) + ".coli_kv");
    RUN_EXPECT(0, {"export", dir.file("s.db"), "a", out, "--quiet"});
    CHECK(mode_of(out) == mode_of(engine));
    CHECK(mode_of(out) == static_cast<int>(0666 & ~mask));
  }
}
