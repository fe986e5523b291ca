// Every call that stores bytes applies the tenant's quota and the store's
// byte budget as an append does (issue 33, defect 7): a fork or a truncate
// that ends inside a chunk stores a re-encoded piece, and write, copy and
// import store whole conversations. None of them may take a tenant past its
// quota; what is evicted is the least recently used, never the conversation
// the call wrote.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "colikv/coli_kv.h"
#include "colikv/copy.h"
#include "colikv/error.h"
#include "colikv/model.h"
#include "colikv/options.h"
#include "colikv/store.h"
#include "backend.h"
#include "cli_run.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::history;
using colikv_test::loads_as;
using colikv_test::TempDir;
using colikv_test::append;
using colikv_test::tenant_options;

namespace {

int64_t tenant_bytes(Store& s) { return s.stats().total.stored_bytes; }

// Each conversation of the tenant loads as the first positions of `h`
// bit-exact, or raises kEvicted: "" or what else happened.
std::string all_exact_or_evicted(Store& s, const EngineBuffers& h) {
  for (const colikv::ConversationInfo& c : s.list(colikv::ListOptions{1000, 0})) {
    std::string why;
    const ErrorCode code = colikv_test::error_code_of([&] { why = loads_as(s, c.id, h, c.tokens); });
    if (code == ErrorCode::kEvicted) continue;
    if (code != ErrorCode::kOk) return c.id + ": load failed with code " + std::to_string(static_cast<int>(code));
    if (!why.empty()) return c.id + ": " + why;
  }
  return "";
}

// Fork `i` of a 96-position conversation (24 chunks of 4): a cut inside a
// chunk, each at another place, so that each fork stores a piece of its own.
int64_t fork_at(int i) { return 4 * (23 - i) + 1 + i % 3; }

}  // namespace

TEST_CASE("quota writes: forks that each store a piece keep the tenant within its quota",
          "[backends][quotas]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const std::string loc = colikv_test::store_at(dir, "q.db");
  Store s(loc, tenant_options(m, "forker"));
  const EngineBuffers h = history(m, 96, 1);
  append(s, "base", h, 96);
  const int64_t base = tenant_bytes(s);
  const int64_t quota = base + base / 12;  // room for two chunks more, not for twenty pieces
  s.set_tenant_limits({quota, std::nullopt});
  for (int i = 0; i < 20; ++i) {
    s.fork("base", "fork-" + std::to_string(i), fork_at(i));
    INFO("after fork " << i << ": " << tenant_bytes(s) << " bytes against a quota of " << quota);
    REQUIRE(tenant_bytes(s) <= quota);
  }
  CHECK(s.stats().evicted_conversations > 0);
  CHECK(all_exact_or_evicted(s, h) == "");
  CHECK(s.verify().ok());
}

TEST_CASE("quota writes: a truncate whose piece takes the tenant past its quota evicts the least recently used",
          "[backends][quotas]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const std::string loc = colikv_test::store_at(dir, "q.db");
  Store s(loc, tenant_options(m, "cutter"));
  const EngineBuffers old = history(m, 12, 2), h = history(m, 64, 1);
  append(s, "old", old, 12);
  append(s, "base", h, 64);
  s.fork("base", "keep", 64);  // keeps the chunk the truncate cuts: the piece is new bytes
  const int64_t quota = tenant_bytes(s);
  s.set_tenant_limits({quota, std::nullopt});
  s.truncate("base", 61);
  INFO(tenant_bytes(s) << " bytes against a quota of " << quota);
  CHECK(tenant_bytes(s) <= quota);
  CHECK(s.info("old").evicted);
  CHECK_FALSE(s.info("base").evicted);  // the one written is never evicted
  CHECK(loads_as(s, "base", h, 61) == "");
  CHECK(loads_as(s, "keep", h, 64) == "");
  CHECK(s.verify().ok());
}

TEST_CASE("quota writes: write, copy and import into a tenant at its quota evict as an append does",
          "[backends][quotas]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const std::string loc = colikv_test::store_at(dir, "q.db");
  Store s(loc, tenant_options(m, "full"));
  const EngineBuffers old = history(m, 12, 2), h = history(m, 12, 3);
  append(s, "old", old, 12);
  const int64_t quota = tenant_bytes(s);  // room for one such conversation
  s.set_tenant_limits({quota, std::nullopt});
  std::string written;
  SECTION("write") {
    written = "w";
    s.write(written, m, h.tokens.data(), 0, 12, h.source());
  }
  SECTION("copy") {
    written = "c";
    Store src(colikv_test::store_at(dir, "src.db"), tenant_options(m, "source"));
    append(src, written, h, 12);
    colikv::copy_conversation(src, s, written);
  }
  SECTION("import") {
    written = "i";
    const std::string file = dir.file("i.coli_kv");
    colikv_test::write_coli_kv(file, h, 12);
    colikv::ImportOptions io;
    io.id = written;
    colikv::import_coli_kv(s, file, io);
  }
  INFO(written << ": " << tenant_bytes(s) << " bytes against a quota of " << quota);
  CHECK(tenant_bytes(s) <= quota);
  CHECK(s.info("old").evicted);
  CHECK(loads_as(s, written, h, 12) == "");
}

TEST_CASE("quota writes: colikv fork through the CLI keeps the tenant within its quota", "[backends][quotas][cli]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_indexed_model();
  const std::string loc = colikv_test::store_at(dir, "q.db");
  const EngineBuffers h = history(m, 96, 1);
  int64_t quota = 0;
  {
    Store s(loc, tenant_options(m, "cli"));
    append(s, "base", h, 96);
    quota = tenant_bytes(s) + tenant_bytes(s) / 12;
    s.set_tenant_limits({quota, std::nullopt});
  }
  for (int i = 0; i < 20; ++i) {
    const std::vector<std::string> args{"fork", loc, "base", "fork-" + std::to_string(i), "--at",
                                        std::to_string(fork_at(i)), "--tenant", "cli"};
    const colikv_test::Run r = colikv_test::tool(args);
    INFO(colikv_test::describe(args, r));
    REQUIRE(r.code == 0);
  }
  Store s(loc, tenant_options(m, "cli"));
  INFO(tenant_bytes(s) << " bytes against a quota of " << quota);
  CHECK(tenant_bytes(s) <= quota);
  CHECK(all_exact_or_evicted(s, h) == "");
}
