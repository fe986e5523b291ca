// Catalog conformance: models and the store's own facts (catalog.h, "Models",
// "The store").
#include "catalog_conformance/conformance.h"

namespace conformance {

TEST_CASE_METHOD(Conformance, "catalog conformance: insert_model stores a signature that find_model_id and "
                              "read_model read back, and a rolled back one is absent", "[backends][catalog]") {
  Catalog& c = catalog();
  const colikv::ModelSignature m = colikv_test::tiny_indexed_model();
  CHECK_FALSE(c.find_model_id(m.to_string()));
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    c.insert_model(m, 16, 1);
    CHECK(c.find_model_id(m.to_string()));
  }  // rolled back
  CHECK_FALSE(c.find_model_id(m.to_string()));
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    c.insert_model(m, 16, 1);
    txn->commit();
  }
  const auto id = c.find_model_id(m.to_string());
  REQUIRE(id);
  const auto stored = c.read_model(*id);
  REQUIRE(stored);
  CHECK(stored->signature == m.to_string());
  CHECK(stored->chunk_tokens == 16);
  CHECK(stored->sig.n_layers == m.n_layers);
  CHECK(stored->sig.kv_lora == m.kv_lora);
  CHECK(stored->sig.qk_rope == m.qk_rope);
  CHECK(stored->sig.index_hd == m.index_hd);
  CHECK(stored->sig.n_indexed == m.n_indexed);
  CHECK(stored->sig.vocab == m.vocab);
  CHECK(stored->sig.weights_id == m.weights_id);
  CHECK(stored->sig.to_string() == m.to_string());

  // A second model gets its own id; an id no row has reads as none.
  const int64_t tiny = model_id();
  CHECK(tiny != *id);
  CHECK(c.read_model(tiny)->signature == model.to_string());
  CHECK_FALSE(c.read_model(tiny + *id + 1000));
  CHECK_FALSE(c.find_model_id(m.to_string() + " "));

  // The signature must be new: whatever a second insert does (refuse it, or
  // keep the first row), the stored row stays as it was.
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    refused(c, [&] { c.insert_model(m, 32, 2); });
    txn->commit();
  }
  CHECK(c.find_model_id(m.to_string()) == id);
  CHECK(c.read_model(*id)->chunk_tokens == 16);
}

TEST_CASE_METHOD(Conformance, "catalog conformance: schema_version is the library's for the backend",
                 "[backends][catalog]") {
  Catalog& c = catalog();
  CHECK(c.schema_version() == colikv::detail::latest_schema_version_for(path));
  CHECK(c.schema_version() > 0);
}

// Not a catalog's call: the one JSON check (catalog.h) every backend's
// metadata goes through, SQLite's json_valid.
TEST_CASE("catalog: is_json takes JSON text as SQLite's json_valid does", "[catalog]") {
  using colikv::detail::is_json;
  CHECK(is_json("{}"));
  CHECK(is_json("{\"a\":[1,2.5,null,true,\"x\"]}"));
  CHECK(is_json("[]"));
  CHECK(is_json("3"));
  CHECK_FALSE(is_json(""));
  CHECK_FALSE(is_json("{"));
  CHECK_FALSE(is_json("{'a':1}"));
  CHECK_FALSE(is_json("{\"a\":1,}"));
}

}  // namespace conformance
