// Catalog conformance: the rows of conversations (catalog.h, "Conversations").
#include "catalog_conformance/conformance.h"

#include <algorithm>
#include <chrono>

namespace conformance {

using colikv::detail::ConversationText;

TEST_CASE_METHOD(Conformance, "catalog conformance: insert_conversation stores the row find_conversation and "
                              "conversation_info read back, and refuses a taken name", "[backends][catalog]") {
  Catalog& c = catalog();
  CHECK_FALSE(c.find_conversation("a"));
  CHECK_FALSE(c.conversation_info("a"));
  const NewConversation n = conversation("a", 1234);
  const int64_t id = insert(n);
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
  CHECK(info->last_used_ms == 1234);
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
    CHECK(refused(c, [&] { c.insert_conversation(again); }) == ErrorCode::kConflict);
    txn->commit();
  }
  CHECK(shown(c, "a") == before);
  CHECK(c.conversation_count() == 1);
}

TEST_CASE_METHOD(Conformance, "catalog conformance: insert_fork takes its parent's model, precision, title and "
                              "metadata, and refuses a taken name or a missing parent", "[backends][catalog]") {
  Catalog& c = catalog();
  const int64_t parent = insert(conversation("p", 1000));
  insert(conversation("taken", 1000));
  NewFork f;
  f.name = "f";
  f.parent_id = parent;
  f.count = 3;
  f.now_ms = 2000;
  int64_t fork_id = 0;
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    fork_id = c.insert_fork(f);
    txn->commit();
  }
  CHECK(fork_id > 0);
  CHECK(fork_id != parent);
  const auto row = c.find_conversation("f");
  REQUIRE(row);
  CHECK(row->id == fork_id);
  CHECK(row->count == 3);
  CHECK(row->model_id == model_id());
  CHECK(row->precision == "f32");
  const auto info = c.conversation_info("f");
  REQUIRE(info);
  CHECK(info->parent == "p");
  CHECK(info->forked_at == 3);
  CHECK(info->title == "title of p");
  CHECK(info->metadata == "{\"k\":1}");
  CHECK(info->created_ms == 2000);
  CHECK(info->updated_ms == 2000);
  CHECK(info->last_used_ms == 2000);
  CHECK(c.chunk_list(fork_id).empty());  // the caller links its chunks

  const std::string taken = shown(c, "taken");
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    NewFork dup = f;
    dup.name = "taken";
    CHECK(refused(c, [&] { c.insert_fork(dup); }) == ErrorCode::kConflict);
    NewFork orphan = f;
    orphan.name = "orphan";
    orphan.parent_id = fork_id + 1000;
    CHECK(refused(c, [&] { c.insert_fork(orphan); }) == ErrorCode::kNotFound);
    txn->commit();
  }
  CHECK(shown(c, "taken") == taken);
  CHECK_FALSE(c.find_conversation("orphan"));
  CHECK(c.conversation_count() == 3);

  // Another tenant's conversation is no parent of this tenant's fork.
  const auto other = open(tenant("other"));
  {
    auto txn = other->begin(Access::kWrite, "conformance");
    NewFork theirs = f;
    theirs.name = "theirs";
    CHECK(refused(*other, [&] { other->insert_fork(theirs); }) == ErrorCode::kNotFound);
    txn->commit();
  }
  CHECK(other->conversation_count() == 0);
  CHECK_FALSE(c.find_conversation("theirs"));
}

TEST_CASE_METHOD(Conformance, "catalog conformance: delete_conversation drops the row and its chunk list but not "
                              "its chunks, and a fork's parent then reads as none", "[backends][catalog]") {
  put("p", 10, 1);
  fork("p", "f", 8);
  Catalog& c = catalog();
  const int64_t parent = id_of("p");
  const auto chunks = c.chunk_list(parent);
  REQUIRE(chunks.size() >= 3);
  const std::string fork_before = shown(c, "f");

  {  // rolled back: everything stays
    auto txn = c.begin(Access::kWrite, "conformance");
    c.delete_conversation(parent);
    CHECK_FALSE(c.find_conversation("p"));
  }
  CHECK(c.find_conversation("p"));
  CHECK(shown(c.chunk_list(parent)) == shown(chunks));
  CHECK(c.unused_chunks().empty());

  {
    auto txn = c.begin(Access::kWrite, "conformance");
    c.delete_conversation(parent);
    txn->commit();
  }
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
  for (const auto& u : c.unused_chunks()) unused.push_back(u.chunk_id);
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
}

TEST_CASE_METHOD(Conformance, "catalog conformance: set_text sets one column and bumps the generation, false for "
                              "no such conversation, kConflict renaming onto a taken name", "[backends][catalog]") {
  Catalog& c = catalog();
  insert(conversation("a", 1000));
  insert(conversation("b", 1000));
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

TEST_CASE_METHOD(Conformance, "catalog conformance: touch_used sets only the last use, touch_used_if_idle too "
                              "outside a transaction and never throws", "[backends][catalog]") {
  Catalog& c = catalog();
  const int64_t id = insert(conversation("a", 1000));
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    c.touch_used(id, 7000);
    txn->commit();
  }
  auto info = c.conversation_info("a");
  REQUIRE(info);
  CHECK(info->last_used_ms == 7000);
  CHECK(info->updated_ms == 1000);
  CHECK(c.find_conversation("a")->generation == 0);

  c.touch_used_if_idle("a", 8000);
  CHECK(c.conversation_info("a")->last_used_ms == 8000);
  CHECK(c.find_conversation("a")->generation == 0);
  c.touch_used_if_idle("absent", 8000);  // nothing to touch: no error
  CHECK_FALSE(c.find_conversation("absent"));
  CHECK(c.conversation_count() == 1);

  // Another connection writing the conversation: no error, and no wait for it.
  const auto writer = open(options);
  {
    auto txn = writer->begin(Access::kWrite, "conformance");
    REQUIRE(writer->find_conversation("a"));  // a writer's find locks the row
    writer->touch_used(id, 8500);
    const auto start = std::chrono::steady_clock::now();
    c.touch_used_if_idle("a", 9000);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(options.busy_timeout_ms / 2));
    txn->commit();
  }
  // Best effort: it took 9000 or left the writer's 8500; never anything else.
  const int64_t used = c.conversation_info("a")->last_used_ms;
  CHECK((used == 8500 || used == 9000));
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
  {  // another tenant's conversation is in neither
    const auto other = open(tenant("other"));
    auto txn = other->begin(Access::kWrite, "conformance");
    NewConversation n = conversation("e", 5000);
    other->insert_conversation(n);
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
