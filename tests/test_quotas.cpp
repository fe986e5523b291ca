// Tenant limits (TenantLimits, docs/design.md "Tenants"): each tenant's byte
// quota, with LRU eviction inside it after its appends, and its retention,
// deleting idle conversations whole. One tenant's appends never evict or
// delete another tenant's data. Idle times are set by SQL in the store, never
// waited for.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "colikv/colikv.h"
#include "colikv/error.h"
#include "colikv/model.h"
#include "colikv/options.h"
#include "colikv/store.h"
#include "backend.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv::Options;
using colikv::Store;
using colikv::TenantLimits;
using colikv_test::EngineBuffers;
using colikv_test::error_code_of;
using colikv_test::history;
using colikv_test::loads_as;
using colikv_test::TempDir;
using colikv_test::append;
using colikv_test::tenant_options;

namespace {

constexpr int64_t kDayMs = 86400 * 1000;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Makes a conversation of a tenant look last used `age_ms` ago.
void make_idle(const std::string& loc, const std::string& tenant, const std::string& id, int64_t age_ms) {
  colikv_test::store_exec(loc,
                          "UPDATE conversations SET last_used_ms = " + std::to_string(now_ms() - age_ms) +
                              " WHERE name = ? AND tenant_id = (SELECT tenant_id FROM tenants WHERE name = ?)",
                          {id, tenant});
}

int64_t tenant_bytes(Store& s) { return s.stats().total.stored_bytes; }

int64_t sql_int(const std::string& loc, const std::string& sql) { return colikv_test::store_int(loc, sql); }

}  // namespace

TEST_CASE("quotas: with t1 at its quota, filling t2 past t2's quota leaves t1's conversations loadable bit-exact",
          "[backends][quotas]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const std::string loc = colikv_test::store_at(dir, "q.db");
  Store t1(loc, tenant_options(m, "t1"));
  Store t2(loc, tenant_options(m, "t2"));
  std::vector<EngineBuffers> h;
  for (uint32_t i = 0; i < 8; ++i) h.push_back(history(m, 12, 10 + i));  // 3 full chunks each, nothing shared

  append(t1, "a", h[0], 12);
  append(t1, "b", h[1], 12);
  const int64_t quota = tenant_bytes(t1);  // two conversations' payload bytes (each a few bytes apart)
  REQUIRE(quota > 0);
  t1.set_tenant_limits({quota, std::nullopt});  // t1 at its quota
  t2.set_tenant_limits({quota, std::nullopt});

  // t2 writes five conversations of that size: each append past its quota
  // evicts t2's own least recently used, never t1's.
  for (int i = 0; i < 5; ++i) append(t2, "c" + std::to_string(i), h[static_cast<size_t>(2 + i)], 12);
  CHECK(tenant_bytes(t2) <= quota);
  CHECK_FALSE(t2.info("c4").evicted);  // the one written is never evicted
  for (int i = 0; i < 3; ++i) CHECK(t2.info("c" + std::to_string(i)).evicted);
  CHECK(t2.stats().evicted_conversations >= 3);

  // t1 is exactly as it was.
  CHECK(tenant_bytes(t1) == quota);
  CHECK(t1.stats().evicted_chunks == 0);
  CHECK_FALSE(t1.info("a").evicted);
  CHECK(loads_as(t1, "a", h[0], 12) == "");
  CHECK(loads_as(t1, "b", h[1], 12) == "");

  // t1's own next append past its quota evicts t1's least recently used first.
  append(t1, "c", h[7], 12);
  CHECK(t1.info("a").evicted);
  CHECK(loads_as(t1, "c", h[7], 12) == "");
  CHECK(tenant_bytes(t1) <= quota);
  CHECK(t1.verify().ok());
  CHECK(t2.verify().ok());
}

TEST_CASE("quotas: the store-wide budget still evicts across tenants beside the tenants' quotas",
          "[backends][quotas]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const std::string loc = colikv_test::store_at(dir, "q.db");
  const EngineBuffers a = history(m, 12, 1), b = history(m, 12, 2);
  Store t1(loc, tenant_options(m, "t1"));
  append(t1, "a", a, 12);
  const int64_t one = tenant_bytes(t1);
  Options o = tenant_options(m, "t2");
  o.max_store_bytes = one + one / 2;  // room for one conversation in the whole store
  Store t2(loc, o);
  t2.set_tenant_limits({10 * one, std::nullopt});  // t2's own quota is not what binds
  append(t2, "b", b, 12);
  CHECK(t1.info("a").evicted);  // the store-wide budget evicted t1's, as before tenants
  CHECK(loads_as(t2, "b", b, 12) == "");
}

TEST_CASE("quotas: limits persist per tenant, and a negative one is refused changing nothing", "[backends][quotas]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string loc = colikv_test::store_at(dir, "q.db");
  {
    Store t1(loc, tenant_options(m, "t1"));
    CHECK(t1.tenant_limits() == TenantLimits{});  // none by default
    t1.set_tenant_limits({5000, 30 * kDayMs});
    CHECK(error_code_of([&] { t1.set_tenant_limits({-1, std::nullopt}); }) == ErrorCode::kInvalidArgument);
    CHECK(error_code_of([&] { t1.set_tenant_limits({std::nullopt, -1}); }) == ErrorCode::kInvalidArgument);
    CHECK(t1.tenant_limits() == TenantLimits{5000, 30 * kDayMs});
    Store t2(loc, tenant_options(m, "t2"));
    CHECK(t2.tenant_limits() == TenantLimits{});
  }
  Options ro = tenant_options(m, "t1");
  ro.read_only = true;
  Store reopened(loc, ro);  // another handle, read-only: the limits are the store's
  CHECK(reopened.tenant_limits() == TenantLimits{5000, 30 * kDayMs});
  CHECK(error_code_of([&] { reopened.set_tenant_limits({}); }) == ErrorCode::kReadOnly);
  for (const colikv::TenantInfo& t : reopened.tenants()) {
    INFO(t.name);
    CHECK(t.limits == (t.name == "t1" ? TenantLimits{5000, 30 * kDayMs} : TenantLimits{}));
  }
  Store t1(loc, tenant_options(m, "t1"));
  t1.set_tenant_limits({});  // none again
  CHECK(t1.tenant_limits() == TenantLimits{});
}

TEST_CASE("quotas: two hosts setting different limits of one tenant both keep theirs", "[backends][quotas]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string loc = colikv_test::store_at(dir, "q.db");
  Store a(loc, tenant_options(m, "t"));
  Store b(loc, tenant_options(m, "t"));
  // Host a read the limits (none) before host b set the quota; a sets the
  // retention only. A read-then-replace of both (the CLI's old way) put the
  // quota a had read, none, back over b's.
  CHECK(a.tenant_limits() == TenantLimits{});
  b.set_tenant_limits({5000, std::nullopt}, colikv::kTenantMaxBytes);
  a.set_tenant_limits({std::nullopt, kDayMs}, colikv::kTenantMaxIdle);
  CHECK(b.tenant_limits() == TenantLimits{5000, kDayMs});
  // A field left out is kept even when the call's value for it differs.
  b.set_tenant_limits({123, 7}, colikv::kTenantMaxBytes);
  CHECK(a.tenant_limits() == TenantLimits{123, kDayMs});
  // A negative value is refused only in a field the call replaces.
  b.set_tenant_limits({-1, 2 * kDayMs}, colikv::kTenantMaxIdle);
  CHECK(a.tenant_limits() == TenantLimits{123, 2 * kDayMs});
  CHECK(error_code_of([&] { b.set_tenant_limits({-1, 2}, colikv::kTenantMaxBytes); }) == ErrorCode::kInvalidArgument);
  CHECK(error_code_of([&] { b.set_tenant_limits({1, 2}, 0); }) == ErrorCode::kInvalidArgument);
  CHECK(error_code_of([&] { b.set_tenant_limits({1, 2}, 4); }) == ErrorCode::kInvalidArgument);
  CHECK(a.tenant_limits() == TenantLimits{123, 2 * kDayMs});
}

TEST_CASE("retention: an append deletes the tenant's idle conversations whole, never another tenant's nor the one written",
          "[backends][quotas]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const std::string loc = colikv_test::store_at(dir, "r.db");
  Store t1(loc, tenant_options(m, "t1"));
  Store t2(loc, tenant_options(m, "t2"));
  const EngineBuffers a = history(m, 10, 1), c = history(m, 8, 3), other = history(m, 10, 1);
  append(t1, "a", a, 10);  // chunks [0,4) [4,8) and the tail [8,10)
  t1.fork("a", "f", 8);    // shares a's two full chunks
  append(t2, "a", other, 10);
  const int64_t chunks_before = sql_int(loc, "SELECT count(*) FROM chunks");
  REQUIRE(chunks_before == 6);  // 3 of t1, 3 of t2

  make_idle(loc, "t1", "a", 2 * kDayMs);
  make_idle(loc, "t2", "a", 2 * kDayMs);  // as idle, in a tenant without retention
  t1.set_tenant_limits({std::nullopt, kDayMs});
  CHECK(t1.exists("a"));  // setting the limit deletes nothing by itself

  append(t1, "c", c, 6);
  CHECK_FALSE(t1.exists("a"));
  // Whole: its row, its chunk list, and the chunk only it used (the tail);
  // the fork keeps the two it shares.
  CHECK(sql_int(loc, "SELECT count(*) FROM conversations WHERE name = 'a'") == 1);  // t2's
  CHECK(sql_int(loc, "SELECT count(*) FROM conversation_chunks WHERE conversation_id NOT IN "
                     "(SELECT conversation_id FROM conversations)") == 0);
  CHECK(sql_int(loc, "SELECT count(*) FROM chunks") == chunks_before - 1 + 2);  // c: [0,4) and a tail
  CHECK(loads_as(t1, "f", a, 8) == "");
  CHECK(loads_as(t1, "c", c, 6) == "");
  CHECK(loads_as(t2, "a", other, 10) == "");
  CHECK(t1.verify().ok());

  // The conversation written is never expired by its own append, however old.
  make_idle(loc, "t1", "c", 2 * kDayMs);
  append(t1, "c", c, 8);
  CHECK(loads_as(t1, "c", c, 8) == "");
}

TEST_CASE("retention: expire deletes what was idle longer, at once, in the Store's tenant only", "[backends][quotas]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string loc = colikv_test::store_at(dir, "r.db");
  Store t1(loc, tenant_options(m, "t1"));
  Store t2(loc, tenant_options(m, "t2"));
  const EngineBuffers a = history(m, 9, 1), b = history(m, 9, 2);
  append(t1, "old", a, 9);
  append(t1, "new", b, 9);
  append(t2, "old", a, 9);
  make_idle(loc, "t1", "old", 3 * kDayMs);
  make_idle(loc, "t2", "old", 3 * kDayMs);
  CHECK(error_code_of([&] { t1.expire(-1); }) == ErrorCode::kInvalidArgument);
  CHECK(t1.exists("old"));

  const colikv::ExpiryReport r = t1.expire(kDayMs);
  CHECK(r.conversations == std::vector<std::string>{"old"});
  CHECK(r.chunks == 3);  // [0,4) [4,8) [8,9)
  CHECK(r.freed_bytes > 0);
  CHECK_FALSE(t1.exists("old"));
  CHECK(loads_as(t1, "new", b, 9) == "");
  CHECK(loads_as(t2, "old", a, 9) == "");
  CHECK(t1.expire(kDayMs).conversations.empty());
}

TEST_CASE("retention: a conversation whose chunks lack their chunk_meta rows is expired whole, leaving no stray "
          "chunk and its fork's shared chunks", "[backends][quotas][hostile]") {
  const std::string how = GENERATE(as<std::string>{}, "retention", "expire");
  INFO(how);
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const std::string loc = colikv_test::store_at(dir, "r.db");
  Store t1(loc, tenant_options(m, "t1"));
  const EngineBuffers a = history(m, 10, 1), b = history(m, 9, 2), c = history(m, 6, 3);
  append(t1, "a", a, 10);  // chunks [0,4) [4,8) and the tail [8,10)
  t1.fork("a", "f", 8);    // shares a's two full chunks
  append(t1, "b", b, 9);
  const colikv_test::SqlRows list = colikv_test::store_query(
      loc, "SELECT cc.chunk_id FROM conversation_chunks cc JOIN conversations c "
           "ON c.conversation_id = cc.conversation_id WHERE c.name = 'a' ORDER BY cc.seq");
  REQUIRE(list.size() == 3);
  const std::string shared = list[0][0], tail = list[2][0];
  // A hand edit (the sqlite3 shell, psql) drops the index rows of a chunk
  // only a uses and of one it shares with f.
  colikv_test::store_exec(loc, "DELETE FROM chunk_meta WHERE chunk_id IN (" + shared + ", " + tail + ")");
  REQUIRE(sql_int(loc, "SELECT count(*) FROM chunk_meta WHERE chunk_id IN (" + shared + ", " + tail + ")") == 0);
  const int64_t chunks_before = sql_int(loc, "SELECT count(*) FROM chunks");
  const std::string f_list_sql =
      "SELECT cc.seq, cc.chunk_id, length(ch.payload) FROM conversation_chunks cc JOIN conversations c "
      "ON c.conversation_id = cc.conversation_id JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
      "WHERE c.name = 'f' ORDER BY cc.seq";
  const colikv_test::SqlRows f_before = colikv_test::store_query(loc, f_list_sql);
  REQUIRE(f_before.size() == 2);
  make_idle(loc, "t1", "a", 2 * kDayMs);

  if (how == "retention") {
    t1.set_tenant_limits({std::nullopt, kDayMs});
    append(t1, "c", c, 6);  // c: [0,4) and a tail
    CHECK(sql_int(loc, "SELECT count(*) FROM chunks") == chunks_before - 1 + 2);
  } else {
    const colikv::ExpiryReport r = t1.expire(kDayMs);
    CHECK(r.conversations == std::vector<std::string>{"a"});
    CHECK(r.chunks == 1);  // the tail, counted though no chunk_meta row weighs its bytes
    CHECK(sql_int(loc, "SELECT count(*) FROM chunks") == chunks_before - 1);
  }
  CHECK_FALSE(t1.exists("a"));
  // No chunk is left that no chunk list names: the tail went with a.
  CHECK(colikv_test::orphan_chunks(loc, false) == 0);
  CHECK(sql_int(loc, "SELECT count(*) FROM chunks WHERE chunk_id = " + tail) == 0);
  const colikv::VerifyReport v = t1.verify();
  for (const auto& p : v.problems) CHECK(p.what.find("not used by any conversation") == std::string::npos);
  // The chunks f shares stay, with their values (the one without its
  // chunk_meta row no longer loads: its chain hash is gone), and b loads as
  // written.
  CHECK(colikv_test::store_query(loc, f_list_sql) == f_before);
  CHECK(loads_as(t1, "b", b, 9) == "");
}

TEST_CASE("quotas: the C API sets, reads and applies a tenant's limits, and a bad value changes nothing",
          "[backends][quotas]") {
  TempDir dir;
  const std::string loc = colikv_test::store_at(dir, "c.db");
  colikv_options o = {COLIKV_CREATE | COLIKV_TENANT, 0, 0, 0, "t1"};
  colikv_store* s = nullptr;
  REQUIRE(colikv_open_ex(loc.c_str(), &o, &s) == COLIKV_OK);
  int64_t bytes = 0, idle = 0;
  REQUIRE(colikv_tenant_limits(s, &bytes, &idle) == COLIKV_OK);
  CHECK(bytes == COLIKV_NO_LIMIT);
  CHECK(idle == COLIKV_NO_LIMIT);
  CHECK(colikv_set_tenant_limits(s, 4096, 90000) == COLIKV_OK);
  CHECK(colikv_set_tenant_limits(s, -2, 1) == COLIKV_ERR_INVALID);
  CHECK(std::string(colikv_errmsg(s)).find("max_bytes") != std::string::npos);
  CHECK(colikv_set_tenant_limits(s, 1, -7) == COLIKV_ERR_INVALID);
  REQUIRE(colikv_tenant_limits(s, &bytes, nullptr) == COLIKV_OK);
  REQUIRE(colikv_tenant_limits(s, nullptr, &idle) == COLIKV_OK);
  CHECK(bytes == 4096);
  CHECK(idle == 90000);

  const ModelSignature m = colikv_test::tiny_model();
  const EngineBuffers h = history(m, 9, 4);
  {
    Store t1(loc, tenant_options(m, "t1"));
    append(t1, "x", h, 9);
  }
  make_idle(loc, "t1", "x", 2 * kDayMs);
  CHECK(colikv_expire(s, -1) == COLIKV_ERR_INVALID);
  CHECK(colikv_expire(s, kDayMs) == 1);
  CHECK_FALSE(Store(loc, tenant_options(m, "t1")).exists("x"));
  CHECK(colikv_set_tenant_limits(s, COLIKV_NO_LIMIT, COLIKV_NO_LIMIT) == COLIKV_OK);
  REQUIRE(colikv_tenant_limits(s, &bytes, &idle) == COLIKV_OK);
  CHECK(bytes == COLIKV_NO_LIMIT);
  CHECK(idle == COLIKV_NO_LIMIT);
  colikv_close(s);
}

TEST_CASE("quotas: a stored limit that is not an integer is reported corrupt, not applied as 0", "[quotas][bad_stores]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string path = dir.file("h.db");
  const EngineBuffers h = history(m, 9, 1);
  {
    Store t1(path, tenant_options(m, "t1"));
    append(t1, "x", h, 9);
  }
  // The column's CHECK (max_bytes >= 0) lets text through: SQLite orders text above numbers.
  colikv_test::store_exec(path, "UPDATE tenants SET max_bytes = 'lots' WHERE name = 't1'");
  Store t1(path, tenant_options(m, "t1"));
  CHECK(error_code_of([&] { t1.tenant_limits(); }) == ErrorCode::kCorrupt);
  CHECK(error_code_of([&] { t1.tenants(); }) == ErrorCode::kCorrupt);
  CHECK(error_code_of([&] { append(t1, "y", h, 9); }) == ErrorCode::kCorrupt);
  CHECK_FALSE(t1.exists("y"));
  CHECK(loads_as(t1, "x", h, 9) == "");
}

TEST_CASE("quotas: a stored limit that is not an integer is reported naming the store, the tenant and the column",
          "[quotas][bad_stores]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string path = dir.file("named.db");
  {
    Store t1(path, tenant_options(m, "t1"));
    append(t1, "x", history(m, 9, 1), 9);
  }
  colikv_test::store_exec(path, "UPDATE tenants SET max_idle_ms = 'soon' WHERE name = 't1'");
  Store t1(path, tenant_options(m, "t1"));
  const auto message = [&](auto f) -> std::string {
    try {
      f();
    } catch (const colikv::Error& e) {
      CHECK(e.code() == ErrorCode::kCorrupt);
      return e.what();
    }
    FAIL("a text limit was read as a number");
    return "";
  };
  for (const std::string& what : {message([&] { t1.tenant_limits(); }), message([&] { t1.tenants(); })}) {
    INFO(what);
    CHECK(what.find(path) != std::string::npos);
    CHECK(what.find("tenant 't1'") != std::string::npos);
    CHECK(what.find("max_idle_ms") != std::string::npos);
  }
}

TEST_CASE("quotas: a PostgreSQL store of schema 4 gains tenant limits, none set, its rows unchanged",
          "[postgres][quotas][migrations]") {
  const std::string loc = colikv_test::fresh_pg_store();
  const ModelSignature m = colikv_test::tiny_model();
  const EngineBuffers h = history(m, 9, 5);
  {
    Store t1(loc, tenant_options(m, "t1"));
    append(t1, "x", h, 9);
  }
  // Schema 4's tenants table: without the limits of 0005 (nor 0006's queue,
  // nor schema 8's view of the tenants).
  colikv_test::store_exec(loc, "DROP VIEW tenant_summary");
  colikv_test::store_exec(loc, "DROP TABLE chunks_to_free");
  colikv_test::store_exec(loc, "ALTER TABLE tenants DROP COLUMN max_bytes");
  colikv_test::store_exec(loc, "ALTER TABLE tenants DROP COLUMN max_idle_ms");
  colikv_test::store_exec(loc, "UPDATE colikv_schema SET version = 4");
  auto rows = [&] {
    return colikv_test::store_query(
        loc, "SELECT t.tenant_id, t.name, t.created_ms, c.conversation_id, c.name, c.token_count, c.last_used_ms "
             "FROM tenants t LEFT JOIN conversations c ON c.tenant_id = t.tenant_id ORDER BY t.tenant_id");
  };
  const colikv_test::SqlRows before = rows();
  REQUIRE(before.size() == 2);  // "" and t1
  Options ro = tenant_options(m, "t1");
  ro.read_only = true;
  CHECK(error_code_of([&] { Store(loc, ro); }) == ErrorCode::kVersion);  // a read-only open does not migrate
  {
    Store t1(loc, tenant_options(m, "t1"));
    CHECK(t1.schema_version() == Store::library_schema_version(loc));
    CHECK(t1.tenant_limits() == TenantLimits{});
  }
  CHECK(rows() == before);
  Store t1(loc, tenant_options(m, "t1"));
  CHECK(loads_as(t1, "x", h, 9) == "");
}
