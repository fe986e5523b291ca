// Store::adopt and colikv_adopt: a loadable prefix match and the load of its
// rows in one read snapshot, with the loaded ids compared with the prompt
// (issue 25, item 2: match_loadable then load_range could load another
// history when a writer rewrote the match in between).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "colikv/colikv.h"
#include "colikv/store.h"
#include "backend.h"
#include "test_support.h"

using colikv::ErrorCode;
using colikv::ModelSignature;
using colikv::PrefixMatch;
using colikv::Store;
using colikv_test::EngineBuffers;
using colikv_test::TempDir;

namespace {

constexpr int64_t kC = 4;  // tokens a chunk

std::vector<int32_t> seq(int32_t from, int n) { return colikv_test::token_run(from, n); }

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("adopt: loads the rows of the longest loadable prefix from `from` on", "[backends][match][adopt]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  Store s(colikv_test::store_at(dir, "a.db"), colikv_test::chunked_options(m, kC));
  EngineBuffers stored(m, 32);
  stored.tokens = seq(100, 10);
  stored.fill(0, 32, 7);
  s.append("a", m, stored.tokens.data(), 10, stored.source());

  const std::vector<int32_t> prompt = cat(seq(100, 7), seq(900, 5));  // shares 7 tokens with "a"
  EngineBuffers got(m, 32);
  got.poison();
  got.tokens.assign(32, -1);
  const PrefixMatch r = s.adopt(m, prompt.data(), static_cast<int64_t>(prompt.size()), 2, got.tokens.data(),
                                got.target());
  CHECK(r.id == "a");
  CHECK(r.tokens == 7);
  CHECK(got.tokens[0] == -1);  // nothing before `from` is written
  CHECK(got.tokens[1] == -1);
  for (int64_t p = 2; p < 7; ++p) CHECK(got.tokens[static_cast<size_t>(p)] == prompt[static_cast<size_t>(p)]);
  CHECK(got.tokens[7] == -1);
  // Rows [2, 7) are the stored ones, bit for bit.
  EngineBuffers want(m, 32);
  want.poison();
  for (size_t l = 0; l < want.lc.size(); ++l)
    for (int64_t p = 2; p < 7; ++p) {
      const size_t lw = static_cast<size_t>(m.kv_lora), rw = static_cast<size_t>(m.qk_rope);
      std::copy(stored.lc[l].begin() + p * lw, stored.lc[l].begin() + (p + 1) * lw, want.lc[l].begin() + p * lw);
      std::copy(stored.rc[l].begin() + p * rw, stored.rc[l].begin() + (p + 1) * rw, want.rc[l].begin() + p * rw);
    }
  want.tokens = got.tokens;  // checked above: compare() is for the rows
  CHECK(got.compare(want, 32) == "");

  // The slot already holds the whole match: the match is returned, nothing loaded.
  EngineBuffers none(m, 32);
  none.poison();
  none.tokens.assign(32, -1);
  const PrefixMatch held = s.adopt(m, prompt.data(), 12, 7, none.tokens.data(), none.target());
  CHECK(held.id == "a");
  CHECK(held.tokens == 7);
  CHECK(none.tokens[6] == -1);
  // No match at all.
  const std::vector<int32_t> other = seq(600, 5);
  const PrefixMatch miss = s.adopt(m, other.data(), 5, 0, none.tokens.data(), none.target());
  CHECK(miss.id.empty());
  CHECK(miss.tokens == 0);

  CHECK(colikv_test::error_code_of([&] { s.adopt(m, prompt.data(), 12, 13, got.tokens.data(), got.target()); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(colikv_test::error_code_of([&] { s.adopt(m, prompt.data(), 12, -1, got.tokens.data(), got.target()); }) ==
        ErrorCode::kInvalidArgument);
}

TEST_CASE("adopt: the C API", "[backends][match][adopt]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string path = colikv_test::store_at(dir, "c.db");
  {
    Store s(path, colikv_test::chunked_options(m, kC));
    EngineBuffers b(m, 16);
    b.tokens = seq(100, 10);
    b.fill(0, 16, 7);
    s.append("a", m, b.tokens.data(), 10, b.source());
  }
  colikv_store* cs = nullptr;
  REQUIRE(colikv_open(path.c_str(), 0, &cs) == COLIKV_OK);
  const colikv_model cm = {m.n_layers, m.kv_lora, m.qk_rope, m.index_hd, m.n_indexed, m.vocab, m.weights_id.c_str()};
  const std::vector<int32_t> prompt = cat(seq(100, 9), seq(900, 3));
  EngineBuffers got(m, 16);
  got.tokens.assign(16, -1);
  char id[8];
  CHECK(colikv_adopt(cs, &cm, prompt.data(), 12, 4, id, sizeof id, got.tokens.data(), got.target().Lc,
                     got.target().Rc, nullptr) == 9);
  CHECK(std::string(id) == "a");
  CHECK(got.tokens[3] == -1);
  CHECK(got.tokens[4] == 104);
  CHECK(got.tokens[8] == 108);
  CHECK(colikv_adopt(cs, &cm, prompt.data(), 12, 13, id, sizeof id, got.tokens.data(), got.target().Lc,
                     got.target().Rc, nullptr) == COLIKV_ERR_INVALID);
  CHECK(std::string(colikv_errmsg(cs)).find("from 13 is outside [0, 12]") != std::string::npos);
  char tiny[1];
  CHECK(colikv_adopt(cs, &cm, prompt.data(), 12, 4, tiny, sizeof tiny, got.tokens.data(), got.target().Lc,
                     got.target().Rc, nullptr) == COLIKV_ERR_TOO_LARGE);
  colikv_close(cs);
}

// The reported race: a writer alternates the matched conversation between
// two histories sharing 100 tokens while another handle adopts the prompt of
// one of them. Every adoption's tokens are the prompt's.
TEST_CASE("adopt: a writer rewriting the matched conversation never hands back another history",
          "[backends][match][adopt][tsan]") {
  TempDir dir;
  const ModelSignature m = colikv_test::tiny_model();
  const std::string path = colikv_test::store_at(dir, "race.db");
  const int n = 200;
  std::vector<int32_t> a(n), b(n);
  for (int i = 0; i < n; ++i) {
    a[static_cast<size_t>(i)] = i % 1000;
    b[static_cast<size_t>(i)] = i < 100 ? i % 1000 : 500 + i % 400;
  }
  EngineBuffers rows(m, n);
  rows.fill(0, n, 3);
  Store writer(path, colikv_test::chunked_options(m, 16));
  writer.append("slot1", m, a.data(), n, rows.source());
  Store adopter(path, colikv_test::chunked_options(m, 16));

  std::atomic<bool> stop{false};
  std::atomic<int> writer_errors{0};
  std::thread w([&] {
    for (int round = 1; !stop; ++round) {
      const std::vector<int32_t>& t = round % 2 ? b : a;
      try {
        writer.write("slot1", m, t.data(), std::min<int64_t>(writer.count("slot1"), 100), n, rows.source());
      } catch (const colikv::Error&) {
        ++writer_errors;
      }
    }
  });
  int adopted = 0, wrong = 0, failed = 0;
  EngineBuffers got(m, n);
  for (int i = 0; i < 400; ++i) {
    try {
      const PrefixMatch r = adopter.adopt(m, a.data(), n, 0, got.tokens.data(), got.target());
      if (r.tokens <= 100) continue;
      ++adopted;
      for (int64_t p = 0; p < r.tokens; ++p)
        if (got.tokens[static_cast<size_t>(p)] != a[static_cast<size_t>(p)]) {
          ++wrong;
          break;
        }
    } catch (const colikv::Error&) {
      ++failed;  // busy on a loaded server; never another history
    }
  }
  stop = true;
  w.join();
  CHECK(wrong == 0);
  CHECK(failed == 0);
  CHECK(writer_errors == 0);
  INFO("adopted " << adopted << " of 400 with more than the shared 100 tokens");
}
