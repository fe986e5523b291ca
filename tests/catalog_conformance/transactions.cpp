// Catalog conformance: transactions (catalog.h, begin and Transaction::commit).
#include <chrono>

#include "catalog_conformance/conformance.h"

namespace conformance {

TEST_CASE_METHOD(Conformance, "catalog conformance: a committed write is seen by another connection, and a write "
                              "transaction destroyed uncommitted leaves nothing", "[backends][catalog]") {
  Catalog& c = catalog();
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    create_in(c, conversation("kept"));
    txn->commit();
  }
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    create_in(c, conversation("dropped"));
    CHECK(c.find_conversation("dropped"));  // the transaction sees its own work
  }
  CHECK_FALSE(c.find_conversation("dropped"));
  CHECK(c.conversation_count() == 1);
  const auto other = open(options);
  CHECK(other->find_conversation("kept"));
  CHECK_FALSE(other->find_conversation("dropped"));
  CHECK(other->conversation_count() == 1);
}

TEST_CASE_METHOD(Conformance, "catalog conformance: a read transaction reads one snapshot, which another "
                              "connection's commit does not change", "[backends][catalog]") {
  insert(conversation("a"));
  Catalog& c = catalog();
  const auto other = open(options);
  {
    auto snapshot = c.begin(Access::kRead, "conformance");
    REQUIRE(c.conversation_count() == 1);  // the snapshot is taken by the first read
    {
      auto txn = other->begin(Access::kWrite, "conformance");
      NewConversation n = conversation("b");
      create_in(*other, n);
      txn->commit();
    }
    CHECK(c.conversation_count() == 1);
    CHECK_FALSE(c.find_conversation("b"));
    CHECK(c.list_conversations(-1, 0).size() == 1);
    snapshot->commit();
  }
  CHECK(c.conversation_count() == 2);
  CHECK(c.find_conversation("b"));
}

TEST_CASE_METHOD(Conformance, "catalog conformance: nested transactions are savepoints: an inner rollback undoes "
                              "only the inner work", "[backends][catalog]") {
  Catalog& c = catalog();
  const NewConversation outer = conversation("outer"), inner = conversation("inner"), kept = conversation("kept");
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    create_in(c, outer);
    {
      auto savepoint = c.begin(Access::kWrite, "conformance: inner");
      create_in(c, inner);
      CHECK(c.find_conversation("inner"));
    }  // rolled back
    CHECK_FALSE(c.find_conversation("inner"));
    CHECK(c.find_conversation("outer"));
    {
      auto savepoint = c.begin(Access::kWrite, "conformance: inner");
      create_in(c, kept);
      savepoint->commit();  // kept with the outer transaction
    }
    // A call that fails inside its own savepoint leaves the outer transaction usable.
    CHECK(refused(c, [&] { create_in(c, outer); }) == ErrorCode::kConflict);
    c.set_text("outer", colikv::detail::ConversationText::kTitle, "after the failure", 2000);
    txn->commit();
  }
  const auto other = open(options);
  CHECK(other->conversation_count() == 2);
  CHECK_FALSE(other->find_conversation("inner"));
  REQUIRE(other->conversation_info("outer"));
  CHECK(other->conversation_info("outer")->title == "after the failure");
  CHECK(other->find_conversation("kept"));

  // An outer rollback undoes the inner work that committed into it.
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    {
      auto savepoint = c.begin(Access::kWrite, "conformance: inner");
      create_in(c, inner);
      savepoint->commit();
    }
  }
  CHECK_FALSE(c.find_conversation("inner"));
  CHECK(c.conversation_count() == 2);
}

TEST_CASE_METHOD(Conformance, "catalog conformance: a write transaction if free waits for no writer: null where it "
                              "would wait, nested a savepoint", "[backends][catalog]") {
  // Where writers lock rows (PostgreSQL) no outermost one is given: whether
  // it would wait shows only at the row.
  const bool store_lock = !colikv_test::testing_postgres();
  options.busy_timeout_ms = 20000;
  Catalog& c = catalog();
  {
    auto txn = c.begin(Access::kWriteIfFree, "conformance");
    CHECK(static_cast<bool>(txn) == store_lock);
    if (txn) {
      create_in(c, conversation("free"));
      txn->commit();
    }
  }
  CHECK(static_cast<bool>(c.find_conversation("free")) == store_lock);
  const auto other = open(options);
  {
    auto writing = other->begin(Access::kWrite, "conformance: another writer");
    create_in(*other, conversation("other's"));
    const auto asked = std::chrono::steady_clock::now();
    CHECK_FALSE(c.begin(Access::kWriteIfFree, "conformance"));
    // Null at once, not after the busy timeout.
    CHECK(std::chrono::steady_clock::now() - asked < std::chrono::milliseconds(options.busy_timeout_ms / 2));
    writing->commit();
  }
  {
    auto txn = c.begin(Access::kWriteIfFree, "conformance");  // free again; nothing was left begun
    CHECK(static_cast<bool>(txn) == store_lock);
  }
  {
    auto txn = c.begin(Access::kWrite, "conformance");
    {
      auto savepoint = c.begin(Access::kWriteIfFree, "conformance: inner");
      REQUIRE(savepoint);
      create_in(c, conversation("inner"));
    }  // rolled back alone
    CHECK_FALSE(c.find_conversation("inner"));
    create_in(c, conversation("outer"));
    txn->commit();
  }
  CHECK(c.find_conversation("outer"));
  CHECK(c.find_conversation("other's"));
  CHECK_FALSE(c.find_conversation("inner"));
}

TEST_CASE_METHOD(Conformance, "catalog conformance: a write method in a read transaction is refused and changes "
                              "nothing", "[backends][catalog]") {
  insert(conversation("a", 1000));
  Catalog& c = catalog();
  const std::string before = shown(c, "a");
  {
    auto snapshot = c.begin(Access::kRead, "conformance");
    REQUIRE(c.find_conversation("a"));
    ErrorCode code = ErrorCode::kOk;
    try {
      c.set_text("a", colikv::detail::ConversationText::kTitle, "written in a read transaction", 5000);
    } catch (const colikv::Error& e) {
      code = e.code();
    }
    CHECK(code == ErrorCode::kReadOnly);
  }
  CHECK(shown(c, "a") == before);
  CHECK(c.conversation_count() == 1);
}

}  // namespace conformance
