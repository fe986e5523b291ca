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
