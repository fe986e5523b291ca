// Catalog conformance: the rows of conversations (catalog.h, "Conversations").
#include "catalog_conformance/conformance.h"

#include <algorithm>
#include <chrono>

namespace conformance {

using colikv::detail::ConversationText;

TEST_CASE_METHOD(Conformance, "catalog conformance: a create edit stores the row find_conversation and "
                              "conversation_info read back, and refuses a taken name", "[backends][catalog]") {
  Catalog& c = catalog();
  CHECK_FALSE(c.find_conversation("a"));
  CHECK_FALSE(c.conversation_info("a"));
  const NewConversation n = conversation("a", 1234);
  const auto server_before = server_ms();
  const int64_t id = insert(n);
  const auto server_after = server_ms();
  CHECK(id > 0);

  const auto row = c.find_conversation("a");
  REQUIRE(row);
  CHECK(row->id == id);
  CHECK(row->name == "a");
  CHECK(row->model_id == n.model_id);
  CHECK(row->count == 0);
  CHECK(row->generation == 0);
  CHECK(row->precision == "f32");
  const auto info = c.conversation_info("a");
  REQUIRE(info);
  CHECK(info->name == "a");
  CHECK(info->model_id == n.model_id);
  CHECK(info->count == 0);
  CHECK(info->title == "title of a");
  CHECK(info->metadata == "{\"k\":1}");
  CHECK(info->parent == "");
  CHECK(info->forked_at == 0);
  CHECK(info->created_ms == 1234);
  CHECK(info->updated_ms == 1234);
  if (server_before) {  // PostgreSQL: the server's clock at the insert
    CHECK(info->last_used_ms >= *server_before);
    CHECK(info->last_used_ms <= *server_after);
  } else {
    CHECK(info->last_used_ms == 1234);
  }
  CHECK(info->stored_bytes == 0);
  CHECK_FALSE(info->evicted);
  CHECK(info->precision == "f32");
  CHECK(c.chunk_list(id).empty());

  // Names are exact: neither case nor a prefix finds it.
  CHECK_FALSE(c.find_conversation("A"));
  CHECK_FALSE(c.find_conversation(""));
  CHECK_FALSE(c.conversation_info("a "));

  const std::string before = shown(c, "a");
  NewConversation again = conversation("a", 9999);
  again.title = "another";
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    CHECK(refused(c, [&] { create_in(c, again); }) == ErrorCode::kConflict);
    txn->commit();
  }
  CHECK(shown(c, "a") == before);
  CHECK(c.conversation_count() == 1);
}

TEST_CASE_METHOD(Conformance, "catalog conformance: a fork's conversation_info names its parent and fork "
                              "point, and has its parent's model, precision, title and metadata", "[backends][catalog]") {
  put("p", 10, 1);
  {
    Catalog& c = catalog();
    auto txn = c.begin(Access::kWrite, "conformance");
    REQUIRE(c.set_text("p", ConversationText::kTitle, "title of p", 1500));
    REQUIRE(c.set_text("p", ConversationText::kMetadata, "{\"k\":1}", 1500));
    txn->commit();
  }
  fork("p", "f", 8);
  Catalog& c = catalog();
  const auto parent = c.find_conversation("p");
  const auto row = c.find_conversation("f");
  REQUIRE(parent);
  REQUIRE(row);
  CHECK(row->id != parent->id);
  CHECK(row->count == 8);
  CHECK(row->model_id == model_id());
  CHECK(row->precision == parent->precision);
  const auto info = c.conversation_info("f");
  REQUIRE(info);
  CHECK(info->parent == "p");
  CHECK(info->forked_at == 8);
  CHECK(info->count == 8);
  CHECK(info->title == "title of p");
  CHECK(info->metadata == "{\"k\":1}");
  CHECK(info->model_id == model_id());
  const auto parent_info = c.conversation_info("p");
  REQUIRE(parent_info);
  CHECK(parent_info->parent == "");
  CHECK(parent_info->forked_at == 0);
  CHECK(parent_info->count == 10);

  // Another tenant sees neither.
  const auto other = open(tenant("other"));
  CHECK_FALSE(other->conversation_info("f"));
  CHECK(other->conversation_count() == 0);
}

TEST_CASE_METHOD(Conformance, "catalog conformance: a removal edit drops the row and its chunk list, frees "
                              "only what it names, and a fork's parent then reads as none: refused at another "
                              "generation or with another change, it leaves all as it was", "[backends][catalog]") {
  put("p", 10, 1);
  fork("p", "f", 8);
  Catalog& c = catalog();
  const int64_t parent = id_of("p");
  const auto chunks = c.chunk_list(parent);
  REQUIRE(chunks.size() >= 3);
  const std::string parent_before = shown(c, "p");
  const std::string fork_before = shown(c, "f");
  const auto unchanged = [&] {
    CHECK(shown(c, "p") == parent_before);
    CHECK(shown(c.chunk_list(parent)) == shown(chunks));
    CHECK(shown(c, "f") == fork_before);
    CHECK(c.strays().unused_chunks.empty());
    for (const ChunkSummary& s : chunks) CHECK(c.read_chunk(s.chunk_id));
  };
  std::vector<int64_t> ids;
  for (const ChunkSummary& s : chunks) ids.push_back(s.chunk_id);

  {  // rolled back: everything stays
    auto txn = c.begin(Access::kWrite, "conformance");
    c.apply(removal("p", ids), "conformance");
    CHECK_FALSE(c.find_conversation("p"));
  }
  unchanged();

  TurnEdit stale = removal("p", ids);  // read before another writer's change
  ++stale.generation;
  CHECK(refused(c, [&] { c.apply(stale, "conformance"); }) == ErrorCode::kConflict);
  unchanged();
  CHECK(refused(c, [&] {
          TurnEdit e = removal("p", ids);
          e.name = "absent";
          c.apply(e, "conformance");
        }) == ErrorCode::kConflict);
  unchanged();
  // A removal holds nothing else: a count, a cut or a link is refused.
  TurnEdit counted = removal("p", ids);
  counted.count = 0;
  CHECK(refused(c, [&] { c.apply(counted, "conformance"); }) == ErrorCode::kInternal);
  TurnEdit cut = removal("p", ids);
  cut.unlink_from = 0;
  CHECK(refused(c, [&] { c.apply(cut, "conformance"); }) == ErrorCode::kInternal);
  TurnEdit linked = removal("p", ids);
  linked.links.push_back({0, chunks[0].chunk_id});
  CHECK(refused(c, [&] { c.apply(linked, "conformance"); }) == ErrorCode::kInternal);
  unchanged();

  // Applied without frees: its chunks stay, unused where the fork does not share them.
  const colikv::detail::TurnResult r = c.apply(removal("p"), "conformance");
  CHECK(r.conversation_id == parent);
  CHECK(r.chunk_ids.empty());
  CHECK_FALSE(c.find_conversation("p"));
  CHECK_FALSE(c.conversation_info("p"));
  CHECK(c.chunk_list(parent).empty());
  CHECK(c.conversation_count() == 1);
  for (const ChunkSummary& s : chunks) CHECK(c.read_chunk(s.chunk_id));  // the chunks stay
  // Those the fork does not share are now unused.
  const auto fork_list = c.chunk_list(id_of("f"));
  std::vector<int64_t> unshared;
  for (const ChunkSummary& s : chunks) {
    bool shared = false;
    for (const ChunkSummary& t : fork_list) shared = shared || t.chunk_id == s.chunk_id;
    if (!shared) unshared.push_back(s.chunk_id);
  }
  REQUIRE_FALSE(unshared.empty());
  std::vector<int64_t> unused;
  for (const auto& u : c.strays().unused_chunks) unused.push_back(u.chunk_id);
  std::sort(unused.begin(), unused.end());
  std::sort(unshared.begin(), unshared.end());
  CHECK(unused == unshared);
  // The fork keeps its rows; its parent reads as none.
  const auto info = c.conversation_info("f");
  REQUIRE(info);
  CHECK(info->parent == "");
  CHECK(info->forked_at == 8);
  CHECK(info->count == 8);
  for (const auto& l : c.lineage())
    if (l.name == "f") CHECK(l.parent_id == 0);

  // Applied with frees: what it names goes unless a list names it still.
  std::vector<int64_t> fork_ids;
  for (const ChunkSummary& s : fork_list) fork_ids.push_back(s.chunk_id);
  c.apply(removal("f", fork_ids), "conformance");
  CHECK(c.conversation_count() == 0);
  for (int64_t id : fork_ids) CHECK_FALSE(c.read_chunk(id));
  unused.clear();
  for (const auto& u : c.strays().unused_chunks) unused.push_back(u.chunk_id);
  std::sort(unused.begin(), unused.end());
  CHECK(unused == unshared);  // not named: left for later
}

TEST_CASE_METHOD(Conformance, "catalog conformance: set_text sets one column and bumps the generation, false for "
                              "no such conversation, kConflict renaming onto a taken name", "[backends][catalog]") {
  Catalog& c = catalog();
  insert(conversation("a", 1000));
  insert(conversation("b", 1000));
  used_at("a", 1000);  // exactly: a catalog takes it from its backend's clock
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    CHECK(c.set_text("a", ConversationText::kTitle, "new title", 2000));
    CHECK(c.set_text("a", ConversationText::kMetadata, "{\"x\":[1,2]}", 3000));
    txn->commit();
  }
  auto info = c.conversation_info("a");
  REQUIRE(info);
  CHECK(info->title == "new title");
  CHECK(info->metadata == "{\"x\":[1,2]}");
  CHECK(info->updated_ms == 3000);
  CHECK(info->last_used_ms == 1000);  // a change of text is no use
  CHECK(info->created_ms == 1000);
  CHECK(c.find_conversation("a")->generation == 2);

  const std::string b_before = shown(c, "b");
  const std::string a_before = shown(c, "a");
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    CHECK_FALSE(c.set_text("absent", ConversationText::kTitle, "x", 4000));
    CHECK(refused(c, [&] { c.set_text("a", ConversationText::kName, "b", 4000); }) == ErrorCode::kConflict);
    txn->commit();
  }
  CHECK(shown(c, "a") == a_before);
  CHECK(shown(c, "b") == b_before);
  CHECK_FALSE(c.find_conversation("absent"));

  const int64_t id = id_of("a");
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    CHECK(c.set_text("a", ConversationText::kName, "renamed", 5000));
    txn->commit();
  }
  CHECK_FALSE(c.find_conversation("a"));
  REQUIRE(c.find_conversation("renamed"));
  CHECK(c.find_conversation("renamed")->id == id);
  CHECK(c.find_conversation("renamed")->generation == 3);
  CHECK(c.conversation_info("renamed")->title == "new title");
}

TEST_CASE_METHOD(Conformance, "catalog conformance: touch_used_if_idle sets only the last use, outside a "
                              "transaction, never throws and does not wait for a writer", "[backends][catalog]") {
  Catalog& c = catalog();
  insert(conversation("a", 1000));
  used_at("a", 1000);
  // The last use it sets: the ms passed on SQLite; on PostgreSQL the
  // server's clock (COLIKV_PG_SERVER_MS), read around the call.
  const auto touched = [&](int64_t now_ms, int64_t& used) {
    const auto before = server_ms();
    c.touch_used_if_idle("a", now_ms);
    const auto after = server_ms();
    used = c.conversation_info("a")->last_used_ms;
    if (before) return *before <= used && used <= *after;
    return used == now_ms;
  };
  int64_t first = 0;
  CHECK(touched(8000, first));
  CHECK(first != 1000);
  auto info = c.conversation_info("a");
  REQUIRE(info);
  CHECK(info->updated_ms == 1000);
  CHECK(c.find_conversation("a")->generation == 0);
  c.touch_used_if_idle("absent", 8000);  // nothing to touch: no error
  CHECK_FALSE(c.find_conversation("absent"));
  CHECK(c.conversation_count() == 1);

  // Another connection writing the conversation: no error, and no wait for it.
  const auto writer = open(options);
  std::optional<int64_t> before, after;
  {
    auto txn = writer->begin(Access::kWrite, "conformance");
    REQUIRE(writer->find_conversation("a"));  // a writer's find locks the row
    REQUIRE(writer->set_text("a", ConversationText::kTitle, "by the writer", 8500));
    const auto start = std::chrono::steady_clock::now();
    before = server_ms();
    c.touch_used_if_idle("a", 9000);
    after = server_ms();
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(options.busy_timeout_ms / 2));
    txn->commit();
  }
  // Best effort: it took its time or left the one before; never anything else.
  const int64_t used = c.conversation_info("a")->last_used_ms;
  const bool took = before ? *before <= used && used <= *after : used == 9000;
  CHECK((used == first || took));
  CHECK(c.conversation_info("a")->title == "by the writer");
}

TEST_CASE_METHOD(Conformance, "catalog conformance: list_conversations pages the tenant's conversations most "
                              "recently used first, conversation_count counts them", "[backends][catalog]") {
  Catalog& c = catalog();
  CHECK(c.conversation_count() == 0);
  CHECK(c.list_conversations(-1, 0).empty());
  insert(conversation("a", 1000));
  insert(conversation("b", 1000));  // same last use as a, a larger id: listed first
  insert(conversation("c", 3000));
  insert(conversation("d", 2000));
  // The last uses set exactly: a catalog takes them from its backend's clock.
  used_at("a", 1000);
  used_at("b", 1000);
  used_at("c", 3000);
  used_at("d", 2000);
  {  // another tenant's conversation is in neither
    const auto other = open(tenant("other"));
    auto txn = other->begin(Access::kWrite, "conformance");
    NewConversation n = conversation("e", 5000);
    create_in(*other, n);
    txn->commit();
  }
  CHECK(c.conversation_count() == 4);
  const auto names = [](const std::vector<ConversationInfoRow>& rows) {
    std::string s;
    for (const auto& r : rows) s += r.name;
    return s;
  };
  CHECK(names(c.list_conversations(-1, 0)) == "cdba");
  CHECK(names(c.list_conversations(2, 0)) == "cd");
  CHECK(names(c.list_conversations(2, 2)) == "ba");
  CHECK(names(c.list_conversations(10, 3)) == "a");
  CHECK(names(c.list_conversations(-1, 4)).empty());
  CHECK(names(c.list_conversations(0, 0)).empty());
  const auto page = c.list_conversations(1, 1);
  REQUIRE(page.size() == 1);
  CHECK(shown(std::optional<ConversationInfoRow>(page[0])) == shown(c.conversation_info("d")));
}

}  // namespace conformance
