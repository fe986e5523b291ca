// Ids, titles and metadata with a NUL byte are refused alike on both backends
// (a PostgreSQL text value cannot hold one; SQLite's can), before anything is
// read or written.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <string>
#include <vector>

#include "backend.h"
#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "test_support.h"

using colikv::ErrorCode;

namespace {

template <class F>
ErrorCode code_of(F&& f) {
  try {
    f();
  } catch (const colikv::Error& e) {
    return e.code();
  }
  return ErrorCode::kOk;
}

}  // namespace

TEST_CASE("store: an id, title or metadata holding a NUL byte is refused and changes nothing", "[backends][store]") {
  colikv_test::TempDir dir;
  colikv::Store s(colikv_test::store_at(dir, "nul.db"));
  const colikv::ModelSignature m = colikv_test::tiny_model();
  colikv_test::EngineBuffers h(m, 10);
  h.fill(0, 10, 1);
  h.tokens = colikv_test::make_tokens(10, m.vocab, 1);
  const std::string alice("user\0alice", 10), bob("user\0bob", 8);
  s.append("plain", m, h.tokens.data(), 10, h.source());

  CHECK(code_of([&] { s.append(alice, m, h.tokens.data(), 10, h.source()); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.append_async(alice, m, h.tokens.data(), 10, h.source()); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.create(bob, m); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.create("t", m, std::string("ti\0tle", 6)); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.create("t", m, "", std::string("{}\0x", 4)); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.count(bob); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.exists(bob); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.info(bob); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.tokens(bob); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.remove(bob); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.truncate(bob, 0); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.fork("plain", alice); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.rename("plain", alice); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.set_title("plain", std::string("a\0b", 3)); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.set_metadata("plain", std::string("{}\0{}", 5)); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { s.verify(alice); }) == ErrorCode::kInvalidArgument);

  const std::vector<colikv::ConversationInfo> all = s.list();
  REQUIRE(all.size() == 1);
  CHECK(all[0].id == "plain");
  CHECK(all[0].title == "");
  CHECK(all[0].metadata == "{}");
  CHECK(s.count("plain") == 10);
  s.wait();
}

TEST_CASE("store: a store or file path holding a NUL byte is refused, not cut there", "[store]") {
  colikv_test::TempDir dir;
  const std::string store = dir.file("s.db");
  CHECK(code_of([&] { colikv::Store s(store + std::string("\0.x", 3)); }) == ErrorCode::kInvalidArgument);
  CHECK(access(store.c_str(), F_OK) != 0);  // the part before the NUL was not created
  colikv::Store s(store);
  const colikv::ModelSignature m = colikv_test::tiny_model();
  colikv_test::EngineBuffers h(m, 10);
  h.fill(0, 10, 1);
  h.tokens = colikv_test::make_tokens(10, m.vocab, 1);
  s.append("c", m, h.tokens.data(), 10, h.source());
  const std::string out = dir.file("c.coli_kv");
  CHECK(code_of([&] { colikv::export_coli_kv(s, "c", out + std::string("\0.x", 3)); }) == ErrorCode::kInvalidArgument);
  CHECK(access(out.c_str(), F_OK) != 0);
  colikv::export_coli_kv(s, "c", out);
  colikv::ImportOptions io;
  io.id = "d";
  CHECK(code_of([&] { colikv::import_coli_kv(s, out + std::string("\0.x", 3), io); }) == ErrorCode::kInvalidArgument);
  CHECK(!s.exists("d"));
}
