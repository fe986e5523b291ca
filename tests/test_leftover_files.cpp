// A new store never takes in what a deleted store left at its name: a
// NAME-wal, NAME-shm or NAME-journal without NAME is refused by every way a
// SQLite store is created (a plain open that creates, a staged creation and
// its publish, colikv import and copy to a new file), naming the file and
// what it is, and is left as it is: SQLite would replay a WAL or journal into
// the new store at its first open, bringing the deleted store back over it.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cli_run.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

const char kLeftover[] = "a deleted store's last transactions";

void append(colikv::Store& s, const std::string& id, const EngineBuffers& b) {
  s.append(id, b.model, b.tokens.data(), b.capacity, b.source());
}

// The refusal names the file and says what it is.
void check_refusal(const std::string& message, const std::string& leftover) {
  INFO(message);
  CHECK(message.find(leftover) != std::string::npos);
  CHECK(message.find("without its database") != std::string::npos);
  CHECK(message.find("deleted") != std::string::npos);
  CHECK(message.find("replay") != std::string::npos);
}

}  // namespace

TEST_CASE("a store is not created beside a leftover -wal, -shm or -journal (API)", "[staged][files]") {
  const std::string suffix = GENERATE(as<std::string>{}, "-wal", "-shm", "-journal");
  const bool staged = GENERATE(false, true);
  INFO(suffix << (staged ? ", staged creation" : ", plain open"));
  TempDir dir;
  const std::string path = dir.file("kv.db");
  colikv_test::write_file(path + suffix, kLeftover);
  colikv::Options o;
  o.create_staged = staged;
  try {
    colikv::Store s(path, o);
    FAIL("the store was created beside " << path << suffix);
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kConflict);
    check_refusal(e.what(), path + suffix);
  }
  CHECK_FALSE(colikv_test::file_exists(path));
  CHECK(colikv_test::read_file(path + suffix) == kLeftover);  // never deleted, never replayed
}

TEST_CASE("a staged store is not published beside a -wal that appeared while it was built", "[staged][files]") {
  TempDir dir;
  const std::string path = dir.file("kv.db");
  const EngineBuffers a = colikv_test::history(colikv_test::tiny_model(), 20, 1);
  colikv::Options o;
  o.create_staged = true;
  colikv::Store s(path, o);
  append(s, "a", a);
  colikv_test::write_file(path + "-wal", kLeftover);
  try {
    s.publish();
    FAIL("published beside a leftover WAL");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kConflict);
    check_refusal(e.what(), path + "-wal");
  }
  CHECK_FALSE(colikv_test::file_exists(path));
  CHECK(colikv_test::read_file(path + "-wal") == kLeftover);
}

TEST_CASE("colikv import and copy refuse a new store beside a deleted store's WAL", "[cli][staged][files]") {
  TempDir dir;
  const std::string path = dir.file("kv.db");
  // A real WAL of a store whose writer was killed, then the store deleted.
  const EngineBuffers old = colikv_test::history(colikv_test::tiny_model(), 32, 7);
  std::string wal;
  {
    colikv::Store s(path);
    append(s, "old-secret", old);
    wal = colikv_test::read_file(path + "-wal");
  }
  ::unlink(path.c_str());
  if (wal.empty()) wal = kLeftover;  // checkpointed already: what it holds does not matter here
  colikv_test::write_file(path + "-wal", wal);
  const std::string src = dir.file("src.db"), coli = dir.file("c.coli_kv");
  colikv_test::write_file(coli, colikv_test::coli_bytes(colikv_test::tiny_model(), 16, 3));
  {
    colikv::Store s(src);
    append(s, "fresh", colikv_test::history(colikv_test::tiny_model(), 16, 3));
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"import", path, coli, "--id", "fresh"}, std::vector<std::string>{"copy", src, path}}) {
    const colikv_test::Run r = colikv_test::tool(args);
    INFO(colikv_test::describe(args, r));
    CHECK(r.code != 0);
    check_refusal(r.err, path + "-wal");
    CHECK_FALSE(colikv_test::file_exists(path));
    CHECK(colikv_test::read_file(path + "-wal") == wal);
  }
}
