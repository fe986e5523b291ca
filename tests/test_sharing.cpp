// Chunk sharing never changes what a conversation reads (design invariant 7):
// conversations with the same model and token ids but other values ("twins":
// another engine build, a non-deterministic kernel, a fine-tune without a
// weights id) each load exactly their own values through append, truncate,
// fork, eviction and re-save, while equal values (forks, shared prompts)
// are still stored once.
#include <catch2/catch.hpp>

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "colikv/coli_kv.h"
#include "colikv/error.h"
#include "colikv/model.h"
#include "colikv/options.h"
#include "colikv/store.h"
#include "backend.h"
#include "test_support.h"

using colikv_test::loads_as;

using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv::Options;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::from_bits;
using colikv_test::TempDir;
using colikv_test::history;

namespace {

constexpr int64_t kChunk = 4;

Options small_chunks(const ModelSignature& m) { return colikv_test::chunked_options(m, kChunk); }

// A copy of b with buffers of its own (a copied EngineBuffers would point at b's).
EngineBuffers copy_of(const EngineBuffers& b) {
  EngineBuffers c(b.model, b.capacity);
  c.tokens = b.tokens;
  for (size_t l = 0; l < b.lc.size(); ++l) {
    std::copy(b.lc[l].begin(), b.lc[l].end(), c.lc[l].begin());
    std::copy(b.rc[l].begin(), b.rc[l].end(), c.rc[l].begin());
    std::copy(b.ic[l].begin(), b.ic[l].end(), c.ic[l].begin());
  }
  return c;
}

// The same token ids as b, other values from `from` on.
EngineBuffers twin_of(const EngineBuffers& b, int64_t from, uint32_t seed) {
  EngineBuffers t = copy_of(b);
  t.fill(from, t.capacity, seed);
  return t;
}

// Sets value j of layer 0's kv_lora plane at position p to the float with these bits.
void set_bits(EngineBuffers& b, int64_t p, int64_t j, uint32_t bits) {
  b.lc[0][static_cast<size_t>(p * b.model.kv_lora + j)] = from_bits(bits);
}


int64_t sql_int(const std::string& path, const std::string& sql) { return colikv_test::store_int(path, sql); }

// Makes the conversations' last-used times increase in the order given.
void set_last_used(const std::string& path, const std::vector<std::string>& oldest_first) {
  for (size_t i = 0; i < oldest_first.size(); ++i)
    colikv_test::store_exec(path, "UPDATE conversations SET last_used_ms = ? WHERE name = ?",
                            {std::to_string(i + 1), oldest_first[i]});
}

int64_t chunk_rows(Store& s) { return s.stats().total.chunks; }

ErrorCode load_error(Store& s, const std::string& id, const ModelSignature& m, int64_t n) {
  EngineBuffers out(m, n);
  return colikv_test::error_code_of([&] { s.load(id, m, out.tokens.data(), n, out.target()); });
}

}  // namespace

TEST_CASE("sharing: equal token ids with other values are never shared", "[backends][sharing]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_indexed_model();
  Store s(colikv_test::store_at(dir, "s.db"), small_chunks(m));
  const EngineBuffers a = history(m, 10, 1);
  append(s, "a", a, 10);

  SECTION("all values differ") {
    const EngineBuffers b = twin_of(a, 0, 2);
    append(s, "b", b, 10);
    CHECK(loads_as(s, "b", b, 10) == "");
    CHECK(loads_as(s, "a", a, 10) == "");
    CHECK(chunk_rows(s) == 6);
  }
  SECTION("one value differs by a NaN payload, a sign of zero or a denormal") {
    struct Case {
      const char* what;
      uint32_t a_bits, b_bits;
    };
    for (const Case& c : {Case{"NaN payload", 0x7fc00001u, 0x7fc00002u}, Case{"signalling NaN", 0x7f800001u, 0x7fc00003u},
                          Case{"negative NaN", 0xffc00000u, 0x7fc00000u}, Case{"-0.0", 0x00000000u, 0x80000000u},
                          Case{"denormal", 0x00000001u, 0x00000002u}, Case{"negative denormal", 0x807fffffu, 0x007fffffu}}) {
      INFO(c.what);
      const std::string ida = std::string("a-") + c.what, idb = std::string("b-") + c.what;
      EngineBuffers x = copy_of(a), y = copy_of(a);
      set_bits(x, 5, 3, c.a_bits);  // chunk 1 of 3
      set_bits(y, 5, 3, c.b_bits);
      append(s, ida, x, 10);
      append(s, idb, y, 10);
      CHECK(loads_as(s, ida, x, 10) == "");
      CHECK(loads_as(s, idb, y, 10) == "");
    }
    CHECK(loads_as(s, "a", a, 10) == "");
    // Chunks 0 and 2 hold the same values everywhere: stored once. Chunk 1
    // is a's, and each case's own two.
    CHECK(chunk_rows(s) == 3 + 6 * 2);
  }
  SECTION("bf16 conversations share when the rounded values are equal") {
    Options o = small_chunks(m);
    o.new_conversation_precision = colikv::Precision::kBf16;
    Store h(colikv_test::store_at(dir, "bf16.db"), o);
    EngineBuffers x = copy_of(a), y = copy_of(a), z = copy_of(a);
    set_bits(x, 1, 0, 0x3f800000u);  // 1.0
    set_bits(y, 1, 0, 0x3f800001u);  // rounds to 1.0 too
    set_bits(z, 1, 0, 0x3f810000u);  // another bf16 value
    append(h, "x", x, 10);
    append(h, "y", y, 10);
    append(h, "z", z, 10);
    CHECK(chunk_rows(h) == 3 + 1);
    EngineBuffers out(m, 10);
    h.load("y", m, out.tokens.data(), 10, out.target());
    CHECK(colikv_test::bits_of(out.lc[0][static_cast<size_t>(1 * m.kv_lora)]) == 0x3f800000u);
    h.load("z", m, out.tokens.data(), 10, out.target());
    CHECK(colikv_test::bits_of(out.lc[0][static_cast<size_t>(1 * m.kv_lora)]) == 0x3f810000u);
  }
  CHECK(s.verify().ok());
  CHECK(s.verify().uncompared_shares.empty());
}

TEST_CASE("sharing: forks and shared prompts with equal values are still stored once", "[backends][sharing]") {
  TempDir dir;
  const std::string path = colikv_test::store_at(dir, "s.db");
  const ModelSignature m = colikv_test::tiny_model();
  Store s(path, small_chunks(m));
  const EngineBuffers a = history(m, 16, 1);
  append(s, "a", a, 16);
  const int64_t one_conversation = s.stats().total.stored_bytes;

  // Another chat with the same 8-token system prompt, computed the same way.
  EngineBuffers b = history(m, 16, 2);
  for (int64_t p = 0; p < 8; ++p) b.tokens[static_cast<size_t>(p)] = a.tokens[static_cast<size_t>(p)];
  b.fill(0, 8, 1);
  append(s, "b", b, 16);
  s.fork("a", "a-fork", 16);
  s.fork("b", "b-half", 6);  // ends inside chunk 1: re-encoded, equal to b's own prefix

  colikv::StoreStats st = s.stats();
  CHECK(st.total.chunks == 4 + 2 + 1);
  CHECK(st.total.saved_by_sharing() == (8 + 16 + 4) * m.record_bytes());
  CHECK(st.total.stored_bytes < 2 * one_conversation);
  CHECK(loads_as(s, "b", b, 16) == "");
  CHECK(loads_as(s, "a-fork", a, 16) == "");
  CHECK(loads_as(s, "b-half", b, 6) == "");
  // b's first two chunks are a's.
  CHECK(sql_int(path, "SELECT count(DISTINCT chunk_id) FROM conversation_chunks WHERE seq < 2") == 2 + 1);
  CHECK(s.verify().ok());
}

TEST_CASE("sharing: truncate, fork, gc, re-save and match on twins", "[backends][sharing]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string path = colikv_test::store_at(dir, "s.db");
  Store s(path, small_chunks(m));
  const EngineBuffers a = history(m, 10, 1);
  const EngineBuffers b = twin_of(a, 0, 2);
  append(s, "a", a, 10);
  append(s, "b", b, 10);

  // match goes by token ids: either twin holds the prompt; the most recently used wins.
  colikv::PrefixMatch r = s.match(m, a.tokens.data(), 10);
  CHECK(r.id == "b");
  CHECK(r.tokens == 10);
  CHECK(loads_as(s, "a", a, 10) == "");
  r = s.match(m, b.tokens.data(), 7);
  CHECK((r.id == "a" || r.id == "b"));
  CHECK(r.tokens == 7);

  s.truncate("a", 6);  // re-encodes a's chunk 1 from a's values
  CHECK(loads_as(s, "a", a, 6) == "");
  s.fork("b", "b-fork", 6);
  CHECK(loads_as(s, "b-fork", b, 6) == "");
  CHECK(loads_as(s, "b", b, 10) == "");
  append(s, "a", a, 10);  // grows back from its own values
  CHECK(loads_as(s, "a", a, 10) == "");
  CHECK(loads_as(s, "b", b, 10) == "");

  // Evict a and b-fork (least recently used); b keeps its values.
  set_last_used(path, {"a", "b-fork", "b"});
  const int64_t b_bytes = s.info("b").stored_bytes;
  colikv::EvictionReport g = s.gc(b_bytes);
  CHECK(g.fits);
  CHECK(load_error(s, "a", m, 10) == ErrorCode::kEvicted);
  CHECK(loads_as(s, "b", b, 10) == "");
  // a re-saved from its engine: its own values, not b's.
  append(s, "a", a, 10);
  CHECK(loads_as(s, "a", a, 10) == "");
  CHECK(loads_as(s, "b", b, 10) == "");
  // A truncate and a fork inside b-fork's evicted chunk keep it token-only.
  CHECK(load_error(s, "b-fork", m, 6) == ErrorCode::kEvicted);
  s.fork("b-fork", "b-fork-2", 5);
  s.truncate("b-fork", 5);
  CHECK(load_error(s, "b-fork", m, 5) == ErrorCode::kEvicted);
  CHECK(load_error(s, "b-fork-2", m, 5) == ErrorCode::kEvicted);
  CHECK(loads_as(s, "a", a, 10) == "");
  CHECK(loads_as(s, "b", b, 10) == "");
  colikv::VerifyReport v = s.verify();
  INFO((v.problems.empty() ? "" : v.problems.front().what));
  CHECK(v.ok());
  CHECK(v.uncompared_shares.empty());
}

TEST_CASE("sharing: a re-save with other values never fills a chunk that others share", "[backends][sharing]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  Store s(colikv_test::store_at(dir, "s.db"), small_chunks(m));
  const EngineBuffers a = history(m, 8, 1);
  append(s, "a", a, 8);
  s.fork("a", "b", 8);  // b shares a's chunks
  s.gc(0);              // both evicted
  CHECK(load_error(s, "b", m, 8) == ErrorCode::kEvicted);

  // a is recomputed by another engine build: same tokens, other values.
  const EngineBuffers a2 = twin_of(a, 0, 9);
  append(s, "a", a2, 8);
  CHECK(loads_as(s, "a", a2, 8) == "");
  CHECK(load_error(s, "b", m, 8) == ErrorCode::kEvicted);  // not a2's values

  // b recomputed with the values it had: the evicted chunks get them back.
  append(s, "b", a, 8);
  CHECK(loads_as(s, "b", a, 8) == "");
  CHECK(loads_as(s, "a", a2, 8) == "");
  CHECK(s.verify().ok());
}

TEST_CASE("sharing: twins imported from .coli_kv files export byte for byte", "[backends][sharing]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_indexed_model();
  Store s(colikv_test::store_at(dir, "s.db"), small_chunks(m));
  EngineBuffers a = history(m, 11, 1);
  set_bits(a, 2, 1, 0x7fc0beefu);
  set_bits(a, 3, 1, 0x80000000u);
  set_bits(a, 4, 1, 0x00000003u);
  EngineBuffers b = copy_of(a);
  set_bits(b, 2, 1, 0x7fc0bee0u);
  set_bits(b, 3, 1, 0x00000000u);
  set_bits(b, 4, 1, 0x80000003u);
  colikv_test::write_coli_kv(dir.file("a.coli_kv"), a, 11);
  colikv_test::write_coli_kv(dir.file("b.coli_kv"), b, 11);
  for (const char* id : {"a", "b"}) {
    colikv::ImportOptions io;
    io.id = id;
    colikv::import_coli_kv(s, dir.file(std::string(id) + ".coli_kv"), io);
  }
  for (const char* id : {"a", "b"}) {
    INFO(id);
    const std::string out = dir.file(std::string(id) + ".out");
    colikv::export_coli_kv(s, id, out);
    CHECK(colikv_test::read_file(out) == colikv_test::read_file(dir.file(std::string(id) + ".coli_kv")));
  }
  CHECK(chunk_rows(s) == 3 + 2);  // chunks 0 and 1 differ, chunk 2 is equal
}

TEST_CASE("sharing: a chunk's key ties its content digest to its place", "[sharing]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  const ModelSignature m = colikv_test::tiny_model();
  Store s(path, small_chunks(m));
  const EngineBuffers a = history(m, 8, 1);
  append(s, "a", a, 8);
  {
    // Another chunk's digest in place of chunk 0's: the key no longer matches.
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("UPDATE chunk_meta SET digest = (SELECT digest FROM chunk_meta WHERE chunk_id = 2) WHERE chunk_id = 1");
  }
  CHECK(load_error(s, "a", m, 8) == ErrorCode::kCorrupt);
  // verify names it twice: its key, and its digest against the decoded values.
  colikv::VerifyReport v = s.verify();
  REQUIRE(v.problems.size() == 2);
  for (const auto& p : v.problems) CHECK(p.chunk_id == 1);
  CHECK(v.problems[0].what.find("chunk hash does not match") != std::string::npos);
  CHECK(v.problems[1].what.find("content digest does not match its decoded values") != std::string::npos);
}
