// The backend boundary (src/catalog/catalog.h): a database's own error crosses the
// Catalog interface as colikv::Error with the code its backend maps it to,
// never as the backend's exception type (SQLiteCpp's, the PostgreSQL
// backend's), named once by what the store was doing: the outermost open
// transaction's `what`, else the store.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "backend.h"
#include "catalog/backend_error.h"
#include "catalog/catalog.h"
#include "catalog_conformance/conformance.h"
#include "colikv/error.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::detail::Catalog;
using conformance::refused;

TEST_CASE("catalog: a database's constraint error crosses catalog.h as colikv::Error, named by its transaction",
          "[backends]") {
  colikv_test::TempDir dir;
  const std::unique_ptr<Catalog> catalog =
      colikv::detail::open_catalog(colikv_test::store_at(dir, "s.colikv"), colikv::Options{});
  const auto txn = catalog->begin(Catalog::Access::kWrite, "test");
  const colikv::ModelSignature model = colikv_test::tiny_model();
  catalog->insert_model(model, 64, 1);
  const auto model_id = catalog->find_model_id(model.to_string());
  REQUIRE(model_id);
  // A conversation is created by a turn's edit (create_in, conformance.h).
  const auto create = [&](const std::string& name) {
    conformance::create_in(*catalog, colikv::detail::NewConversation{name, *model_id, "f32", "", "{}", 1});
  };
  create("a");
  create("b");

  // The name is taken: refused by the edit, then by the backend's unique
  // constraint, each in a savepoint of its own (refused, conformance.h).
  CHECK(refused(*catalog, [&] { create("a"); }) == ErrorCode::kConflict);
  CHECK(refused(*catalog, [&] { catalog->set_text("b", colikv::detail::ConversationText::kName, "a", 2); }) ==
        ErrorCode::kConflict);

  // Named once, by the outermost transaction's `what` (errors(), backend_error.h).
  const auto savepoint = catalog->begin(Catalog::Access::kWrite, "test");
  try {
    catalog->set_text("b", colikv::detail::ConversationText::kName, "a", 2);
    FAIL("a taken name was inserted");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kConflict);
    const std::string what = e.what();
    INFO(what);
    CHECK(what.rfind("test: ", 0) == 0);
    CHECK(what.find("test: ", 1) == std::string::npos);
    CHECK(what.size() > std::string("test: ").size());  // the database's own words follow
  }
}

namespace {

// How many times `part` occurs in `text`.
size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("catalog: an error raised in a transaction names the store and the operation once", "[backends]") {
  colikv_test::TempDir dir;
  const std::unique_ptr<Catalog> catalog =
      colikv::detail::open_catalog(colikv_test::store_at(dir, "once.colikv"), colikv::Options{});
  catalog->errors().set_store("store S");
  const colikv::ModelSignature model = colikv_test::tiny_model();
  {
    const auto txn = catalog->begin(Catalog::Access::kWrite, "store S: setup");
    catalog->insert_model(model, 64, 1);
    txn->commit();
  }
  const auto model_id = catalog->find_model_id(model.to_string());
  REQUIRE(model_id);
  for (const std::string name : {"a", "b"})
    conformance::create_in(*catalog, colikv::detail::NewConversation{name, *model_id, "f32", "", "{}", 1});
  // Renaming b to a: the database's unique constraint refuses it (kConflict).
  const auto rename_b = [&] { catalog->set_text("b", colikv::detail::ConversationText::kName, "a", 2); };
  const auto message = [&](auto f) -> std::string {
    try {
      f();
    } catch (const colikv::Error& e) {
      CHECK(e.code() == ErrorCode::kConflict);
      return e.what();
    }
    FAIL("a taken name was given");
    return "";
  };
  const std::string op = "store S: conversation 'b': rename";
  SECTION("in a write transaction: by its what, once") {
    const auto txn = catalog->begin(Catalog::Access::kWrite, op);
    const std::string what = message(rename_b);
    INFO(what);
    CHECK(what.rfind(op + ": ", 0) == 0);
    CHECK(occurrences(what, "store S") == 1);
    CHECK(occurrences(what, "rename") == 1);
  }
  SECTION("in a savepoint of it: by the outermost transaction's what, once") {
    const auto txn = catalog->begin(Catalog::Access::kWrite, op);
    std::string what;
    {
      const auto savepoint = catalog->begin(Catalog::Access::kWrite, "store S: an inner step");
      what = message(rename_b);
    }
    INFO(what);
    CHECK(what.rfind(op + ": ", 0) == 0);
    CHECK(occurrences(what, "store S") == 1);
    CHECK(what.find("inner step") == std::string::npos);
    // The transaction goes on after its savepoint is undone, and is named as before.
    CHECK(occurrences(message(rename_b), "store S") == 1);
  }
  SECTION("after the transaction ends: by the store alone, once") {
    { const auto txn = catalog->begin(Catalog::Access::kWrite, op); }
    const std::string what = message(rename_b);
    INFO(what);
    CHECK(what.rfind("store S: ", 0) == 0);
    CHECK(occurrences(what, "store S") == 1);
    CHECK(what.find("rename") == std::string::npos);
  }
}
