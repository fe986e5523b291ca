// A turn's round trips on a server store (issue 34): its link, the statement
// that writes the chunk list and the count, is one round trip however many
// entries it writes, and the rest of a turn costs a fixed few plus those of
// storing each new chunk. Counted on the store's own connection
// (PgConnection::round_trips, PgCatalog::link_round_trips). An expiry's
// and an eviction's round trips per conversation they delete or evict too.
// Run only as postgres:... tests (tag [postgres]).
#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "backend.h"
#include "colikv/store.h"
#include "postgres/pg_catalog.h"
#include "store/store_impl.h"
#include "test_support.h"

using colikv::Store;
using colikv_test::EngineBuffers;

namespace {

colikv::detail::PgCatalog& catalog_of(Store& s) {
  return static_cast<colikv::detail::PgCatalog&>(colikv::detail::StoreAccess::catalog(s));
}

struct Trips {
  int64_t turn = 0, link = 0;
};

// The round trips of appending positions [0, len) of h to `id`, and of its link.
Trips append_trips(colikv_test::StoreFixture& f, const std::string& id, const EngineBuffers& h, int64_t len) {
  colikv::detail::PgCatalog& c = catalog_of(f.store());
  const int64_t turn0 = c.connection().round_trips(), link0 = c.link_round_trips();
  f.write(id, h, len);
  return Trips{c.connection().round_trips() - turn0, c.link_round_trips() - link0};
}

}  // namespace

TEST_CASE_METHOD(colikv_test::StoreFixture, "postgres: a turn's link is one round trip however many chunks it adds",
                 "[postgres]") {
  // 4-token chunks: whole chunks only, so that no tail piece is re-packed.
  const EngineBuffers h = history(4 * 24, 5);
  write("c", h, 4 * 2);
  append_trips(*this, "c", h, 4 * 4);  // every statement of a turn prepared
  const Trips two = append_trips(*this, "c", h, 4 * 6);
  const Trips sixteen = append_trips(*this, "c", h, 4 * 22);
  INFO("a turn of 2 new chunks: " << two.turn << " round trips, its link " << two.link << "; of 16: " << sixteen.turn
                                  << ", its link " << sixteen.link);
  CHECK(read("c", h, 4 * 22) == "");
  CHECK(two.link == 1);
  CHECK(sixteen.link == 1);
  // A new chunk costs a fixed few round trips (its stored digests looked
  // up, the chunk looked up, stored and indexed); the link adds none however
  // many entries it writes (written entry by entry, it would add 14 here).
  CHECK(sixteen.turn - two.turn <= 4 * (16 - 2));
  // The rest is fixed: the read snapshot (begin, the conversation, its chunk
  // list, its end) and the write transaction (begin with the store's lock, the
  // conversation's row lock, the link, the tenant's limits, commit).
  CHECK(two.turn - 4 * 2 <= 9);
}

TEST_CASE_METHOD(colikv_test::StoreFixture, "postgres: an expiry costs a few round trips per conversation it deletes",
                 "[postgres]") {
  const int first = 1, small = 4, large = 12;
  for (int i = 0; i < first + small + large + 1; ++i) write("c" + std::to_string(i), history(4, 100 + i), 4);  // a chunk each
  const int64_t day = 86400 * 1000;
  // The first `n` conversations look idle for two days; returns how many
  // the expiry deleted and its round trips.
  const auto expire_first = [&](int n) {
    for (int i = 0; i < n; ++i)
      colikv_test::store_exec(path,
                              "UPDATE conversations SET last_used_ms = 0 WHERE name = ?", {"c" + std::to_string(i)});
    colikv::detail::PgCatalog& c = catalog_of(store());
    const int64_t before = c.connection().round_trips();
    const colikv::ExpiryReport r = store().expire(day);
    CHECK(r.chunks == static_cast<int64_t>(r.conversations.size()));
    return std::make_pair(static_cast<int64_t>(r.conversations.size()), c.connection().round_trips() - before);
  };
  CHECK(expire_first(first).first == first);  // its statements prepared
  const auto few = expire_first(first + small);
  const auto many = expire_first(first + small + large);
  CHECK(few.first == small);
  REQUIRE(many.first == large);
  CHECK(store().exists("c" + std::to_string(first + small + large)));
  CHECK_FALSE(store().exists("c0"));
  // Each conversation deleted, of one chunk: its chunks listed with their
  // claim, their users counted, its generation checked (its row locked),
  // its chunk list and row deleted, its chunk locked, then freed (6). No
  // savepoint, no second read of its row or of its chunk list.
  const int64_t per_conversation = (many.second - few.second) / (large - small);
  INFO("expiring " << small << " conversations: " << few.second << " round trips; " << large << ": "
                   << many.second);
  CHECK(per_conversation >= 1);
  CHECK(per_conversation <= 6);
}

TEST_CASE_METHOD(colikv_test::StoreFixture, "postgres: an eviction costs a few round trips per conversation it evicts",
                 "[postgres]") {
  const int first = 1, small = 4, large = 12;
  const int all = first + small + large + 1;
  for (int i = 0; i < all; ++i) write("c" + std::to_string(i), history(4, 200 + i), 4);  // a chunk each, in LRU order
  // gc evicts conversations [from, to): the budget is what the others hold.
  // The evicted ones are then removed, so that the next gc does not visit
  // them again. Returns how many it evicted and its round trips.
  const auto evict = [&](int from, int to) {
    int64_t gone = 0;
    for (int i = from; i < to; ++i) gone += store().info("c" + std::to_string(i)).stored_bytes;
    const int64_t budget = store().stats().total.stored_bytes - gone;
    colikv::detail::PgCatalog& c = catalog_of(store());
    const int64_t before = c.connection().round_trips();
    const colikv::EvictionReport r = store().gc(budget);
    const int64_t trips = c.connection().round_trips() - before;
    for (const std::string& name : r.conversations) store().remove(name);
    return std::make_pair(static_cast<int64_t>(r.conversations.size()), trips);
  };
  CHECK(evict(0, first).first == first);  // its statements prepared
  const auto few = evict(first, first + small);
  const auto many = evict(first + small, first + small + large);
  CHECK(few.first == small);
  REQUIRE(many.first == large);
  CHECK(read("c" + std::to_string(all - 1), history(4, 200 + all - 1), 4) == "");
  // Each conversation evicted, of one chunk: its chunks listed with their
  // claim, their users counted, the chunk's payload and its chunk_meta size
  // dropped (4).
  const int64_t per_conversation = (many.second - few.second) / (large - small);
  INFO("evicting " << small << " conversations: " << few.second << " round trips; " << large << ": "
                   << many.second);
  CHECK(per_conversation >= 1);
  CHECK(per_conversation <= 4);
}
