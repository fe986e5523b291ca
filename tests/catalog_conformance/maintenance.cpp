// Catalog conformance: tenant limits, retention and eviction, and the store's
// space (catalog.h, "Tenant limits", "Eviction"): tenant_limits,
// set_tenant_limits, idle_conversations, stored_payload_bytes,
// visit_least_recent, payload_chunks, chunk_users, evict_payload, the evicted
// counts, compact, release_free_pages, erase_deleted, file_bytes.
#include "catalog_conformance/conformance.h"

#include <algorithm>

namespace conformance {

using Scope = colikv::detail::Catalog::Scope;

namespace {

int64_t sum_of(const std::vector<colikv::detail::PayloadChunk>& chunks) {
  int64_t sum = 0;
  for (const auto& p : chunks) sum += p.bytes;
  return sum;
}

}  // namespace

TEST_CASE_METHOD(Conformance, "catalog conformance: set_tenant_limits sets the tenant's two limits, tenant_limits "
                              "reads them, and a refused or rolled back set leaves them", "[backends][catalog]") {
  Catalog& c = catalog();
  const auto other = open(tenant("other"));
  CHECK_FALSE(c.tenant_limits().max_bytes);
  CHECK_FALSE(c.tenant_limits().max_idle_ms);
  colikv::TenantLimits l;
  l.max_bytes = 1000;
  l.max_idle_ms = 60000;
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    c.set_tenant_limits(l);
    CHECK(c.tenant_limits().max_bytes == 1000);
  }  // rolled back
  CHECK_FALSE(c.tenant_limits().max_bytes);
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    c.set_tenant_limits(l);
    txn->commit();
  }
  CHECK(c.tenant_limits().max_bytes == 1000);
  CHECK(c.tenant_limits().max_idle_ms == 60000);
  CHECK_FALSE(other->tenant_limits().max_bytes);  // the tenant's own
  CHECK_FALSE(other->tenant_limits().max_idle_ms);
  const auto tenants = other->tenant_usage();
  REQUIRE(tenants.size() == 2);
  CHECK(tenants[0].limits.max_bytes == 1000);
  CHECK(tenants[0].limits.max_idle_ms == 60000);
  CHECK_FALSE(tenants[1].limits.max_bytes);

  {  // the schema's CHECK refuses a negative limit; the stored ones stay
    auto txn = c.begin(Access::kWrite, "conformance");
    colikv::TenantLimits bad;
    bad.max_bytes = -1;
    CHECK(refused(c, [&] { c.set_tenant_limits(bad); }) == ErrorCode::kConflict);
    txn->commit();
  }
  CHECK(c.tenant_limits().max_bytes == 1000);
  CHECK(c.tenant_limits().max_idle_ms == 60000);

  colikv::TenantLimits one;  // none is NULL
  one.max_idle_ms = 5;
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    c.set_tenant_limits(one);
    txn->commit();
  }
  CHECK_FALSE(c.tenant_limits().max_bytes);
  CHECK(c.tenant_limits().max_idle_ms == 5);
}

TEST_CASE_METHOD(Conformance, "catalog conformance: idle_conversations and visit_least_recent step through "
                              "conversations least recently used first", "[backends][catalog]") {
  insert(conversation("a", 1000));
  insert(conversation("b", 3000));
  insert(conversation("c", 2000));
  insert(conversation("d", 2000));  // same last use as c, a larger id: after it
  {
    const auto other = open(tenant("other"));
    auto txn = other->begin(Access::kWrite, "conformance");
    NewConversation n = conversation("x", 500);
    create_in(*other, n);
    txn->commit();
  }
  // The last uses set exactly: a catalog takes them from its backend's clock.
  used_at("a", 1000);
  used_at("b", 3000);
  used_at("c", 2000);
  used_at("d", 2000);
  used_at("x", 500);
  Catalog& c = catalog();
  const auto names = [](const std::vector<colikv::detail::IdleConversation>& rows) {
    std::string s;
    for (const auto& r : rows) s += r.name;
    return s;
  };
  CHECK(names(c.idle_conversations(2500)) == "acd");
  CHECK(names(c.idle_conversations(3500)) == "acdb");
  CHECK(names(c.idle_conversations(500)).empty());
  const auto idle = c.idle_conversations(1500);
  REQUIRE(idle.size() == 1);
  CHECK(idle[0].id == id_of("a"));
  if (!colikv_test::testing_postgres()) {
    // Strictly before, to the millisecond. On PostgreSQL the threshold is
    // measured back from the server's clock, read after the caller's: it
    // moves later by the call's latency, so no exact edge holds there.
    CHECK(names(c.idle_conversations(3000)) == "acd");
    CHECK(names(c.idle_conversations(3001)) == "acdb");
    CHECK(names(c.idle_conversations(1000)).empty());
    CHECK(names(c.idle_conversations(1001)) == "a");
  }
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    CHECK(names(c.idle_conversations(2500)) == "acd");
    txn->commit();
  }

  const auto visit = [&](Scope scope, size_t stop_after) {
    std::string s;
    size_t n = 0;
    c.visit_least_recent(scope, [&](int64_t id, const std::string& name) {
      if (name != "x") CHECK(id == id_of(name));
      s += name;
      return ++n == stop_after;
    });
    return s;
  };
  CHECK(visit(Scope::kTenant, 100) == "acdb");
  CHECK(visit(Scope::kStore, 100) == "xacdb");
  CHECK(visit(Scope::kTenant, 2) == "ac");  // true stops it
  CHECK(visit(Scope::kStore, 1) == "x");
}

TEST_CASE_METHOD(Conformance, "catalog conformance: stored_payload_bytes, payload_chunks and chunk_users count "
                              "what the chunk lists hold", "[backends][catalog]") {
  const auto list = store_a_f_and_x();
  Catalog& c = catalog();
  const int64_t a = id_of("a"), f = id_of("f");
  const auto payloads = c.payload_chunks(a);
  REQUIRE(payloads.size() == 3);
  for (const auto& p : payloads) {
    const auto chunk = c.read_chunk(p.chunk_id);
    REQUIRE(chunk);
    CHECK(p.bytes == static_cast<int64_t>(chunk->payload->size()));
  }
  const int64_t mine = sum_of(payloads);
  const int64_t tail = static_cast<int64_t>(c.read_chunk(list[2].chunk_id)->payload->size());
  CHECK(sum_of(c.payload_chunks(f)) == mine - tail);  // the two it shares
  const auto other = open(tenant("other"));
  const int64_t theirs = sum_of(other->payload_chunks(other->find_conversation("x")->id));
  CHECK(theirs > 0);
  CHECK(c.stored_payload_bytes(Scope::kTenant) == mine);
  CHECK(c.stored_payload_bytes(Scope::kStore) == mine + theirs);
  CHECK(other->stored_payload_bytes(Scope::kTenant) == theirs);
  CHECK(c.payload_chunks(a + f + 1000).empty());

  CHECK(c.chunk_users(list[0].chunk_id) == 2);  // the fork's too
  CHECK(c.chunk_users(list[1].chunk_id) == 2);
  CHECK(c.chunk_users(list[2].chunk_id) == 1);
  CHECK(c.chunk_users(list[2].chunk_id + 1000) == 0);

  // A chunk no list names any more: no user, no tenant's bytes, still the store's.
  c.apply(removal("a"), "conformance");  // frees none
  CHECK(c.chunk_users(list[2].chunk_id) == 0);
  CHECK(c.chunk_users(list[0].chunk_id) == 1);
  CHECK(c.stored_payload_bytes(Scope::kTenant) == mine - tail);
  CHECK(c.stored_payload_bytes(Scope::kStore) == mine + theirs);
}

TEST_CASE_METHOD(Conformance, "catalog conformance: evict_payload drops a chunk's payload and keeps its row and "
                              "token ids, and a rolled back eviction leaves it", "[backends][catalog]") {
  const auto list = store_a_and_f();
  Catalog& c = catalog();
  const int64_t a = id_of("a");
  const int64_t mid = model_id();
  const ChunkSummary shared = list[1];
  const auto before = c.read_chunk(shared.chunk_id);
  REQUIRE(before);
  REQUIRE(before->payload);
  const int64_t bytes = static_cast<int64_t>(before->payload->size());
  const int64_t store_bytes = c.stored_payload_bytes(Scope::kStore);
  const std::string a_before = shown(c, "a"), f_before = shown(c, "f");
  CHECK(c.evicted_chunk_count() == 0);
  CHECK(c.evicted_conversation_count() == 0);

  {
    auto txn = c.begin(Access::kWrite, "conformance");
    c.evict_payload(shared.chunk_id);
    CHECK_FALSE(c.read_chunk(shared.chunk_id)->payload);
  }  // rolled back
  CHECK(shown(c, "a") == a_before);
  CHECK(shown(c, "f") == f_before);
  CHECK(c.read_chunk(shared.chunk_id)->payload == before->payload);
  CHECK(c.stored_payload_bytes(Scope::kStore) == store_bytes);

  {
    auto txn = c.begin(Access::kWrite, "conformance");
    c.evict_payload(shared.chunk_id);
    txn->commit();
  }
  const auto after = c.read_chunk(shared.chunk_id);
  REQUIRE(after);
  CHECK_FALSE(after->payload);
  CHECK(after->tokens_json == before->tokens_json);
  CHECK(after->n_tokens == before->n_tokens);
  CHECK(c.chunk_tokens_json(shared.chunk_id) == before->tokens_json);
  const auto list_after = c.chunk_list(a);
  REQUIRE(list_after.size() == 3);
  CHECK_FALSE(list_after[0].evicted);
  CHECK(list_after[1].evicted);
  CHECK(list_after[1].chunk_id == shared.chunk_id);
  CHECK(c.chunk_users(shared.chunk_id) == 2);  // still linked
  const auto found = c.find_chunk(mid, shared.key);
  REQUIRE(found);
  CHECK(found->chunk_id == shared.chunk_id);
  CHECK(found->evicted);
  CHECK(c.digests_at(mid, shared.chain).empty());  // it no longer holds values
  CHECK(c.stored_payload_bytes(Scope::kStore) == store_bytes - bytes);
  CHECK(c.stored_payload_bytes(Scope::kTenant) == store_bytes - bytes);
  for (const auto& p : c.payload_chunks(a)) CHECK(p.chunk_id != shared.chunk_id);
  CHECK(c.payload_chunks(a).size() == 2);
  CHECK(c.evicted_chunk_count() == 1);
  CHECK(c.evicted_conversation_count() == 2);  // both lists name it
  const auto info = c.conversation_info("a");
  REQUIRE(info);
  CHECK(info->evicted);
  CHECK(c.conversation_info("f")->evicted);
  CHECK(c.conversation_info("a")->count == 10);
  const auto gauges = c.gauge_usage();
  REQUIRE(gauges.size() == 1);
  CHECK(gauges[0].evicted_bytes == shared.n_tokens * static_cast<int64_t>(model.record_bytes()));
  CHECK(gauges[0].stored_bytes == store_bytes - bytes);

  auto snapshot = c.begin(Access::kRead, "conformance");
  auto cursor = c.read_chunks(a, 10, int64_t{1} << 30);
  colikv::detail::ChunkListRow row;
  REQUIRE(cursor->next(row));
  CHECK(row.payload_bytes);
  REQUIRE(cursor->next(row));
  CHECK(row.chunk_id == shared.chunk_id);
  CHECK_FALSE(row.payload_bytes);  // evicted
  CHECK(row.tokens_json == before->tokens_json);
}

TEST_CASE_METHOD(Conformance, "catalog conformance: file_bytes measures the store, compact and "
                              "release_free_pages give back what a delete freed, erase_deleted completes without "
                              "readers", "[backends][catalog]") {
  CHECK(catalog().file_bytes() > 0);
  put("big", 400, 1);
  const int64_t full = catalog().file_bytes();
  const int64_t payloads = catalog().stored_payload_bytes(Scope::kStore);
  CHECK(payloads > 0);
  CHECK(full >= payloads);  // the store's bytes hold its payloads at least
  close_catalog();
  store().remove("big");
  close();
  Catalog& c = catalog();
  CHECK(c.erase_deleted("conformance"));
  // A store of local files gives free pages back (LocalFiles); one on a server has none.
  CHECK((c.local_files() != nullptr) == !colikv_test::testing_postgres());
  if (colikv::detail::LocalFiles* files = c.local_files()) files->release_free_pages("conformance", 1 << 20, {});
  std::vector<std::pair<int64_t, int64_t>> steps;
  const auto outcome =
      c.compact("conformance", 1 << 20, [&](int64_t done, int64_t total) { steps.emplace_back(done, total); });
  CHECK(outcome.reclaimable_bytes >= -1);
  for (const auto& s : steps) {
    CHECK(s.first >= 0);
    CHECK(s.first <= s.second);
  }
  const int64_t compacted = c.file_bytes();
  CHECK(compacted < full);
  CHECK(c.conversation_count() == 0);
  CHECK(c.check_integrity().text == "ok");
  // The store works on after it.
  const int64_t id = insert(conversation("after"));
  CHECK(c.find_conversation("after")->id == id);
}

}  // namespace conformance
