// Catalog conformance: reading chunks (catalog.h, "Chunks": chunk_list,
// read_chunks, read_chunk, find_chunk, digests_at, for_each_token_list). The chunks are a Store's (conformance.h).
#include "catalog_conformance/conformance.h"

#include <algorithm>

namespace conformance {

using colikv::detail::ChunkListRow;

TEST_CASE_METHOD(Conformance, "catalog conformance: chunk_list lists a conversation's chunks in seq order, "
                              "read_chunk and for_each_token_list read each", "[backends][catalog]") {
  const auto list = store_a();
  Catalog& c = catalog();
  const int64_t id = id_of("a");
  const int64_t first[] = {0, 4, 8}, tokens[] = {4, 4, 2};
  for (size_t i = 0; i < list.size(); ++i) {
    INFO("entry " << i);
    CHECK(list[i].first_pos == first[i]);
    CHECK(list[i].n_tokens == tokens[i]);
    CHECK_FALSE(list[i].evicted);
    CHECK(list[i].digest);
    if (i > 0) CHECK(list[i].seq > list[i - 1].seq);
    // The entry alone: from its seq, before the next one's start.
    std::optional<std::string> stored_tokens;
    c.for_each_token_list(id, list[i].seq, first[i] + 1, [&](int64_t chunk_id, int64_t n, std::string_view json) {
      CHECK_FALSE(stored_tokens);
      CHECK(chunk_id == list[i].chunk_id);
      CHECK(n == tokens[i]);
      stored_tokens = std::string(json);
    });
    REQUIRE(stored_tokens);
    CHECK(*stored_tokens == tokens_json(10, 1, first[i], tokens[i]));
    const auto chunk = c.read_chunk(list[i].chunk_id);
    REQUIRE(chunk);
    CHECK(chunk->n_tokens == tokens[i]);
    CHECK(chunk->tokens_json == *stored_tokens);
    CHECK(chunk->precision == "f32");
    CHECK((chunk->compression == "zstd" || chunk->compression == "none"));
    CHECK(chunk->raw_size * 4 == tokens[i] * c.read_chunk(list[0].chunk_id)->raw_size);  // by its positions
    CHECK(chunk->raw_size > 0);
    REQUIRE(chunk->payload);
    CHECK_FALSE(chunk->payload->empty());
  }
  CHECK(list[0].chain != list[1].chain);
  // No such conversation or chunk: empty, never an error.
  int64_t past = 0;
  for (const auto& s : list) past = std::max(past, s.chunk_id);
  CHECK(c.chunk_list(id + 1000).empty());
  CHECK_FALSE(c.read_chunk(past + 1000));
}

TEST_CASE_METHOD(Conformance, "catalog conformance: read_chunks streams the entries that start before end_pos with "
                              "their payloads, and a payload read at another size is kCorrupt", "[backends][catalog]") {
  const auto list = store_a();
  Catalog& c = catalog();
  const int64_t id = id_of("a");
  std::vector<std::vector<uint8_t>> payloads;
  for (const auto& s : list) payloads.push_back(*c.read_chunk(s.chunk_id)->payload);

  auto snapshot = c.begin(Access::kRead, "conformance");
  {
    auto cursor = c.read_chunks(id, 10, int64_t{1} << 30);
    ChunkListRow row;
    for (size_t i = 0; i < list.size(); ++i) {
      INFO("entry " << i);
      REQUIRE(cursor->next(row));
      CHECK(row.seq == list[i].seq);
      CHECK(row.chunk_id == list[i].chunk_id);
      CHECK(row.first_pos == list[i].first_pos);
      CHECK(row.n_tokens == list[i].n_tokens);
      CHECK(row.key == list[i].key);
      CHECK(row.digest == list[i].digest);
      CHECK(row.precision == "f32");
      CHECK(row.tokens_json == tokens_json(10, 1, list[i].first_pos, list[i].n_tokens));
      REQUIRE(row.payload_bytes);
      CHECK(*row.payload_bytes == static_cast<int64_t>(payloads[i].size()));
      std::vector<uint8_t> out;
      cursor->read_payload(row.chunk_id, *row.payload_bytes, out, "conformance");
      CHECK(out == payloads[i]);
    }
    CHECK_FALSE(cursor->next(row));
  }
  {  // end_pos: the entries that start before it (the one holding position 4 starts at 4)
    auto cursor = c.read_chunks(id, 5, int64_t{1} << 30);
    ChunkListRow row;
    std::vector<int64_t> seen;
    while (cursor->next(row)) seen.push_back(row.first_pos);
    CHECK(seen == std::vector<int64_t>{0, 4});
  }
  {
    auto cursor = c.read_chunks(id, 0, int64_t{1} << 30);
    ChunkListRow row;
    CHECK_FALSE(cursor->next(row));
  }
  {
    auto cursor = c.read_chunks(id + 1000, 10, int64_t{1} << 30);
    ChunkListRow row;
    CHECK_FALSE(cursor->next(row));
  }
  {  // another size than the stored one
    auto cursor = c.read_chunks(id, 10, int64_t{1} << 30);
    ChunkListRow row;
    REQUIRE(cursor->next(row));
    std::vector<uint8_t> out;
    CHECK(colikv_test::error_code_of([&] { cursor->read_payload(row.chunk_id, *row.payload_bytes + 1, out, "c"); }) ==
          ErrorCode::kCorrupt);
  }
  {
    auto cursor = c.read_chunks(id, 10, int64_t{1} << 30);
    ChunkListRow row;
    REQUIRE(cursor->next(row));
    std::vector<uint8_t> out;
    CHECK(colikv_test::error_code_of([&] { cursor->read_payload(row.chunk_id, *row.payload_bytes - 1, out, "c"); }) ==
          ErrorCode::kCorrupt);
  }
  {  // max_payload_bytes below a payload: its recorded size still reads, its
     // payload either whole or as missing (kCorrupt), never cut
    auto cursor = c.read_chunks(id, 10, 1);
    ChunkListRow row;
    REQUIRE(cursor->next(row));
    REQUIRE(row.payload_bytes);
    CHECK(*row.payload_bytes == static_cast<int64_t>(payloads[0].size()));
    std::vector<uint8_t> out;
    const ErrorCode code =
        colikv_test::error_code_of([&] { cursor->read_payload(row.chunk_id, *row.payload_bytes, out, "c"); });
    CHECK((code == ErrorCode::kCorrupt || (code == ErrorCode::kOk && out == payloads[0])));
  }
  snapshot->commit();
}

TEST_CASE_METHOD(Conformance, "catalog conformance: find_chunk finds a chunk by its model and key, digests_at its "
                              "digest by its chain hash", "[backends][catalog]") {
  put("a", 8, 1);
  put("b", 8, 2);
  Catalog& c = catalog();
  const int64_t mid = model_id();
  const auto a = c.chunk_list(id_of("a"));
  const auto b = c.chunk_list(id_of("b"));
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  for (const auto& s : a) {
    const auto found = c.find_chunk(mid, s.key);
    REQUIRE(found);
    CHECK(found->chunk_id == s.chunk_id);
    CHECK_FALSE(found->evicted);
    CHECK_FALSE(c.find_chunk(mid + 1000, s.key));
    REQUIRE(s.digest);
    CHECK(c.digests_at(mid, s.chain) == std::vector<colikv::detail::ChunkHash>{*s.digest});
    CHECK(c.digests_at(mid + 1000, s.chain).empty());
  }
  CHECK(c.find_chunk(mid, b[0].key)->chunk_id == b[0].chunk_id);
  colikv::detail::ChunkHash unknown{};
  unknown[0] = 1;
  CHECK_FALSE(c.find_chunk(mid, unknown));
  CHECK(c.digests_at(mid, unknown).empty());
  // In a write transaction too (where a backend may lock what it finds).
  auto txn = c.begin(Access::kWrite, "conformance");
  CHECK(c.find_chunk(mid, a[1].key)->chunk_id == a[1].chunk_id);
  CHECK_FALSE(c.find_chunk(mid, unknown));
  txn->commit();
}

TEST_CASE_METHOD(Conformance, "catalog conformance: for_each_token_list gives the token lists of the entries from "
                              "from_seq on that start before end_pos, in seq order", "[backends][catalog]") {
  const auto list = store_a();
  Catalog& c = catalog();
  const int64_t id = id_of("a");
  std::string seen;
  c.for_each_token_list(id, 0, 9, [&](int64_t chunk_id, int64_t n, std::string_view json) {
    seen += std::to_string(chunk_id) + ":" + std::to_string(n) + ":" + std::string(json) + " ";
  });
  std::string expect;
  for (const auto& s : list)
    expect += std::to_string(s.chunk_id) + ":" + std::to_string(s.n_tokens) + ":" +
              tokens_json(10, 1, s.first_pos, s.n_tokens) + " ";
  CHECK(seen == expect);
  seen.clear();
  c.for_each_token_list(id, 0, 8, [&](int64_t, int64_t, std::string_view json) { seen += std::string(json); });
  CHECK(seen == tokens_json(10, 1, 0, 4) + tokens_json(10, 1, 4, 4));
  seen.clear();
  c.for_each_token_list(id, list[1].seq, 10, [&](int64_t, int64_t, std::string_view json) { seen += std::string(json); });
  CHECK(seen == tokens_json(10, 1, 4, 4) + tokens_json(10, 1, 8, 2));
  int calls = 0;
  c.for_each_token_list(id + 1000, 0, 10, [&](int64_t, int64_t, std::string_view) { ++calls; });
  c.for_each_token_list(id, list[2].seq + 1, 10, [&](int64_t, int64_t, std::string_view) { ++calls; });
  c.for_each_token_list(id, 0, 0, [&](int64_t, int64_t, std::string_view) { ++calls; });
  CHECK(calls == 0);
}

}  // namespace conformance
