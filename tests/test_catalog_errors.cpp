// The backend boundary (src/catalog/catalog.h): a database's own error crosses the
// Catalog interface as colikv::Error with the code its backend maps it to,
// never as the backend's exception type (SQLiteCpp's, the PostgreSQL
// backend's), and with_context puts what the store was doing before it.
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

TEST_CASE("catalog: a database's constraint error crosses catalog.h as colikv::Error and with_context names it",
          "[backends]") {
  colikv_test::TempDir dir;
  const std::unique_ptr<Catalog> catalog =
      colikv::detail::open_catalog(colikv_test::store_at(dir, "s.colikv"), colikv::Options{});
  const auto txn = catalog->begin(Catalog::Access::kWrite, "test");
  const colikv::ModelSignature model = colikv_test::tiny_model();
  catalog->insert_model(model, 64, 1);
  const auto model_id = catalog->find_model_id(model.to_string());
  REQUIRE(model_id);
  // A conversation is created by a turn's edit (turn_edit.h).
  const auto create = [&](const std::string& name) {
    colikv::detail::TurnEdit e;
    e.name = name;
    e.create = colikv::detail::NewConversation{name, 0, "f32", "", "{}", 1};
    e.model_id = *model_id;
    e.count = 0;
    e.now_ms = 1;
    catalog->apply(e, "test");
  };
  create("a");
  create("b");

  // The name is taken: refused by the edit, then by the backend's unique
  // constraint, each in a savepoint of its own (refused, conformance.h).
  CHECK(refused(*catalog, [&] { create("a"); }) == ErrorCode::kConflict);
  CHECK(refused(*catalog, [&] { catalog->set_text("b", colikv::detail::ConversationText::kName, "a", 2); }) ==
        ErrorCode::kConflict);

  const auto savepoint = catalog->begin(Catalog::Access::kWrite, "test");
  try {
    colikv::detail::with_context("store s: conversation 'a'", [&] {
      catalog->set_text("b", colikv::detail::ConversationText::kName, "a", 2);
    });
    FAIL("a taken name was inserted");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kConflict);
    const std::string what = e.what();
    INFO(what);
    CHECK(what.rfind("store s: conversation 'a': ", 0) == 0);
    CHECK(what.size() > std::string("store s: conversation 'a': ").size());  // the database's own words follow
  }
}
