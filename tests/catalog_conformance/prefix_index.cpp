// Catalog conformance: the prefix index (src/catalog/prefix_index.h), the questions
// Store::match asks: the model and its precisions, each precision's walk (the
// whole chunks stored, the longest follower after them) and the holders of a
// step, most recently used first, each with the rows match checks it
// against. Tagged [backends]: run on SQLite and on the test server.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "catalog/catalog.h"
#include "core/chunk_codec.h"
#include "test_support.h"

namespace {

using colikv::detail::ChunkHash;
using colikv::detail::PrefixIndex;

// A store of tiny_model in chunks of 4 positions; conversations written
// through a Store, then read through a catalog opened on the same store.
struct PrefixIndexCase : colikv_test::StoreFixture {
  PrefixIndexCase() : StoreFixture(colikv_test::tiny_model(), 4, "prefix.db") {}

  colikv::detail::Catalog& catalog() {
    if (!catalog_) {
      close();
      catalog_ = colikv::detail::open_catalog(path, options);
    }
    return *catalog_;
  }
  void put(const std::string& id, const colikv_test::EngineBuffers& h, int64_t n) {
    catalog_.reset();
    write(id, h, n);
    close();
  }
  void used_at(const std::string& id, int64_t ms) {
    catalog_.reset();
    close();
    colikv_test::store_exec(path, "UPDATE conversations SET last_used_ms = " + std::to_string(ms) + " WHERE name = ?",
                            {id});
  }
  std::unique_ptr<PrefixIndex::Lookup> lookup() {
    return catalog().prefix_index().lookup(model.to_string(), "conformance");
  }
  // The one precision's walk over tokens[0, len).
  PrefixIndex::Walk walk(PrefixIndex::Lookup& l, const std::vector<int32_t>& tokens, int64_t len, int64_t limit) {
    REQUIRE(l.precisions().size() == 1);
    std::vector<PrefixIndex::Precision> p{{l.precisions()[0], chains(l.precisions()[0], tokens, len)}};
    std::vector<PrefixIndex::Walk> w = l.walks(4, p, tokens.data(), len, limit);
    REQUIRE(w.size() == 1);
    return std::move(w[0]);
  }
  // The chain hashes of tokens' whole chunks, from the precision's seed.
  std::vector<ChunkHash> chains(const std::string& precision, const std::vector<int32_t>& tokens, int64_t len) const {
    std::vector<ChunkHash> out;
    ChunkHash h = colikv::detail::chain_seed(model.to_string(), precision, options.tenant);
    for (int64_t i = 0; (i + 1) * 4 <= len; ++i) out.push_back(h = colikv::detail::chain_next(h, &tokens[i * 4], 4));
    return out;
  }
  static std::vector<std::string> names(const PrefixIndex::Holders& h) {
    std::vector<std::string> out;
    for (const PrefixIndex::Holder& x : h.holders) out.push_back(x.name);
    return out;
  }

  std::unique_ptr<colikv::detail::Catalog> catalog_;
};

}  // namespace

TEST_CASE_METHOD(PrefixIndexCase, "catalog conformance: a prefix lookup of a model the store does not have finds "
                                  "no model, no precision, and walks nothing", "[backends][catalog]") {
  const colikv_test::EngineBuffers h = history(10, 1);
  put("a", h, 10);
  const auto l = catalog().prefix_index().lookup(colikv_test::tiny_indexed_model().to_string(), "conformance");
  CHECK_FALSE(l->model_id());
  CHECK(l->precisions().empty());
  std::vector<PrefixIndex::Precision> p{{"f32", chains("f32", h.tokens, 10)}};
  const std::vector<PrefixIndex::Walk> w = l->walks(4, p, h.tokens.data(), 10, 4);
  REQUIRE(w.size() == 1);
  CHECK(w[0].full == 0);
  CHECK(w[0].k == 0);
  CHECK(w[0].first.holders.empty());
}

TEST_CASE_METHOD(PrefixIndexCase, "catalog conformance: a walk counts the whole chunks stored, then the longest "
                                  "follower, and reads the step's holders with their rows", "[backends][catalog]") {
  const colikv_test::EngineBuffers h = history(10, 1);
  put("a", h, 10);  // 2 whole chunks and a tail of 2
  const auto l = lookup();
  REQUIRE(l->model_id());
  REQUIRE(l->precisions() == std::vector<std::string>{"f32"});
  std::vector<int32_t> prompt(h.tokens.begin(), h.tokens.begin() + 10);
  prompt.push_back(999);  // no chunk continues with it

  SECTION("the tail's tokens are the follower") {
    const PrefixIndex::Walk w = walk(*l, prompt, 11, 4);
    CHECK(w.full == 2);
    CHECK(w.k == 2);
    REQUIRE(names(w.first) == std::vector<std::string>{"a"});
    CHECK_FALSE(w.first.more);
    const PrefixIndex::Holder& a = w.first.holders[0];
    // Its entry before the step ends the prompt's chain, as its key confirms.
    REQUIRE(a.chain);
    const ChunkHash end = chains("f32", prompt, 11)[1];
    CHECK(a.chain->chain == end);
    CHECK(colikv::detail::key_matches(a.chain->key, a.chain->digest, end));
    // Its token lists from the step on hold the region, each with the index's.
    REQUIRE(a.lists.size() == 1);
    CHECK(a.lists[0].tokens_json == colikv::detail::tokens_to_json(&h.tokens[8], 2));
    CHECK(a.lists[0].indexed == a.lists[0].tokens_json);
    CHECK_FALSE(a.first_evicted);
  }
  SECTION("a prompt that diverges inside a whole chunk") {
    prompt[5] = 998;
    const PrefixIndex::Walk w = walk(*l, prompt, 11, 4);
    CHECK(w.full == 1);
    CHECK(w.k == 1);
    CHECK(names(w.first) == std::vector<std::string>{"a"});
  }
  SECTION("a prompt of whole chunks: a step with none of its tokens, whose holders end the chain") {
    const PrefixIndex::Walk w = walk(*l, prompt, 8, 4);
    CHECK(w.full == 2);
    CHECK(w.k == 0);
    REQUIRE(names(w.first) == std::vector<std::string>{"a"});
    CHECK(w.first.holders[0].lists.empty());
    REQUIRE(w.first.holders[0].chain);
  }
  SECTION("a prompt no chunk starts with") {
    prompt[0] = 997;
    const PrefixIndex::Walk w = walk(*l, prompt, 11, 4);
    CHECK(w.full == 0);
    CHECK(w.k == 0);
    CHECK(w.first.holders.empty());
  }
}

TEST_CASE_METHOD(PrefixIndexCase, "catalog conformance: a step's holders come most recently used first, each once, "
                                  "a page at a time", "[backends][catalog]") {
  const colikv_test::EngineBuffers h = history(10, 1);
  const std::vector<std::string> ids{"a", "b", "c", "d", "e"};
  for (const std::string& id : ids) put(id, h, 10);
  const int64_t used[] = {5000, 9000, 7000, 3000, 7000};
  for (size_t i = 0; i < ids.size(); ++i) used_at(ids[i], used[i]);
  // By last use, then by id (e was written after c): b, e, c, a, d.
  const std::vector<std::string> order{"b", "e", "c", "a", "d"};
  const auto l = lookup();
  const PrefixIndex::Walk w = walk(*l, h.tokens, 10, 2);
  CHECK(w.full == 2);
  CHECK(w.k == 2);
  CHECK(names(w.first) == std::vector<std::string>{"b", "e"});
  CHECK(w.first.more);
  CHECK(w.first.holders[0].last_used_ms == 9000);

  const std::vector<ChunkHash> c = chains("f32", h.tokens, 10);
  PrefixIndex::Step step;
  step.depth = 2;
  step.prev = &c[1];
  step.region.set(&h.tokens[8], 2);
  step.end = 10;
  std::vector<std::string> all;
  for (int64_t skip = 0;; skip += 2) {
    const PrefixIndex::Holders page = l->holders("f32", step, skip, 2);
    for (const std::string& n : names(page)) all.push_back(n);
    CHECK(page.holders.size() <= 2);
    if (!page.more) break;
  }
  CHECK(all == order);
  CHECK(l->holders("f32", step, 5, 2).holders.empty());
  // The users of the step before it: their entry 0 at the first chain hash.
  PrefixIndex::Step chain_step;
  chain_step.depth = 1;
  chain_step.prev = &c[0];
  chain_step.region.set(h.tokens.data(), 0);
  chain_step.end = 4;
  const PrefixIndex::Holders users = l->holders("f32", chain_step, 0, 10);
  CHECK(names(users) == order);
  CHECK_FALSE(users.more);
  for (const PrefixIndex::Holder& x : users.holders) {
    REQUIRE(x.chain);
    CHECK(x.chain->chain == c[0]);
  }
}

TEST_CASE_METHOD(PrefixIndexCase, "catalog conformance: a holder's lists stop at the one that brings the region's "
                                  "tokens, and its first evicted position is the one before the step's end",
                 "[backends][catalog]") {
  const colikv_test::EngineBuffers h = history(11, 1);
  put("a", h, 9);
  put("a", h, 10);
  put("a", h, 11);  // a tail in three pieces, of 1, 1 and 1 tokens
  auto l = lookup();
  std::vector<int32_t> prompt(h.tokens.begin(), h.tokens.begin() + 11);
  const PrefixIndex::Walk w = walk(*l, prompt, 11, 4);
  CHECK(w.full == 2);
  CHECK(w.k == 3);
  REQUIRE(names(w.first) == std::vector<std::string>{"a"});
  const std::vector<ChunkHash> c = chains("f32", prompt, 11);
  PrefixIndex::Step step;
  step.depth = 2;
  step.prev = &c[1];
  for (int64_t k = 1; k <= 3; ++k) {
    step.region.set(&prompt[8], k);
    step.end = 8 + k;
    const PrefixIndex::Holders hs = l->holders("f32", step, 0, 4);
    REQUIRE(names(hs) == std::vector<std::string>{"a"});
    INFO("k = " << k);
    const auto& lists = hs.holders[0].lists;
    REQUIRE(static_cast<int64_t>(lists.size()) == k);  // a piece a token
    CHECK(lists.back().tokens_json == colikv::detail::tokens_to_json(&prompt[8 + k - 1], 1));
    // A piece is indexed by the tail up to its end.
    CHECK(lists.back().indexed == colikv::detail::tokens_to_json(&prompt[8], k));
    CHECK_FALSE(hs.holders[0].first_evicted);
  }
  // Its first chunk's KV data evicted: seen before an end after it, not before one at it.
  l.reset();
  catalog_.reset();
  colikv_test::store_exec(path, "UPDATE chunks SET payload = NULL WHERE first_pos = 4");
  const auto evicted = lookup();
  step.region.set(&prompt[8], 3);
  step.end = 11;
  const PrefixIndex::Holders hs = evicted->holders("f32", step, 0, 4);
  REQUIRE(hs.holders.size() == 1);
  CHECK(hs.holders[0].first_evicted == 4);
  PrefixIndex::Step early;
  early.depth = 1;
  early.prev = &c[0];
  early.region.set(&prompt[4], 0);
  early.end = 4;
  const PrefixIndex::Holders before = evicted->holders("f32", early, 0, 4);
  REQUIRE(before.holders.size() == 1);
  CHECK_FALSE(before.holders[0].first_evicted);
}
