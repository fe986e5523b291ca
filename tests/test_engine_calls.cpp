// Store::write and Store::load_range across chunk boundaries, and the weights
// identity of a model folder (the C calls are checked in c_api_test.c).
#include <catch2/catch.hpp>

#include <filesystem>

#include "cli_run.h"
#include "colikv/store.h"
#include "backend.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::error_code_of;
using colikv_test::Run;
using colikv_test::tool;
using colikv_test::describe;
using colikv_test::TempDir;

namespace {

// A store of the tiny indexed model in 4-token chunks, on either backend.
struct IndexedStore : colikv_test::StoreFixture {
  IndexedStore() : StoreFixture(colikv_test::tiny_indexed_model(), 4, "s.colikv") {}
};

}  // namespace

TEST_CASE_METHOD(IndexedStore, "write: keeps the positions before from and replaces the rest across chunks, atomically",
                 "[backends][engine_calls]") {
  const ModelSignature& m = model;
  Store& s = store();
  EngineBuffers a = history(30, 1), b = history(30, 2);
  std::copy(a.tokens.begin(), a.tokens.begin() + 6, b.tokens.begin());  // b shares a's first 6 ids
  s.write("c", m, a.tokens.data(), 0, 23, a.source());
  s.write("c", m, a.tokens.data(), 23, 30, a.source());  // an append
  try {
    s.write("c", m, b.tokens.data(), 9, 12, b.source());
    FAIL("no divergence reported");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kDiverged);
    CHECK(e.position() == 6);
  }
  CHECK(s.tokens("c") == a.tokens);  // unchanged
  s.write("c", m, b.tokens.data(), 6, 13, b.source());  // mid-chunk, shorter than stored
  EngineBuffers out(m, 30);
  out.poison();
  REQUIRE(s.load("c", m, out.tokens.data(), 30, out.target()) == 13);
  // [0, from) stays exactly as stored, also the rows in from's chunk, though
  // the caller's buffers hold other values for them.
  CHECK(out.compare(a, 6) == "");
  for (int64_t p = 6; p < 13; ++p) CHECK(out.tokens[p] == b.tokens[p]);
  CHECK(out.lc[2][12 * m.kv_lora] == b.lc[2][12 * m.kv_lora]);
  CHECK(s.verify().ok());
  CHECK(error_code_of([&] { s.write("c", m, b.tokens.data(), 14, 20, b.source()); }) == ErrorCode::kInvalidArgument);
  CHECK(s.count("c") == 13);
}

TEST_CASE_METHOD(IndexedStore, "load_range: writes exactly the positions from..to, across chunks",
                 "[backends][engine_calls]") {
  const ModelSignature& m = model;
  Store& s = store();
  EngineBuffers a = history(30, 3);
  write("c", a, 30);
  for (auto range : {std::pair<int64_t, int64_t>{5, 19}, {8, 12}, {0, 30}, {29, 30}, {7, 7}}) {
    EngineBuffers out(m, 30);
    out.poison();
    EngineBuffers poisoned(m, 30);
    poisoned.poison();
    REQUIRE(s.load_range("c", m, range.first, range.second, out.tokens.data(), out.target()) ==
            range.second - range.first);
    for (int64_t p = 0; p < 30; ++p) {
      const bool inside = p >= range.first && p < range.second;
      const EngineBuffers& want = inside ? a : poisoned;
      INFO("position " << p);
      CHECK(out.tokens[p] == want.tokens[p]);
      CHECK(colikv_test::bits_of(out.lc[1][p * m.kv_lora + 3]) == colikv_test::bits_of(want.lc[1][p * m.kv_lora + 3]));
      CHECK(colikv_test::bits_of(out.ic[3][p * m.index_hd]) == colikv_test::bits_of(want.ic[3][p * m.index_hd]));
    }
  }
  EngineBuffers out(m, 30);
  CHECK(error_code_of([&] { s.load_range("c", m, 10, 31, out.tokens.data(), out.target()); }) == ErrorCode::kInvalidArgument);
  CHECK(error_code_of([&] { s.load_range("c", m, -1, 3, out.tokens.data(), out.target()); }) == ErrorCode::kInvalidArgument);
  CHECK(error_code_of([&] { s.load_range("x", m, 0, 1, out.tokens.data(), out.target()); }) == ErrorCode::kNotFound);
}

TEST_CASE("weights identity: config.json bytes and weights files' names and sizes", "[engine_calls]") {
  TempDir dir;
  const std::string model = dir.file("model");
  std::filesystem::create_directory(model);
  CHECK(error_code_of([&] { colikv::weights_id_from_dir(model); }) == ErrorCode::kNotFound);
  colikv_test::write_file(model + "/config.json", "{\"n\": 1}");
  colikv_test::write_file(model + "/a.safetensors", std::string(10, 'x'));
  colikv_test::write_file(model + "/tokenizer.json", "{}");
  const std::string id = colikv::weights_id_from_dir(model);
  CHECK(id.size() == 17);
  CHECK(id[0] == 'w');
  CHECK(colikv::weights_id_from_dir(model) == id);  // stable
  // A copy elsewhere has the same identity; other files do not count.
  const std::string copy = dir.file("copy");
  std::filesystem::copy(model, copy);
  colikv_test::write_file(copy + "/tokenizer.json", "{\"other\": 1}");
  CHECK(colikv::weights_id_from_dir(copy) == id);
  // Content of a weights file is not read; its size and name are.
  colikv_test::write_file(copy + "/a.safetensors", std::string(10, 'y'));
  CHECK(colikv::weights_id_from_dir(copy) == id);
  colikv_test::write_file(copy + "/a.safetensors", std::string(11, 'x'));
  CHECK(colikv::weights_id_from_dir(copy) != id);
  colikv_test::write_file(copy + "/a.safetensors", std::string(10, 'x'));
  std::filesystem::rename(copy + "/a.safetensors", copy + "/b.safetensors");
  CHECK(colikv::weights_id_from_dir(copy) != id);
  std::filesystem::rename(copy + "/b.safetensors", copy + "/a.safetensors");
  colikv_test::write_file(copy + "/config.json", "{\"n\": 2}");
  CHECK(colikv::weights_id_from_dir(copy) != id);
}

TEST_CASE("cli: import --weights-id-from records the model folder's identity", "[engine_calls][cli]") {
  TempDir dir;
  const std::string model = dir.file("model"), store = dir.file("s.colikv");
  const std::string sample = std::string(COLIKV_SAMPLE_DIR) + "/glm_tiny_nodsa_51.coli_kv";
  std::filesystem::create_directory(model);
  colikv_test::write_file(model + "/config.json", "{}");
  const std::string id = colikv::weights_id_from_dir(model);
  RUN_EXPECT(0, {"import", store, sample, "--id", id + "/slot0", "--weights-id-from", model});
  CHECK(Store(store).info(id + "/slot0").model.weights_id == id);
  // Without --id, a slot file gets the adapter's id for its slot.
  colikv_test::write_file(model + "/.coli_kv.3", colikv_test::read_file(sample));
  RUN_EXPECT(0, {"import", store, model + "/.coli_kv.3", "--weights-id-from", model});
  CHECK(Store(store).count(id + "/slot3") == 51);
  Run r = RUN_EXPECT(1, {"import", store, sample, "--id", "x", "--weights-id-from", dir.file("missing")});
  CHECK(r.err.find("config.json") != std::string::npos);
  RUN_EXPECT(2, {"import", store, sample, "--id", "y", "--weights-id", "w", "--weights-id-from", model});
  CHECK_FALSE(Store(store).exists("x"));
}
