// A use a caller saw succeed is never lost to retention (TenantLimits::
// max_idle_ms): a load whose last-used time could not be written at once,
// because another connection held the write lock, is written by its Store's
// next write transaction, before that Store's retention or expire() looks,
// or at its close.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>

#include <string>

#include "backend.h"
#include "colikv/store.h"
#include "core/wall_clock.h"
#include "test_support.h"

using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

const colikv::ModelSignature kModel = colikv_test::tiny_model();

void append(Store& s, const std::string& id, const EngineBuffers& b) {
  s.append(id, b.model, b.tokens.data(), b.capacity, b.source());
}

colikv::Options tenant(const std::string& name) {
  colikv::Options o;
  o.tenant = name;
  return o;
}

// Another connection holds the store's write lock while `f` runs.
template <typename F>
void while_write_locked(const std::string& path, F&& f) {
  SQLite::Database other(path, SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  f();
  other.exec("ROLLBACK");
}

}  // namespace

TEST_CASE("retention: a conversation loaded while another connection held the write lock is not expired after",
          "[tenants][retention]") {
  const std::string how = GENERATE(as<std::string>{}, "retention", "expire");
  INFO(how);
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers hot = colikv_test::history(kModel, 16, 1), other = colikv_test::history(kModel, 16, 2);
  Store s(path, tenant("acme"));
  colikv::TenantLimits limits;
  limits.max_idle_ms = 60000;
  s.set_tenant_limits(limits);
  append(s, "hot", hot);
  // Idle for longer than the retention: last used at the epoch.
  colikv_test::store_exec(path, "UPDATE conversations SET last_used_ms = 0");
  while_write_locked(path, [&] { CHECK(colikv_test::loads_as(s, "hot", hot, 16) == ""); });
  // The tenant's retention at the next append, or expire(), right after the load.
  if (how == "retention") {
    append(s, "other", other);
  } else {
    CHECK(s.expire(60000).conversations.empty());
  }
  CHECK(s.exists("hot"));
  CHECK(colikv_test::loads_as(s, "hot", hot, 16) == "");
}

TEST_CASE("retention: a load's use that waited for the write lock is written at its Store's close",
          "[tenants][retention]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  const EngineBuffers hot = colikv_test::history(kModel, 16, 1);
  {
    Store s(path);
    append(s, "hot", hot);
  }
  colikv_test::store_exec(path, "UPDATE conversations SET last_used_ms = 0");
  {
    Store s(path);
    while_write_locked(path, [&] { CHECK(colikv_test::loads_as(s, "hot", hot, 16) == ""); });
    CHECK(colikv_test::store_int(path, "SELECT last_used_ms FROM conversations") == 0);  // not yet written
  }
  CHECK(colikv_test::store_int(path, "SELECT last_used_ms FROM conversations") > 0);
  // Another process's retention sees it now.
  Store later(path);
  CHECK(later.expire(60000).conversations.empty());
  CHECK(later.exists("hot"));
}

namespace {

// This process as a host whose clock is off by `ms` for the guard's life.
class SkewedClock {
 public:
  explicit SkewedClock(int64_t ms) { colikv::detail::wall_clock_skew_ms() = ms; }
  ~SkewedClock() { colikv::detail::wall_clock_skew_ms() = 0; }
  SkewedClock(const SkewedClock&) = delete;
  SkewedClock& operator=(const SkewedClock&) = delete;
};

constexpr int64_t kHourMs = 3600 * 1000;

}  // namespace

// Several hosts share a PostgreSQL store, and their clocks may differ: the
// idle time is the server's, neither the using host's nor the deleting one's.
TEST_CASE("retention: on PostgreSQL, hosts whose clocks differ never expire a conversation used within the idle time",
          "[postgres][retention]") {
  const std::string loc = colikv_test::fresh_pg_store();
  const EngineBuffers hot = colikv_test::history(kModel, 16, 1), cold = colikv_test::history(kModel, 16, 2);
  {
    Store right(loc, tenant("acme"));
    append(right, "hot", hot);
  }
  {
    // Its clock two hours ahead: "hot", used just now, is not an hour idle.
    SkewedClock ahead(2 * kHourMs);
    Store host(loc, tenant("acme"));
    CHECK(host.expire(kHourMs).conversations.empty());
    CHECK(host.exists("hot"));
  }
  {
    // Its clock two hours behind: its append is a use now, not two hours ago.
    SkewedClock behind(-2 * kHourMs);
    Store host(loc, tenant("acme"));
    append(host, "cold", cold);
  }
  Store right(loc, tenant("acme"));
  CHECK(right.expire(kHourMs).conversations.empty());
  CHECK(colikv_test::loads_as(right, "hot", hot, 16) == "");
  CHECK(colikv_test::loads_as(right, "cold", cold, 16) == "");
  // Idle for longer by the server's clock: expired whatever the host's says.
  colikv_test::store_exec(loc, "UPDATE conversations SET last_used_ms = last_used_ms - 2 * 3600 * 1000");
  SkewedClock behind(-2 * kHourMs);
  Store host(loc, tenant("acme"));
  const colikv::ExpiryReport r = host.expire(kHourMs);
  CHECK(r.conversations.size() == 2);
}
