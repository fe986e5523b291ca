// The colikv tool beside a store under a byte budget (issue 25): copy carries
// evicted conversations and resumes, vacuum beside a reader lets a writer go
// on. The tool runs as a separate process; the reader and the writer are
// connections of this one.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "colikv/store.h"
#include "cli_run.h"
#include "test_support.h"

using colikv::Error;
using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv::Options;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::Run;
using colikv_test::TempDir;
using colikv_test::contains;
using colikv_test::describe;
using colikv_test::tool;

namespace {

Options small(const ModelSignature& m) { return colikv_test::chunked_options(m, 4); }

Run run(const std::vector<std::string>& args) {
  Run r = tool(args);
  UNSCOPED_INFO(describe(args, r));
  return r;
}

}  // namespace

TEST_CASE("cli copy carries evicted conversations as they are and resumes with --skip-existing",
          "[cli][eviction][copy]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string src = dir.file("src.colikv"), dst = dir.file("dst.colikv");
  const EngineBuffers a = colikv_test::counted_history(m, 10, 5, 100), b = colikv_test::counted_history(m, 7, 5, 300), c = colikv_test::counted_history(m, 9, 5, 500);
  {
    Store s(src, small(m));
    s.append("a", m, a.tokens.data(), 10, a.source());
    s.append("b", m, b.tokens.data(), 7, b.source());
    s.gc(0);
    s.append("c", m, c.tokens.data(), 9, c.source());  // after the gc: it keeps its values
  }
  // A copy that stopped after its first conversation ("c", the most recently used, is listed first):
  // run again it refuses that id at once, and with --skip-existing it goes on.
  Run r = run({"copy", src, dst, "c"});
  REQUIRE(r.code == 0);
  r = run({"copy", src, dst});
  CHECK(r.code == 1);
  CHECK(contains(r.err, "'c': exists already"));
  r = run({"copy", src, dst, "--skip-existing"});
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "skipped 'c'"));
  CHECK(contains(r.out, "copied 'b'"));
  CHECK(contains(r.out, "copied 'a'"));
  CHECK(contains(r.out, "evicted in the source"));
  CHECK(contains(r.out, "2 conversations copied, 1 skipped"));
  r = run({"copy", src, dst, "--skip-existing", "--json"});
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "\"copied\": 0"));
  CHECK(contains(r.out, "\"skipped\": 3"));
  CHECK(contains(r.out, "\"evicted_from\": 0"));

  Store s(src, small(m)), d(dst, small(m));
  for (const char* id : {"a", "b", "c"}) {
    INFO(id);
    CHECK(d.tokens(id) == s.tokens(id));
    CHECK(d.info(id).evicted == s.info(id).evicted);
    CHECK(d.info(id).tokens == s.info(id).tokens);
  }
  CHECK(d.info("a").evicted);
  EngineBuffers got(m, 16);
  got.poison();
  REQUIRE(d.load("c", m, got.tokens.data(), got.capacity, got.target()) == 9);
  CHECK(got.compare(c, 9).empty());
  CHECK(d.verify().ok());
  // The evicted copy is re-saved there by an append, as in the source.
  d.append("a", m, a.tokens.data(), 10, a.source());
  CHECK_FALSE(d.info("a").evicted);

  // Another conversation under a copied id is not skipped: the difference is named.
  d.remove("b");
  const EngineBuffers other = colikv_test::counted_history(m, 7, 5, 700);
  d.append("b", m, other.tokens.data(), 7, other.source());
  r = run({"copy", src, dst, "b", "--skip-existing"});
  CHECK(r.code == 1);
  CHECK(contains(r.err, "other token ids"));
  CHECK(d.tokens("b") == std::vector<int32_t>(other.tokens.begin(), other.tokens.begin() + 7));
}

TEST_CASE("cli vacuum beside a reader's open snapshot lets a writer go on and says what it held back",
          "[cli][eviction][vacuum]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string path = dir.file("s.colikv");
  const EngineBuffers b = colikv_test::counted_history(m, 400, 5, 10);
  Options o = small(m);
  o.busy_timeout_ms = 2000;
  {
    Store s(path, o);
    for (int i = 0; i < 20; ++i) s.append("c" + std::to_string(i), m, b.tokens.data(), 40 + i, b.source());
    s.gc(0);
  }
  // A reader holding a read transaction, as an open sqlite3 shell does.
  SQLite::Database reader(path, SQLite::OPEN_READONLY);
  reader.exec("BEGIN");
  CHECK(reader.execAndGet("SELECT count(*) FROM conversations").getInt64() == 20);

  std::atomic<bool> stop{false};
  std::vector<std::string> failures;
  std::atomic<int> appended{0};
  std::atomic<bool> gave_up{false};
  std::thread writer([&] {
    Store w(path, o);
    int64_t len = 0;
    while (!stop) {
      try {
        len = len >= 400 ? 1 : len + 1;
        if (len == 1) w.truncate("x", 0);
        w.append("x", m, b.tokens.data(), len, b.source());
        ++appended;
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kNotFound) continue;  // the first truncate
        failures.push_back(e.what());
        if (failures.size() > 3) return void(gave_up = true);
      }
    }
  });
  // The vacuum runs beside a writer that has committed past the reader's
  // snapshot (else there may be nothing to hold back yet).
  while (appended == 0 && !gave_up) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  Run r = run({"vacuum", path, "--busy-timeout", "5000"});
  const int held_code = r.code;
  const std::string held_out = r.out;
  r = run({"vacuum", path, "--busy-timeout", "5000", "--json"});
  stop = true;
  writer.join();
  std::string seen;
  for (const std::string& f : failures) seen += f + "\n";
  INFO("writer failures:\n" << seen);
  CHECK(failures.empty());
  CHECK(appended > 0);
  // The reader's snapshot keeps the WAL: said, with what was reclaimable, and exit 1.
  CHECK(held_code == 1);
  CHECK(contains(held_out, "of it was free inside the store"));
  CHECK(contains(held_out, "not shrunk to what it holds: another connection holds a read transaction"));
  CHECK(r.code == 1);
  CHECK(contains(r.out, "\"held_back\": \"another connection"));
  CHECK(contains(r.out, "\"reclaimable_bytes\": "));
  // Once the reader is gone the vacuum cuts the files.
  reader.exec("COMMIT");
  r = run({"vacuum", path, "--json"});
  CHECK(r.code == 0);
  CHECK(contains(r.out, "\"held_back\": null"));
  Store s(path, o);
  CHECK(s.verify().ok());
  CHECK(s.conversation_count() == 21);
}
