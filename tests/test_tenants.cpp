// Tenants (Options::tenant, docs/design.md "Tenants"): a Store opened for a
// tenant sees only that tenant's conversations, ids are unique within it,
// and chunks are shared, deduplicated and matched only within it.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "colikv/colikv.h"
#include "colikv/coli_kv.h"
#include "colikv/copy.h"
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
using colikv_test::EngineBuffers;
using colikv_test::error_code_of;
using colikv_test::history;
using colikv_test::loads_as;
using colikv_test::TempDir;
using colikv_test::append;
using colikv_test::tenant_options;

namespace {


int64_t sql_int(const std::string& location, const std::string& sql) { return colikv_test::store_int(location, sql); }

// Chunk-list entries of two different conversations that name one chunk.
int64_t shared_links(const std::string& location) {
  return sql_int(location,
                 "SELECT count(*) FROM conversation_chunks a JOIN conversation_chunks b "
                 "ON a.chunk_id = b.chunk_id AND a.conversation_id <> b.conversation_id");
}

}  // namespace

TEST_CASE("tenants: equal prompts and values in two tenants share no chunk and never match across",
          "[backends][tenants]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const std::string loc = colikv_test::store_at(dir, "t.db");
  Store alice(loc, tenant_options(m, "alice"));
  Store bob(loc, tenant_options(m, "bob"));
  const EngineBuffers h = history(m, 10, 1);  // chunks [0,4) [4,8) and the tail [8,10)
  append(alice, "c", h, 10);
  append(bob, "c", h, 10);  // the same id, tokens and values: another tenant's

  // Each tenant holds its own three chunks; none is shared (stats and rows).
  CHECK(alice.stats().total.chunks == 3);
  CHECK(bob.stats().total.chunks == 3);
  CHECK(sql_int(loc, "SELECT count(*) FROM chunks") == 6);
  CHECK(shared_links(loc) == 0);
  CHECK(loads_as(alice, "c", h, 10) == "");
  CHECK(loads_as(bob, "c", h, 10) == "");

  // A third tenant (and the default one) sees none of it.
  Store carol(loc, tenant_options(m, "carol"));
  Store deflt(loc, tenant_options(m, ""));
  for (Store* s : {&carol, &deflt}) {
    CHECK_FALSE(s->exists("c"));
    CHECK(s->conversation_count() == 0);
    CHECK(s->list().empty());
    CHECK(s->stats().total.chunks == 0);
    CHECK(error_code_of([&] { s->info("c"); }) == ErrorCode::kNotFound);
    CHECK(error_code_of([&] { s->verify("c"); }) == ErrorCode::kNotFound);
    // Whole chunks, and a prefix inside the first chunk (the prefix lookup
    // at position 0, before any chain hash).
    for (int64_t len : {int64_t{10}, int64_t{8}, int64_t{3}}) {
      INFO("prompt of " << len);
      CHECK(s->match(m, h.tokens.data(), len).tokens == 0);
      CHECK(s->match_loadable(m, h.tokens.data(), len).tokens == 0);
      EngineBuffers out(m, 10);
      CHECK(s->adopt(m, h.tokens.data(), len, 0, out.tokens.data(), out.target()).tokens == 0);
    }
    // Its own copy of the same conversation shares nothing with theirs either.
    append(*s, "c", h, 10);
    CHECK(s->stats().total.chunks == 3);
  }
  CHECK(shared_links(loc) == 0);
  CHECK(sql_int(loc, "SELECT count(*) FROM chunks") == 12);

  // Within a tenant, sharing and matching are as before.
  CHECK(alice.match(m, h.tokens.data(), 3).tokens == 3);
  CHECK(alice.match(m, h.tokens.data(), 10).tokens == 10);
  const EngineBuffers other = history(m, 10, 2);
  append(bob, "other", other, 10);
  CHECK(alice.match(m, other.tokens.data(), 10).tokens == 0);
  CHECK(bob.match(m, other.tokens.data(), 10).id == "other");
  bob.fork("c", "c-fork", 8);  // shares its two full chunks, within bob
  CHECK(bob.stats().total.chunks == 3 + 3);
  CHECK(shared_links(loc) == 2 * 2);
  CHECK(alice.verify().ok());
  CHECK(bob.verify().ok());
}

TEST_CASE("tenants: every call on a conversation is scoped to the Store's tenant", "[backends][tenants]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string loc = colikv_test::store_at(dir, "t.db");
  Store a(loc, tenant_options(m, "a"));
  Store b(loc, tenant_options(m, "b"));
  const EngineBuffers ha = history(m, 9, 1), hb = history(m, 7, 2);
  append(a, "x", ha, 9);
  append(b, "x", hb, 7);
  append(b, "y", hb, 7);

  CHECK(a.count("x") == 9);
  CHECK(b.count("x") == 7);
  CHECK(a.conversation_count() == 1);
  CHECK(b.conversation_count() == 2);
  CHECK(a.list().size() == 1);
  CHECK(a.info("x").tokens == 9);
  CHECK(error_code_of([&] { a.info("y"); }) == ErrorCode::kNotFound);

  // rename, set_title, fork, truncate, remove: only the Store's own.
  CHECK(error_code_of([&] { a.rename("y", "z"); }) == ErrorCode::kNotFound);
  CHECK(error_code_of([&] { a.fork("y", "y2"); }) == ErrorCode::kNotFound);
  CHECK(error_code_of([&] { a.remove("y"); }) == ErrorCode::kNotFound);
  CHECK(error_code_of([&] { a.truncate("y", 2); }) == ErrorCode::kNotFound);
  CHECK(error_code_of([&] { a.set_title("y", "t"); }) == ErrorCode::kNotFound);
  a.rename("x", "y");  // b's "y" is another conversation
  CHECK(b.count("y") == 7);
  CHECK(loads_as(a, "y", ha, 9) == "");
  a.fork("y", "x", 5);
  a.truncate("x", 4);
  a.set_title("x", "mine");
  CHECK(a.info("x").title == "mine");
  CHECK(b.info("x").title == "");
  CHECK(loads_as(b, "x", hb, 7) == "");
  a.remove("y");
  a.remove("x");
  CHECK(a.conversation_count() == 0);
  CHECK(loads_as(b, "x", hb, 7) == "");
  CHECK(loads_as(b, "y", hb, 7) == "");

  // gc evicts only the Store's tenant's conversations.
  append(a, "big", ha, 9);
  const colikv::EvictionReport r = b.gc(0);
  CHECK(r.conversations.size() == 2);
  CHECK(loads_as(a, "big", ha, 9) == "");
  CHECK(a.stats().evicted_conversations == 0);
  CHECK(b.stats().evicted_conversations == 2);
  CHECK(a.verify().ok());
  CHECK(b.verify().ok());

  // colikv tenants' view: every tenant, whichever Store asks.
  const std::vector<colikv::TenantInfo> t = a.tenants();
  REQUIRE(t.size() == 3);
  CHECK(t[0].name == "");
  CHECK(t[1].name == "a");
  CHECK(t[1].conversations == 1);
  CHECK(t[1].stored_bytes == a.stats().total.stored_bytes);
  CHECK(t[1].stored_bytes > 0);
  CHECK(t[2].name == "b");
  CHECK(t[2].conversations == 2);
  CHECK(t[2].stored_bytes == 0);  // evicted
}

TEST_CASE("tenants: copy, export and import between tenants", "[backends][tenants]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string loc = colikv_test::store_at(dir, "t.db");
  Store a(loc, tenant_options(m, "a"));
  Store b(loc, tenant_options(m, "b"));
  const EngineBuffers h = history(m, 10, 3);
  append(a, "c", h, 10);

  // copy_conversation into another tenant of the same store: equal values, no shared chunk.
  const colikv::CopyResult r = colikv::copy_conversation(a, b, "c");
  CHECK(r.tokens == 10);
  CHECK(loads_as(b, "c", h, 10) == "");
  CHECK(shared_links(loc) == 0);
  CHECK(sql_int(loc, "SELECT count(*) FROM chunks") == 2 * a.stats().total.chunks);

  // export from one tenant, import into another: the same file back.
  const std::string file = dir.file("c.coli_kv"), again = dir.file("again.coli_kv");
  CHECK(colikv::export_coli_kv(a, "c", file) > 0);
  Store c(loc, tenant_options(m, "c"));
  CHECK(error_code_of([&] { colikv::export_coli_kv(c, "c", again); }) == ErrorCode::kNotFound);
  colikv::ImportOptions io;
  io.id = "imported";
  io.weights_id = m.weights_id;
  colikv::import_coli_kv(c, file, io);
  CHECK(loads_as(c, "imported", h, 10) == "");
  CHECK(error_code_of([&] { colikv::export_coli_kv(a, "imported", again); }) == ErrorCode::kNotFound);
  CHECK(colikv::export_coli_kv(c, "imported", again) > 0);
  CHECK(colikv_test::read_file(again) == colikv_test::read_file(file));
  CHECK(shared_links(loc) == 0);
  CHECK(c.match(m, h.tokens.data(), 10).id == "imported");
  CHECK(b.match(m, h.tokens.data(), 10).id == "c");
}

TEST_CASE("tenants: an unknown tenant, or a bad name, is refused and changes nothing", "[backends][tenants]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string loc = colikv_test::store_at(dir, "t.db");
  {
    Store s(loc, tenant_options(m, "known"));
    append(s, "c", history(m, 5, 1), 5);
  }
  const int64_t tenants_before = sql_int(loc, "SELECT count(*) FROM tenants");
  CHECK(tenants_before == 2);

  Options ro = tenant_options(m, "nobody");
  ro.read_only = true;
  try {
    Store s(loc, ro);
    FAIL("opened an unknown tenant read-only");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kNotFound);
    CHECK_THAT(e.what(), Catch::Contains("no such tenant 'nobody'"));
  }
  Options no_create = tenant_options(m, "nobody");
  no_create.create_tenant_if_missing = false;
  CHECK(error_code_of([&] { Store s(loc, no_create); }) == ErrorCode::kNotFound);

  for (const std::string& bad : {std::string("a\nb"), std::string("tab\there"), std::string("del\x7f"),
                                 std::string("esc\x1b[31m"), std::string(256, 't'), std::string("nul\0x", 5)}) {
    INFO("tenant of " << bad.size() << " bytes");
    try {
      Store s(loc, tenant_options(m, bad));
      FAIL("opened a bad tenant name");
    } catch (const colikv::Error& e) {
      CHECK(e.code() == ErrorCode::kInvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains("tenant name"));
      // The name itself is never shown.
      CHECK(std::string(e.what()).find(bad) == std::string::npos);
    }
  }
  // 255 bytes is the longest name.
  { Store s(loc, tenant_options(m, std::string(255, 't'))); }
  CHECK(sql_int(loc, "SELECT count(*) FROM tenants") == tenants_before + 1);
  Store s(loc, tenant_options(m, "known"));
  CHECK(s.count("c") == 5);
}

TEST_CASE("tenants: the C API opens a tenant with COLIKV_TENANT, and an old caller's struct is the default tenant's",
          "[tenants][c_api]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string path = dir.file("c.db");
  const EngineBuffers h = history(m, 6, 4);
  {
    Store s(path, tenant_options(m, "x"));
    append(s, "c", h, 6);
  }
  // An old caller's struct: no COLIKV_TENANT, and what follows its fields is
  // never read (here: a pointer that would crash if it were).
  colikv_options old_caller;
  std::memset(&old_caller, 0xff, sizeof old_caller);
  old_caller.flags = COLIKV_CREATE;
  old_caller.busy_timeout_ms = 0;
  old_caller.max_store_bytes = 0;
  colikv_store* st = nullptr;
  REQUIRE(colikv_open_ex(path.c_str(), &old_caller, &st) == COLIKV_OK);
  CHECK(colikv_count(st, "c") == 0);  // the default tenant's
  colikv_close(st);

  colikv_options o{};
  o.flags = COLIKV_TENANT | COLIKV_READONLY;
  o.tenant = "x";
  REQUIRE(colikv_open_ex(path.c_str(), &o, &st) == COLIKV_OK);
  CHECK(colikv_count(st, "c") == 6);
  colikv_close(st);

  o.tenant = "nobody";
  CHECK(colikv_open_ex(path.c_str(), &o, &st) == COLIKV_ERR_NOT_FOUND);
  CHECK(std::string(colikv_errmsg(st)).find("no such tenant 'nobody'") != std::string::npos);
  colikv_close(st);

  o.flags = COLIKV_TENANT | COLIKV_CREATE;
  o.tenant = "bad\tname";
  CHECK(colikv_open_ex(path.c_str(), &o, &st) == COLIKV_ERR_INVALID);
  CHECK(std::string(colikv_errmsg(st)).find("tenant name") != std::string::npos);
  colikv_close(st);
  CHECK(sql_int(path, "SELECT count(*) FROM tenants") == 2);
}

TEST_CASE("tenants: a chunk list naming another tenant's chunks is corrupt, not another tenant's data",
          "[backends][tenants][bad_stores]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string loc = colikv_test::store_at(dir, "t.db");
  Store alice(loc, tenant_options(m, "alice"));
  Store bob(loc, tenant_options(m, "bob"));
  const EngineBuffers ha = history(m, 8, 1);
  EngineBuffers hb = history(m, 8, 1);
  hb.fill(0, 8, 2);  // the same token ids, bob's own values
  append(alice, "c", ha, 8);
  append(bob, "c", hb, 8);
  // A hostile edit: bob's chunk list names alice's chunks, seq for seq.
  colikv_test::store_exec(
      loc,
      "UPDATE conversation_chunks SET chunk_id = (SELECT cc2.chunk_id FROM conversation_chunks cc2 "
      "JOIN conversations c2 ON c2.conversation_id = cc2.conversation_id JOIN tenants t2 ON t2.tenant_id = c2.tenant_id "
      "WHERE t2.name = 'alice' AND cc2.seq = conversation_chunks.seq) "
      "WHERE conversation_id = (SELECT c.conversation_id FROM conversations c JOIN tenants t ON t.tenant_id = c.tenant_id "
      "WHERE t.name = 'bob' AND c.name = 'c')");
  REQUIRE(shared_links(loc) > 0);
  // Bob's load checks each chunk's key against bob's own chain: alice's
  // values never reach bob's buffers.
  EngineBuffers out(m, 8);
  out.poison();
  try {
    bob.load("c", m, out.tokens.data(), 8, out.target());
    FAIL("loaded another tenant's chunks");
  } catch (const colikv::Error& e) {
    CHECK(e.code() == ErrorCode::kCorrupt);
    CHECK_THAT(e.what(), Catch::Contains("tenant 'bob'"));
  }
  CHECK(colikv_test::untouched_from(out, 0) == "");
  CHECK_FALSE(bob.verify().ok());
  const colikv::VerifyReport va = alice.verify();
  // Alice's conversations are sound; what verify reports is the file's (bob's
  // chunks no list names now), which every tenant's verify checks.
  for (const auto& p : va.problems) {
    INFO(p.what);
    CHECK(p.conversation == "");
    CHECK(p.what == "chunk is not used by any conversation");
  }
  CHECK(loads_as(alice, "c", ha, 8) == "");
  // Nor does bob's match name alice's conversation through the shared rows.
  const colikv::PrefixMatch r = bob.match(m, ha.tokens.data(), 8);
  CHECK((r.tokens == 0 || r.id == "c"));
  CHECK(alice.match(m, ha.tokens.data(), 8).id == "c");
}

TEST_CASE("tenants: a conversation whose tenant row is gone is reported by verify, never hidden",
          "[backends][tenants][bad_stores]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string loc = colikv_test::store_at(dir, "t.db");
  const EngineBuffers h = history(m, 8, 1);
  {
    Store bob(loc, tenant_options(m, "bob"));
    append(bob, "c", h, 8);
  }
  // A hand edit with the foreign key unenforced (SQLite enforces it only on
  // connections that ask; PostgreSQL not under session_replication_role =
  // replica): the row now names a tenant no tenants row holds.
  colikv_test::store_exec(loc, colikv::is_postgres_location(loc)
                                   ? "DO $$ BEGIN SET LOCAL session_replication_role = replica; "
                                     "UPDATE conversations SET tenant_id = 99 WHERE name = 'c'; END $$"
                                   : "UPDATE conversations SET tenant_id = 99 WHERE name = 'c'");
  REQUIRE(sql_int(loc, "SELECT count(*) FROM conversations WHERE tenant_id = 99") == 1);
  Store owner(loc, tenant_options(m, ""));
  const colikv::VerifyReport r = owner.verify();
  CHECK_FALSE(r.ok());
  bool named = false;
  for (const auto& p : r.problems) {
    INFO(p.what);
    named = named || (p.what.find("belongs to tenant_id 99") != std::string::npos &&
                      p.what.find("no tenant can read or delete it") != std::string::npos);
  }
  CHECK(named);
  // Verifying one conversation checks that conversation only.
  append(owner, "d", h, 8);
  CHECK(owner.verify("d").ok());
}

TEST_CASE("tenants: hosts opening one new tenant at once make one tenant and all write into it",
          "[backends][tenants][concurrency]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string loc = colikv_test::store_at(dir, "t.db");
  { Store init(loc, tenant_options(m, "")); }  // the store exists; the tenant does not
  constexpr int kHosts = 4;
  const EngineBuffers h = history(m, 8, 1);
  std::atomic<int> ready{0};
  std::vector<std::string> failures(kHosts);
  std::vector<std::thread> hosts;
  for (int i = 0; i < kHosts; ++i) {
    hosts.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < kHosts) std::this_thread::yield();  // all open at once
      try {
        Store s(loc, tenant_options(m, "new"));
        append(s, "c" + std::to_string(i), h, 8);
      } catch (const std::exception& e) {
        failures[static_cast<size_t>(i)] = e.what();
      }
    });
  }
  for (auto& t : hosts) t.join();
  for (const std::string& f : failures) CHECK(f == "");
  CHECK(sql_int(loc, "SELECT count(*) FROM tenants WHERE name = 'new'") == 1);
  Store s(loc, tenant_options(m, "new"));
  CHECK(s.conversation_count() == kHosts);
  for (int i = 0; i < kHosts; ++i) CHECK(loads_as(s, "c" + std::to_string(i), h, 8) == "");
}
