// Catalog conformance: the scans of verify and stats (catalog.h, "Verify and
// stats"): check_integrity, conversations_to_verify, for_each_verify_row,
// lineage, strays, usage, tenant_usage, gauge_usage.
#include "catalog_conformance/conformance.h"

#include <algorithm>
#include <map>

namespace conformance {

namespace {

// The payload bytes of the chunks `ids` (each once).
int64_t payload_bytes(Catalog& c, std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  int64_t sum = 0;
  for (int64_t id : ids) {
    const auto chunk = c.read_chunk(id);
    REQUIRE(chunk);
    if (chunk->payload) sum += static_cast<int64_t>(chunk->payload->size());
  }
  return sum;
}

std::vector<int64_t> chunk_ids(const std::vector<ChunkSummary>& list) {
  std::vector<int64_t> ids;
  for (const auto& s : list) ids.push_back(s.chunk_id);
  return ids;
}

}  // namespace

TEST_CASE_METHOD(Conformance, "catalog conformance: a sound store passes check_integrity and has no unused, "
                              "stranded or undigested chunks", "[backends][catalog]") {
  store_a_and_f();
  Catalog& c = catalog();
  const auto report = c.check_integrity();
  CHECK_FALSE(report.check.empty());
  CHECK(report.text == "ok");
  const auto strays = c.strays();
  CHECK(strays.unused_chunks.empty());
  CHECK(strays.conversations_of_no_tenant.empty());
  int shares = 0;
  c.for_each_undigested_share([&](const colikv::detail::ChunkUse&) { ++shares; });
  CHECK(shares == 0);  // every chunk of this library has its digest
}

TEST_CASE_METHOD(Conformance, "catalog conformance: conversations_to_verify lists the tenant's conversations by "
                              "name, or the one asked for", "[backends][catalog]") {
  Catalog& c = catalog();
  const int64_t a = insert(conversation("a"));
  const int64_t b = insert(conversation("B"));
  insert(conversation("c"));
  {
    const auto other = open(tenant("other"));
    auto txn = other->begin(Access::kWrite, "conformance");
    NewConversation n = conversation("A");
    create_in(*other, n);
    txn->commit();
  }
  const auto all = c.conversations_to_verify("");
  std::string names;
  for (const auto& r : all) names += r.name + ",";
  CHECK(names == "B,a,c,");  // by the bytes of their names
  REQUIRE(all.size() == 3);
  CHECK(all[0].id == b);
  CHECK(all[1].id == a);
  for (const auto& r : all) {
    CHECK(r.model_id == model_id());
    CHECK(r.count == 0);
    CHECK(r.precision == "f32");
    CHECK(r.malformed.empty());
  }
  const auto one = c.conversations_to_verify("a");
  REQUIRE(one.size() == 1);
  CHECK(one[0].id == a);
  CHECK(one[0].name == "a");
  CHECK(c.conversations_to_verify("A").empty());  // another tenant's
  CHECK(c.conversations_to_verify("absent").empty());
}

TEST_CASE_METHOD(Conformance, "catalog conformance: for_each_verify_row gives each entry with its chunk's stored "
                              "fields, and an entry naming a missing chunk without them", "[backends][catalog]") {
  const auto list = store_a();
  Catalog& c = catalog();
  const int64_t id = id_of("a");
  size_t i = 0;
  c.for_each_verify_row(id, [&](const colikv::detail::VerifyChunkRow& r) {
    INFO("entry " << i);
    REQUIRE(i < list.size());
    const ChunkSummary& s = list[i];
    const auto chunk = c.read_chunk(s.chunk_id);  // a read inside the scan's callback
    REQUIRE(chunk);
    CHECK(r.seq == s.seq);
    REQUIRE(r.chunk_id);
    CHECK(*r.chunk_id == s.chunk_id);
    CHECK(r.first_pos == s.first_pos);
    CHECK(r.n_tokens == s.n_tokens);
    CHECK(r.model_id == model_id());
    CHECK(std::string(r.tokens_json) == chunk->tokens_json);
    CHECK(r.compression == chunk->compression);
    CHECK(r.raw_size == chunk->raw_size);
    CHECK(r.checksum == chunk->checksum);
    CHECK(r.precision == "f32");
    CHECK(r.key == s.key);
    CHECK(r.digest == s.digest);
    REQUIRE(r.has_payload);
    REQUIRE(r.payload);
    CHECK(std::vector<uint8_t>(r.payload, r.payload + r.payload_bytes) == *chunk->payload);
    CHECK(r.has_index);
    CHECK(r.index_chain == s.chain);
    CHECK(r.index_tokens_json == chunk->tokens_json);  // a full chunk's region, and a tail's after the last full one
    if (s.first_pos == 4) {
      REQUIRE(r.index_prev);
      CHECK(*r.index_prev == std::string(reinterpret_cast<const char*>(list[0].chain.data()), list[0].chain.size()));
    }
    ++i;
  });
  CHECK(i == 3);
  int calls = 0;
  c.for_each_verify_row(id + 1000, [&](const colikv::detail::VerifyChunkRow&) { ++calls; });
  CHECK(calls == 0);

  // A hand edit with the foreign key unenforced deletes the last chunk.
  const std::string gone = std::to_string(list[2].chunk_id);
  close_catalog();
  if (colikv::is_postgres_location(path)) {
    colikv_test::store_exec(path, "DO $$ BEGIN SET LOCAL session_replication_role = replica; "
                                  "DELETE FROM chunk_meta WHERE chunk_id = " + gone + "; "
                                  "DELETE FROM chunks WHERE chunk_id = " + gone + "; END $$");
  } else {
    colikv_test::store_exec(path, "DELETE FROM chunk_meta WHERE chunk_id = " + gone);
    colikv_test::store_exec(path, "DELETE FROM chunks WHERE chunk_id = " + gone);
  }
  std::vector<std::optional<int64_t>> ids;
  std::vector<int64_t> seqs;
  catalog().for_each_verify_row(id, [&](const colikv::detail::VerifyChunkRow& r) {
    ids.push_back(r.chunk_id);
    seqs.push_back(r.seq);
    if (!r.chunk_id) CHECK_FALSE(r.has_payload);
  });
  REQUIRE(ids.size() == 3);
  CHECK(ids[0] == list[0].chunk_id);
  CHECK(ids[1] == list[1].chunk_id);
  CHECK_FALSE(ids[2]);
  CHECK(seqs[2] == list[2].seq);
}

TEST_CASE_METHOD(Conformance, "catalog conformance: lineage gives each of the tenant's conversations its parent "
                              "and fork point", "[backends][catalog]") {
  put("p", 10, 1);
  fork("p", "f", 8);
  Catalog& c = catalog();
  const int64_t p = id_of("p"), fid = id_of("f");
  {
    const auto other = open(tenant("other"));
    auto txn = other->begin(Access::kWrite, "conformance");
    NewConversation n = conversation("x");
    create_in(*other, n);
    txn->commit();
  }
  auto rows = c.lineage();
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.id < y.id; });
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].id == p);
  CHECK(rows[0].name == "p");
  CHECK(rows[0].parent_id == 0);
  CHECK(rows[0].forked_at == 0);
  CHECK(rows[1].id == fid);
  CHECK(rows[1].name == "f");
  CHECK(rows[1].parent_id == p);
  CHECK(rows[1].forked_at == 8);
}

TEST_CASE_METHOD(Conformance, "catalog conformance: usage, tenant_usage and gauge_usage count conversations, "
                              "tokens, distinct chunks and their payload bytes", "[backends][catalog]") {
  const auto a = store_a_f_and_x();
  Catalog& c = catalog();
  const int64_t mid = model_id();
  const auto f = c.chunk_list(id_of("f"));
  REQUIRE(f.size() == 2);
  std::vector<int64_t> mine = chunk_ids(a);
  for (int64_t id : chunk_ids(f)) mine.push_back(id);
  const int64_t my_bytes = payload_bytes(c, mine);
  CHECK(my_bytes > 0);

  const auto mine_usage = c.usage();
  CHECK(mine_usage.evicted_chunks == 0);
  CHECK(mine_usage.evicted_conversations == 0);
  const auto& usage = mine_usage.models;
  REQUIRE(usage.size() == 1);
  CHECK(usage[0].model_id == mid);
  CHECK(usage[0].chunk_tokens == 4);
  CHECK(usage[0].record_bytes == static_cast<int64_t>(this->model.record_bytes()));
  CHECK(usage[0].conversations == 2);
  CHECK(usage[0].tokens == 18);
  CHECK(usage[0].chunks == 3);  // the fork's two are the parent's
  CHECK(usage[0].chunk_tokens_sum == 10);
  CHECK(usage[0].stored_bytes == my_bytes);

  const auto other = open(tenant("other"));
  const auto theirs = other->chunk_list(other->find_conversation("x")->id);
  REQUIRE(theirs.size() == 1);
  const int64_t their_bytes = payload_bytes(*other, chunk_ids(theirs));
  const auto other_usage = other->usage().models;
  REQUIRE(other_usage.size() == 1);
  CHECK(other_usage[0].conversations == 1);
  CHECK(other_usage[0].tokens == 4);
  CHECK(other_usage[0].chunks == 1);
  CHECK(other_usage[0].stored_bytes == their_bytes);
  const int64_t their_model = other_usage[0].model_id;

  for (Catalog* any : {&c, other.get()}) {  // whichever tenant's catalog asks
    const auto tenants = any->tenant_usage();
    REQUIRE(tenants.size() == 2);
    CHECK(tenants[0].name == "");
    CHECK(tenants[0].conversations == 2);
    CHECK(tenants[0].stored_bytes == my_bytes);
    CHECK_FALSE(tenants[0].limits.max_bytes);
    CHECK_FALSE(tenants[0].limits.max_idle_ms);
    CHECK(tenants[1].name == "other");
    CHECK(tenants[1].conversations == 1);
    CHECK(tenants[1].stored_bytes == their_bytes);

    const auto gauge = any->gauge_usage();
    CHECK(gauge.held_chunks == 0);  // no writer is mid-turn
    CHECK(gauge.file_bytes > 0);
    CHECK(gauge.wal_bytes >= 0);
    CHECK(gauge.wal_bytes <= gauge.file_bytes);
    if (colikv_test::testing_postgres()) CHECK(gauge.wal_bytes == 0);  // the server's WAL is not the store's
    const auto& gauges = gauge.rows;
    REQUIRE(gauges.size() == 2);
    CHECK(gauges[0].tenant == "");
    CHECK(gauges[0].model_id == mid);
    CHECK(gauges[0].conversations == 2);
    CHECK(gauges[0].tokens == 18);
    CHECK(gauges[0].stored_bytes == my_bytes);
    CHECK(gauges[0].evicted_bytes == 0);
    CHECK(gauges[1].tenant == "other");
    CHECK(gauges[1].model_id == their_model);
    CHECK(gauges[1].conversations == 1);
    CHECK(gauges[1].tokens == 4);
    CHECK(gauges[1].stored_bytes == their_bytes);
    CHECK(gauges[1].evicted_bytes == 0);
  }
}

}  // namespace conformance
