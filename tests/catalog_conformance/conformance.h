// The catalog conformance suite (tests/catalog_conformance/, one file per
// role of src/catalog/catalog.h): what each call returns, what it refuses, and what
// it leaves untouched when it fails, stated once and run on every backend.
// Its cases are tagged [backends], so that tests/CMakeLists.txt runs each on
// SQLite and again, named "postgres: ...", on the test server; a new backend
// starts by passing them.
//
// The cases reach the store through catalog.h alone, except for chunks: those
// come in through the public Store (append, fork), so that the suite does not
// depend on how a backend's writes of a turn are shaped. This header is the
// only place that knows how a case gets its catalog and its chunks, so that
// the cases stay as they are when those interfaces change.
#ifndef COLIKV_TESTS_CATALOG_CONFORMANCE_CONFORMANCE_H
#define COLIKV_TESTS_CATALOG_CONFORMANCE_CONFORMANCE_H

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend.h"
#include "catalog/catalog.h"
#include "colikv/error.h"
#include "colikv/store.h"
#include "test_support.h"
#include "catalog/turn_edit.h"

namespace conformance {

using colikv::ErrorCode;
using colikv::detail::Catalog;
using colikv::detail::ChunkSummary;
using colikv::detail::ConversationInfoRow;
using colikv::detail::NewConversation;
using colikv::detail::TurnEdit;
using Access = colikv::detail::Catalog::Access;

// The code of the colikv::Error that f throws, in a savepoint of its own that
// is then rolled back (a server's transaction takes no statement after an
// error until then); kOk when f throws nothing. Anything but a colikv::Error
// goes through (error_code_of) and fails the case: no backend's own exception
// crosses catalog.h.
template <class F>
ErrorCode refused(Catalog& catalog, F&& f) {
  const auto savepoint = catalog.begin(Access::kWrite, "conformance: a call that may fail");
  return colikv_test::error_code_of(f);
}

// Creates conversation n through catalog.apply, as a create edit of no chunk:
// in a transaction of its own, or as a savepoint of the one open; its id.
inline int64_t create_in(Catalog& catalog, const NewConversation& n) {
  TurnEdit e;
  e.name = n.name;
  e.create = n;
  e.model_id = n.model_id;
  e.now_ms = n.now_ms;
  return catalog.apply(e, "conformance: creating a conversation").conversation_id;
}

// A store on the backend under test (tests/backend.h) of tiny_model, chunks of
// 4 positions: a catalog opened on it, and chunks written into it through a
// Store. The two are never open at once: each closes the other first.
class Conformance : public colikv_test::StoreFixture {
 public:
  Conformance() : StoreFixture(colikv_test::tiny_model(), 4, "conformance.db") {}

  // The catalog at `path` with `options`, opened on first use.
  Catalog& catalog() {
    if (!catalog_) {
      close();
      catalog_ = open(options);
    }
    return *catalog_;
  }
  void close_catalog() { catalog_.reset(); }
  // Another catalog on the same store (another tenant's, a second connection).
  std::unique_ptr<Catalog> open(const colikv::Options& o) { return colikv::detail::open_catalog(path, o); }
  // The options of tenant `tenant` on this store.
  colikv::Options tenant(const std::string& name) const {
    colikv::Options o = options;
    o.tenant = name;
    return o;
  }

  // Positions [0, n) of history(n, seed) stored as conversation `id` (appended
  // after what it holds) through a Store of `o` (this store's by default).
  void put(const std::string& id, int64_t n, uint32_t seed) { put_as(options, id, n, seed); }
  void put_as(const colikv::Options& o, const std::string& id, int64_t n, uint32_t seed) {
    close_catalog();
    close();
    colikv::Store s(path, o);
    const colikv_test::EngineBuffers h = history(n, seed);
    s.append(id, model, h.tokens.data(), n, h.source());
  }
  void fork(const std::string& src, const std::string& dst, int64_t len) {
    close_catalog();
    close();
    colikv::Store(path, options).fork(src, dst, len);
  }
  // The stores most cases read, written through a Store: "a", positions
  // [0, 10) of history(10, 1) in 3 chunks of 4, 4 and 2 positions; with
  // "f", a's fork at 8, sharing a's first two chunks; with "x" of tenant
  // "other", positions [0, 4) of history(4, 3). Each returns a's chunk list,
  // checked to hold its 3 chunks.
  std::vector<ChunkSummary> store_a() {
    put("a", 10, 1);
    return chunks_of_a();
  }
  std::vector<ChunkSummary> store_a_and_f() {
    put("a", 10, 1);
    fork("a", "f", 8);
    return chunks_of_a();
  }
  std::vector<ChunkSummary> store_a_f_and_x() {
    store_a_and_f();
    put_as(tenant("other"), "x", 4, 3);
    return chunks_of_a();
  }

  // The token ids history(n, seed) stores, as for_each_token_list reads them.
  std::string tokens_json(int64_t n, uint32_t seed, int64_t from, int64_t count) const {
    const colikv_test::EngineBuffers h = history(n, seed);
    std::string s = "[";
    for (int64_t i = from; i < from + count; ++i) s += (i > from ? "," : "") + std::to_string(h.tokens[i]);
    return s + "]";
  }

  // The model's id, recorded (committed) when the store has none.
  int64_t model_id() {
    Catalog& c = catalog();
    if (auto id = c.find_model_id(model.to_string())) return *id;
    auto txn = c.begin(Access::kWrite, "conformance: recording the model");
    c.insert_model(model, 4, 1);
    txn->commit();
    const auto id = c.find_model_id(model.to_string());
    REQUIRE(id);
    return *id;
  }
  NewConversation conversation(const std::string& name, int64_t now_ms = 1000) {
    NewConversation n;
    n.name = name;
    n.model_id = model_id();
    n.precision = "f32";
    n.title = "title of " + name;
    n.metadata = "{\"k\":1}";
    n.now_ms = now_ms;
    return n;
  }
  // Creates a conversation through Catalog::apply (a create edit, no chunks),
  // committed; its id.
  int64_t insert(const NewConversation& n) { return create_in(catalog(), n); }
  // The edit that removes a conversation as it is now (at its generation),
  // freeing `free`; fails the case when there is none.
  TurnEdit removal(const std::string& name, std::vector<int64_t> free = {}) {
    const auto row = catalog().find_conversation(name);
    REQUIRE(row);
    TurnEdit e;
    e.name = name;
    e.conversation_id = row->id;
    e.generation = row->generation;
    e.remove = true;
    e.free = std::move(free);
    e.now_ms = 2000;
    return e;
  }
  // A conversation's id; fails the case when there is none.
  int64_t id_of(const std::string& name) {
    const auto row = catalog().find_conversation(name);
    REQUIRE(row);
    return row->id;
  }
  // Sets a conversation's last-used time exactly, committed, through SQL: a
  // catalog sets it from its backend's clock (PostgreSQL: the server's).
  // The catalog stays open: the statement runs on a connection of its own.
  void used_at(const std::string& name, int64_t ms) {
    colikv_test::store_exec(path, "UPDATE conversations SET last_used_ms = " + std::to_string(ms) + " WHERE name = ?",
                            {name});
  }
  // The clock a catalog reads a last use from: on PostgreSQL the server's
  // (COLIKV_PG_SERVER_MS), read now; none on SQLite, which takes the caller's.
  std::optional<int64_t> server_ms() {
    if (!colikv_test::testing_postgres()) return std::nullopt;
    return colikv_test::store_int(path, "SELECT (extract(epoch FROM clock_timestamp())*1000)::bigint");
  }

 private:
  std::vector<ChunkSummary> chunks_of_a() {
    auto list = catalog().chunk_list(id_of("a"));
    REQUIRE(list.size() == 3);
    return list;
  }

  std::unique_ptr<Catalog> catalog_;
};

// A conversation's rows as text, to compare before and after a call that failed.
inline std::string shown(const std::optional<ConversationInfoRow>& r) {
  if (!r) return "(none)";
  return r->name + "|" + std::to_string(r->model_id) + "|" + std::to_string(r->count) + "|" + r->title + "|" +
         r->metadata + "|" + r->parent + "|" + std::to_string(r->forked_at) + "|" + std::to_string(r->created_ms) +
         "|" + std::to_string(r->updated_ms) + "|" + std::to_string(r->last_used_ms) + "|" +
         std::to_string(r->stored_bytes) + "|" + (r->evicted ? "evicted" : "kept") + "|" + r->precision;
}
inline std::string shown(const std::vector<ChunkSummary>& list) {
  std::string s;
  for (const ChunkSummary& c : list)
    s += std::to_string(c.seq) + ":" + std::to_string(c.chunk_id) + "@" + std::to_string(c.first_pos) + "+" +
         std::to_string(c.n_tokens) + (c.evicted ? "e" : "") + " ";
  return s;
}
// What Catalog::conversation_info and find_conversation say of `name`, and its chunk list.
inline std::string shown(Catalog& c, const std::string& name) {
  const auto row = c.find_conversation(name);
  if (!row) return shown(c.conversation_info(name));
  return shown(c.conversation_info(name)) + " gen " + std::to_string(row->generation) + " list " +
         shown(c.chunk_list(row->id));
}

}  // namespace conformance

#endif  // COLIKV_TESTS_CATALOG_CONFORMANCE_CONFORMANCE_H
