// Catalog conformance, a turn's edit (src/catalog/turn_edit.h, Catalog::apply): on
// every backend, apply returns the conversation the links went to and the
// new chunks' ids in order; it refuses an existing conversation at another
// generation, and a name to create that is taken, with kConflict; and an edit
// refused or failing at any step (here: the store's last step throws) leaves
// the catalog as it was: no conversation, link, count or chunk of it stays
// (a model row it stored may: models are never deleted).
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "catalog/catalog.h"
#include "colikv/error.h"
#include "core/chunk_codec.h"
#include "test_support.h"
#include "catalog/turn_edit.h"

using colikv::ErrorCode;
using colikv::detail::Catalog;
using colikv::detail::ChunkRecord;
using colikv::detail::TurnEdit;

namespace {

// Token-only chunks of `n` tokens each, at positions first, first + n, ...:
// stored as new rows through the writer, as the store's own chunks are.
class TokenChunks : public colikv::detail::TurnChunks {
 public:
  TokenChunks(int64_t first_seq, int64_t count, int64_t n, int salt) : seq_(first_seq), count_(count), n_(n), salt_(salt) {
    encoded_ = colikv::detail::values_missing_chunk(n, 1, colikv::detail::ChunkPrecision::kF32);
  }
  size_t size() const override { return static_cast<size_t>(count_); }
  int64_t raw_bytes() const override { return count_ * n_ * 4; }
  bool next(int64_t& raw) override {
    if (done_ == count_) return false;
    raw = n_ * 4;
    return true;
  }
  colikv::detail::NewChunkLink store(colikv::detail::ChunkWriter& writer, int64_t model_id,
                                     ChunkRecord* record) override {
    const int64_t seq = seq_ + done_;
    std::vector<int32_t> tokens(static_cast<size_t>(n_), salt_);
    ChunkRecord r;
    r.model_id = model_id;
    r.first_pos = seq * n_;
    r.precision = "f32";
    r.tokens_json = colikv::detail::tokens_to_json(tokens.data(), n_);
    r.prev = colikv::detail::ChunkHash{};
    r.prev[0] = static_cast<uint8_t>(salt_);
    r.prev[1] = static_cast<uint8_t>(seq);
    r.chain = colikv::detail::chain_next(r.prev, tokens.data(), n_);
    r.digest = colikv::detail::kNoValuesDigest;
    r.key = colikv::detail::chunk_key(r.chain, r.digest);
    r.n_tokens = n_;
    r.encoded = &encoded_;
    r.index_first = r.first_pos;
    r.index_prev = r.prev;
    r.index_tokens_json = r.tokens_json;
    r.defer_index = record != nullptr;
    if (record) {
      *record = r;
      record->encoded = nullptr;
    }
    const int64_t id = writer.insert_chunk(r);
    REQUIRE(id != 0);
    return {seq, id};
  }
  void stored() override { ++done_; }

 private:
  int64_t seq_, count_, n_;
  int salt_;
  int64_t done_ = 0;
  colikv::detail::EncodedChunk encoded_;
};

struct EditFixture {
  colikv_test::TempDir dir;
  std::unique_ptr<Catalog> catalog =
      colikv::detail::open_catalog(colikv_test::store_at(dir, "s.colikv"), colikv::Options{});
  colikv::ModelSignature model = colikv_test::tiny_model();

  TurnEdit create(const std::string& name, TokenChunks* chunks, int64_t count) const {
    TurnEdit e;
    e.name = name;
    e.create = colikv::detail::NewConversation{name, 0, "f32", "", "{}", 1};
    e.model = model;
    e.chunk_tokens = 4;
    e.chunks = chunks;
    e.count = count;
    e.now_ms = 1;
    return e;
  }
  TurnEdit change(const std::string& name) {
    const auto row = catalog->find_conversation(name);
    REQUIRE(row);
    TurnEdit e;
    e.name = name;
    e.conversation_id = row->id;
    e.generation = row->generation;
    e.model_id = row->model_id;
    e.now_ms = 2;
    return e;
  }
  std::vector<int64_t> list(const std::string& name) {
    std::vector<int64_t> ids;
    for (const auto& c : catalog->chunk_list(catalog->find_conversation(name)->id)) ids.push_back(c.chunk_id);
    return ids;
  }
};

// The chunks writers hold mid-turn; none where writers hold none.
int64_t held_chunks(Catalog& c) { return c.gauge_usage().held_chunks; }

ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const colikv::Error& e) {
    return e.code();
  }
  return ErrorCode::kOk;
}

}  // namespace

TEST_CASE("catalog apply: a new conversation's edit returns its id and its chunks' ids, linked in order",
          "[backends]") {
  EditFixture f;
  TokenChunks chunks(0, 3, 4, 7);
  const colikv::detail::TurnResult r = f.catalog->apply(f.create("a", &chunks, 12), "test");
  const auto row = f.catalog->find_conversation("a");
  REQUIRE(row);
  CHECK(r.conversation_id == row->id);
  CHECK(row->count == 12);
  REQUIRE(r.chunk_ids.size() == 3);
  CHECK(f.list("a") == r.chunk_ids);
  CHECK(f.catalog->strays().unused_chunks.empty());
  CHECK(held_chunks(*f.catalog) == 0);
}

TEST_CASE("catalog apply: an edit at another generation is kConflict and changes nothing", "[backends]") {
  EditFixture f;
  TokenChunks first(0, 2, 4, 7);
  f.catalog->apply(f.create("a", &first, 8), "test");
  const auto before = f.catalog->find_conversation("a");
  const std::vector<int64_t> list_before = f.list("a");

  TurnEdit e = f.change("a");
  e.generation += 1;  // another writer's change, as this one sees it
  TokenChunks more(2, 1, 4, 8);
  e.chunks = &more;
  e.unlink_from = 0;
  e.count = 12;
  e.free = list_before;
  CHECK(code_of([&] { f.catalog->apply(e, "test"); }) == ErrorCode::kConflict);
  const auto after = f.catalog->find_conversation("a");
  CHECK(after->generation == before->generation);
  CHECK(after->count == 8);
  CHECK(f.list("a") == list_before);
  CHECK(f.catalog->strays().unused_chunks.empty());

  // A conversation that is gone is the same refusal.
  e = f.change("a");
  e.name = "gone";
  CHECK(code_of([&] { f.catalog->apply(e, "test"); }) == ErrorCode::kConflict);
}

TEST_CASE("catalog apply: a name to create that is taken is kConflict and changes nothing", "[backends]") {
  EditFixture f;
  TokenChunks first(0, 1, 4, 7);
  f.catalog->apply(f.create("a", &first, 4), "test");
  TokenChunks again(0, 2, 4, 9);
  CHECK(code_of([&] { f.catalog->apply(f.create("a", &again, 8), "test"); }) == ErrorCode::kConflict);
  CHECK(f.catalog->find_conversation("a")->count == 4);
  CHECK(f.list("a").size() == 1);
  CHECK(f.catalog->strays().unused_chunks.empty());
}

TEST_CASE("catalog apply: an edit that fails at its last step leaves no conversation, link or chunk of it",
          "[backends]") {
  EditFixture f;
  // Large enough that a backend that stores a turn's chunks first (SQLite's
  // objects first) does so: what it committed before the failure goes too.
  const int64_t saved = colikv::detail::objects_first_min_bytes();
  colikv::detail::objects_first_min_bytes() = 0;
  TokenChunks chunks(0, 3, 4, 7);
  TurnEdit e = f.create("a", &chunks, 12);
  e.finish = [](int64_t) { throw colikv::Error(ErrorCode::kIO, "the store's last step failed"); };
  const ErrorCode code = code_of([&] { f.catalog->apply(e, "test"); });
  colikv::detail::objects_first_min_bytes() = saved;
  CHECK(code == ErrorCode::kIO);
  CHECK_FALSE(f.catalog->find_conversation("a"));
  CHECK(f.catalog->strays().unused_chunks.empty());
  CHECK(held_chunks(*f.catalog) == 0);
}

TEST_CASE("catalog apply: a cut drops entries, frees what no list names, and a fork links shared chunks",
          "[backends]") {
  EditFixture f;
  TokenChunks chunks(0, 3, 4, 7);
  const auto made = f.catalog->apply(f.create("a", &chunks, 12), "test");

  // A fork of the first two chunks: the parent keeps its own.
  TurnEdit fork = f.change("a");
  fork.fork = colikv::detail::NewFork{"b", fork.conversation_id, 8, 2};
  fork.links = {{0, made.chunk_ids[0]}, {1, made.chunk_ids[1]}};
  fork.touch_parent = true;
  const auto forked = f.catalog->apply(fork, "test");
  CHECK(forked.conversation_id == f.catalog->find_conversation("b")->id);
  CHECK(f.list("b") == std::vector<int64_t>{made.chunk_ids[0], made.chunk_ids[1]});
  CHECK(f.catalog->find_conversation("b")->count == 8);
  CHECK(f.list("a") == made.chunk_ids);

  // A truncate of the parent to one chunk: chunk 1 stays (the fork names
  // it), chunk 2 is freed; the count and generation move.
  const int64_t generation = f.catalog->find_conversation("a")->generation;
  TurnEdit cut = f.change("a");
  cut.unlink_from = 1;
  cut.count = 4;
  cut.used = false;
  cut.free = {made.chunk_ids[1], made.chunk_ids[2]};
  f.catalog->apply(cut, "test");
  CHECK(f.list("a") == std::vector<int64_t>{made.chunk_ids[0]});
  CHECK(f.catalog->find_conversation("a")->count == 4);
  CHECK(f.catalog->find_conversation("a")->generation > generation);
  CHECK(f.catalog->read_chunk(made.chunk_ids[1]).has_value());
  CHECK_FALSE(f.catalog->read_chunk(made.chunk_ids[2]).has_value());
  CHECK(f.catalog->strays().unused_chunks.empty());
}

TEST_CASE("catalog apply: a new chunk at a seq the list holds replaces that entry, and the replaced chunk is freed",
          "[backends]") {
  // An evicted chunk re-saved as other content: the edit stores a chunk at
  // seq 1 without unlinking, and names the entry's old chunk to free.
  EditFixture f;
  TokenChunks chunks(0, 3, 4, 7);
  const auto made = f.catalog->apply(f.create("a", &chunks, 12), "test");
  const int64_t generation = f.catalog->find_conversation("a")->generation;
  TurnEdit resave = f.change("a");
  TokenChunks other(1, 1, 4, 9);
  resave.chunks = &other;
  resave.count = 12;
  resave.free = {made.chunk_ids[1]};
  const auto r = f.catalog->apply(resave, "test");
  REQUIRE(r.chunk_ids.size() == 1);
  CHECK(r.chunk_ids[0] != made.chunk_ids[1]);
  CHECK(f.list("a") == std::vector<int64_t>{made.chunk_ids[0], r.chunk_ids[0], made.chunk_ids[2]});
  CHECK(f.catalog->find_conversation("a")->count == 12);
  CHECK(f.catalog->find_conversation("a")->generation > generation);
  CHECK_FALSE(f.catalog->read_chunk(made.chunk_ids[1]).has_value());
  CHECK(f.catalog->strays().unused_chunks.empty());
}
