// Catalog conformance: tenant limits, retention and eviction, and the store's
// space (catalog.h, "Tenant limits", "Eviction"): tenant_limits,
// set_tenant_limits, idle_conversations, stored_payload_bytes,
// visit_least_recent, claim_chunks, evict_payload, usage's evicted counts,
// compact, release_free_pages, erase_deleted, file_bytes.
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

// What claim_chunks says of chunk `id`: "users N", "held" (another writer's), or "absent".
std::string claim_of(const std::vector<colikv::detail::PayloadChunk>& chunks, int64_t id) {
  for (const auto& p : chunks)
    if (p.chunk_id == id) return p.users ? "users " + std::to_string(*p.users) : "held";
  return "absent";
}

const unsigned kBoth = colikv::kAllTenantLimits;

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
    c.set_tenant_limits(l, kBoth);
    CHECK(c.tenant_limits().max_bytes == 1000);
  }  // rolled back
  CHECK_FALSE(c.tenant_limits().max_bytes);
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    c.set_tenant_limits(l, kBoth);
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
    CHECK(refused(c, [&] { c.set_tenant_limits(bad, kBoth); }) == ErrorCode::kConflict);
    txn->commit();
  }
  CHECK(c.tenant_limits().max_bytes == 1000);
  CHECK(c.tenant_limits().max_idle_ms == 60000);

  colikv::TenantLimits one;  // none is NULL
  one.max_idle_ms = 5;
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    const colikv::TenantLimits now = c.set_tenant_limits(one, kBoth);
    CHECK_FALSE(now.max_bytes);
    CHECK(now.max_idle_ms == 5);
    txn->commit();
  }
  CHECK_FALSE(c.tenant_limits().max_bytes);
  CHECK(c.tenant_limits().max_idle_ms == 5);

  // One field: the other stays as stored, whatever `limits` holds for it; the
  // limits as they now stand come back.
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    colikv::TenantLimits bytes;
    bytes.max_bytes = 700;
    bytes.max_idle_ms = 99;  // not named: ignored
    const colikv::TenantLimits now = c.set_tenant_limits(bytes, colikv::kTenantMaxBytes);
    CHECK(now.max_bytes == 700);
    CHECK(now.max_idle_ms == 5);
    colikv::TenantLimits idle;  // none: NULL, for the field named
    const colikv::TenantLimits then = c.set_tenant_limits(idle, colikv::kTenantMaxIdle);
    CHECK(then.max_bytes == 700);
    CHECK_FALSE(then.max_idle_ms);
    txn->commit();
  }
  CHECK(c.tenant_limits().max_bytes == 700);
  CHECK_FALSE(c.tenant_limits().max_idle_ms);
  CHECK_FALSE(other->tenant_limits().max_bytes);  // still the tenant's own
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

TEST_CASE_METHOD(Conformance, "catalog conformance: stored_payload_bytes and claim_chunks count what the chunk "
                              "lists hold, and claim_chunks each chunk's users", "[backends][catalog]") {
  const auto list = store_a_f_and_x();
  Catalog& c = catalog();
  const int64_t a = id_of("a"), f = id_of("f");
  const auto payloads = c.claim_chunks(a);
  REQUIRE(payloads.size() == 3);
  for (const auto& p : payloads) {
    const auto chunk = c.read_chunk(p.chunk_id);
    REQUIRE(chunk);
    CHECK(p.bytes == static_cast<int64_t>(chunk->payload->size()));
  }
  const int64_t mine = sum_of(payloads);
  const int64_t tail = static_cast<int64_t>(c.read_chunk(list[2].chunk_id)->payload->size());
  CHECK(sum_of(c.claim_chunks(f)) == mine - tail);  // the two it shares
  const auto other = open(tenant("other"));
  const int64_t theirs = sum_of(other->claim_chunks(other->find_conversation("x")->id));
  CHECK(theirs > 0);
  CHECK(c.stored_payload_bytes(Scope::kTenant) == mine);
  CHECK(c.stored_payload_bytes(Scope::kStore) == mine + theirs);
  CHECK(other->stored_payload_bytes(Scope::kTenant) == theirs);
  CHECK(c.claim_chunks(a + f + 1000).empty());

  CHECK(claim_of(payloads, list[0].chunk_id) == "users 2");  // the fork's too
  CHECK(claim_of(payloads, list[1].chunk_id) == "users 2");
  CHECK(claim_of(payloads, list[2].chunk_id) == "users 1");
  {  // in a write transaction, claimed: the same counts, which no other writer changes until it ends
    auto txn = c.begin(Access::kWrite, "conformance");
    const auto claimed = c.claim_chunks(f);
    REQUIRE(claimed.size() == 2);
    CHECK(claim_of(claimed, list[0].chunk_id) == "users 2");
    CHECK(claim_of(claimed, list[1].chunk_id) == "users 2");
    CHECK(claim_of(claimed, list[2].chunk_id) == "absent");  // not the fork's
    txn->commit();
  }

  // A chunk no list names any more: no tenant's bytes, still the store's.
  c.apply(removal("a"), "conformance");  // frees none
  CHECK(claim_of(c.claim_chunks(f), list[0].chunk_id) == "users 1");
  CHECK(c.claim_chunks(a).empty());
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
  CHECK(c.usage().evicted_chunks == 0);
  CHECK(c.usage().evicted_conversations == 0);

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
  std::string tokens;
  c.for_each_token_list(a, shared.seq, shared.first_pos + 1,
                        [&](int64_t, int64_t, std::string_view json) { tokens = std::string(json); });
  CHECK(tokens == before->tokens_json);
  const auto list_after = c.chunk_list(a);
  REQUIRE(list_after.size() == 3);
  CHECK_FALSE(list_after[0].evicted);
  CHECK(list_after[1].evicted);
  CHECK(list_after[1].chunk_id == shared.chunk_id);
  const auto claimed = c.claim_chunks(a);
  CHECK(claim_of(claimed, shared.chunk_id) == "users 2");  // still linked, with no payload
  const auto found = c.find_chunk(mid, shared.key);
  REQUIRE(found);
  CHECK(found->chunk_id == shared.chunk_id);
  CHECK(found->evicted);
  CHECK(c.digests_at(mid, shared.chain).empty());  // it no longer holds values
  CHECK(c.stored_payload_bytes(Scope::kStore) == store_bytes - bytes);
  CHECK(c.stored_payload_bytes(Scope::kTenant) == store_bytes - bytes);
  for (const auto& p : claimed) CHECK((p.bytes == 0) == (p.chunk_id == shared.chunk_id));
  CHECK(claimed.size() == 3);
  CHECK(c.usage().evicted_chunks == 1);
  CHECK(c.usage().evicted_conversations == 2);  // both lists name it
  const auto info = c.conversation_info("a");
  REQUIRE(info);
  CHECK(info->evicted);
  CHECK(c.conversation_info("f")->evicted);
  CHECK(c.conversation_info("a")->count == 10);
  const auto gauges = c.gauge_usage().rows;
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

TEST_CASE_METHOD(Conformance, "catalog conformance: claim_chunks lists a chunk whose chunk_meta row a hand edit "
                              "deleted, with its users and no bytes, and evict_payload drops its payload",
                 "[backends][catalog][hostile]") {
  const auto list = store_a_and_f();
  const int64_t shared = list[0].chunk_id, tail = list[2].chunk_id;
  const auto before = catalog().read_chunk(shared);
  REQUIRE(before);
  REQUIRE(before->payload);
  close_catalog();
  colikv_test::store_exec(path, "DELETE FROM chunk_meta WHERE chunk_id IN (" + std::to_string(shared) + ", " +
                                    std::to_string(tail) + ")");
  Catalog& c = catalog();
  const int64_t a = id_of("a");
  auto check = [&](const std::vector<colikv::detail::PayloadChunk>& claimed) {
    REQUIRE(claimed.size() == 3);  // every chunk a's list names
    CHECK(claim_of(claimed, shared) == "users 2");
    CHECK(claim_of(claimed, tail) == "users 1");
    for (const auto& p : claimed) {
      if (p.chunk_id == shared || p.chunk_id == tail) CHECK(p.bytes == 0);  // no chunk_meta row weighs them
      CHECK(p.own_entries == 1);
    }
  };
  check(c.claim_chunks(a));
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    check(c.claim_chunks(a));
    c.evict_payload(shared);
    txn->commit();
  }
  const auto after = c.read_chunk(shared);
  REQUIRE(after);
  CHECK_FALSE(after->payload);
  CHECK(after->tokens_json == before->tokens_json);
  CHECK(colikv_test::store_int(path, "SELECT count(*) FROM chunk_meta WHERE chunk_id = " + std::to_string(shared)) ==
        0);
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
