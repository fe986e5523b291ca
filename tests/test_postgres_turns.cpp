// A turn's round trips on a server store (issue 34): its link, the statement
// that writes the chunk list and the count, is one round trip however many
// entries it writes, and the rest of a turn costs a fixed few plus those of
// storing each new chunk. Counted on the store's own connection
// (PgConnection::round_trips, PgCatalog::link_round_trips). Run only as
// postgres:... tests (tag [postgres]).
#include <catch2/catch.hpp>

#include <string>

#include "colikv/store.h"
#include "postgres/pg_catalog.h"
#include "store/store_impl.h"
#include "test_support.h"

using colikv::Store;
using colikv_test::EngineBuffers;

namespace {

colikv::detail::PgCatalog& catalog_of(Store& s) {
  return static_cast<colikv::detail::PgCatalog&>(colikv::detail::StoreAccess::impl(s).catalog());
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
