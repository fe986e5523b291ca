// colikv_demo: the README's main job. Writes a few conversations of a real
// model's shape (78 layers, kv_lora 512, qk_rope 64: 179,716 bytes a token)
// turn by turn into a store, as an engine would, forks one, reads every one
// back into fresh engine buffers, checks them bit for bit, verifies the
// store, and prints what it did.
//
//   colikv_demo [STORE] [--conversations N] [--tokens T] [--turn K] [--small]
//
// Defaults: STORE colikv-demo.db, 6 conversations of 960 tokens in turns of
// 256 (about 1 GB of raw records). --small uses a 4-layer shape for a quick run.
// Only the demo's own conversations (demo-*) are replaced in an existing store.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "colikv/store.h"
#include "synthetic_engine.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

using colikv_examples::EngineBuffers;

int usage() {
  std::fprintf(stderr, "usage: colikv_demo [STORE] [--conversations N] [--tokens T] [--turn K] [--small]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "colikv-demo.db";
  int64_t n_conv = 6, n_tokens = 960, turn = 256;
  colikv::ModelSignature model;
  model.n_layers = 78; model.kv_lora = 512; model.qk_rope = 64; model.vocab = 154880;
  model.weights_id = "demo-weights";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> int64_t { return i + 1 < argc ? std::atoll(argv[++i]) : -1; };
    if (a == "--conversations") n_conv = next();
    else if (a == "--tokens") n_tokens = next();
    else if (a == "--turn") turn = next();
    else if (a == "--small") { model.n_layers = 4; model.kv_lora = 64; model.qk_rope = 16; }
    else if (a == "--help" || a == "-h") return usage();
    else if (!a.empty() && a[0] == '-') return usage();
    else path = a;
  }
  if (n_conv < 1 || n_tokens < 1 || turn < 1) return usage();

  try {
    colikv::Store store(path);
    const double mb_per_token = static_cast<double>(model.record_bytes()) / 1e6;
    std::printf("store %s, model [%s], %lld bytes a token\n", path.c_str(), model.to_string().c_str(),
                static_cast<long long>(model.record_bytes()));
    for (const auto& c : store.list({1000000, 0}))
      if (c.id.rfind("demo-", 0) == 0) store.remove(c.id);

    EngineBuffers engine(model, n_tokens), loaded(model, n_tokens);
    double append_s = 0, load_s = 0, raw_mb = 0;
    bool all_ok = true;
    for (int64_t c = 0; c < n_conv; ++c) {
      const std::string id = "demo-" + std::to_string(c);
      const uint64_t seed = 1000 + static_cast<uint64_t>(c);
      // Conversations 0 and 1 share a 256-token system prompt, as chats do.
      const int64_t shared = c < 2 ? std::min<int64_t>(256, n_tokens) : 0;
      if (shared) engine.compute(0, shared, 999);
      engine.compute(shared, n_tokens, seed);
      for (int64_t len = std::min(turn, n_tokens); ; len = std::min(len + turn, n_tokens)) {
        auto t0 = std::chrono::steady_clock::now();
        store.append(id, model, engine.tokens.data(), len, engine.source());
        append_s += seconds_since(t0);
        if (len == n_tokens) break;
      }
      auto t0 = std::chrono::steady_clock::now();
      int64_t got = store.load(id, model, loaded.tokens.data(), n_tokens, loaded.target());
      load_s += seconds_since(t0);
      const bool ok = got == n_tokens && loaded.same_as(engine, n_tokens);
      all_ok = all_ok && ok;
      raw_mb += static_cast<double>(n_tokens) * mb_per_token;
      colikv::ConversationInfo info = store.info(id);
      std::printf("  %-8s %6lld tokens  raw %8.1f MB  stored %8.1f MB  ratio %.3f  read back bit-exact: %s\n",
                  id.c_str(), static_cast<long long>(info.tokens), info.raw_bytes / 1e6, info.stored_bytes / 1e6,
                  static_cast<double>(info.stored_bytes) / static_cast<double>(info.raw_bytes), ok ? "yes" : "NO");
    }
    // A fork shares its parent's chunks: the file barely grows.
    const int64_t at = n_tokens / 2;
    store.fork("demo-0", "demo-fork", at);
    int64_t got = store.load("demo-fork", model, loaded.tokens.data(), n_tokens, loaded.target());
    engine.compute(0, std::min<int64_t>(256, n_tokens), 999);
    engine.compute(std::min<int64_t>(256, n_tokens), n_tokens, 1000);
    const bool fork_ok = got == at && loaded.same_as(engine, at);
    all_ok = all_ok && fork_ok;
    std::printf("  demo-fork forked from demo-0 at %lld tokens, read back bit-exact: %s\n",
                static_cast<long long>(at), fork_ok ? "yes" : "NO");

    colikv::StoreStats st = store.stats();
    // Sharing still works for equal values: demo-1's full chunks of the shared
    // prompt are demo-0's, and so are the fork's full chunks.
    const int64_t C = st.models.empty() ? 1 : st.models[0].chunk_tokens;
    const int64_t prompt = n_conv >= 2 ? std::min<int64_t>(256, n_tokens) / C * C : 0;
    const int64_t expect_shared = (prompt + at / C * C) * model.record_bytes();
    const bool sharing_ok = st.total.saved_by_sharing() >= expect_shared;
    all_ok = all_ok && sharing_ok;
    std::printf("wrote %.1f MB of records in %.2f s (%.0f MB/s), loaded them in %.2f s (%.0f MB/s)\n", raw_mb,
                append_s, raw_mb / append_s, load_s, raw_mb / load_s);
    std::printf("store: %lld conversations, logical %.1f MB, unique %.1f MB, stored %.1f MB "
                "(saved %.1f MB by sharing, %.1f MB by compression), file %.1f MB\n",
                static_cast<long long>(st.total.conversations), st.total.logical_bytes / 1e6,
                st.total.unique_bytes / 1e6, st.total.stored_bytes / 1e6, st.total.saved_by_sharing() / 1e6,
                st.total.saved_by_compression() / 1e6, st.file_bytes / 1e6);
    std::printf("sharing: %.1f MB not stored twice (the shared prompt's and the fork's chunks: %.1f MB expected): %s\n",
                st.total.saved_by_sharing() / 1e6, expect_shared / 1e6, sharing_ok ? "yes" : "NO");
    auto t0 = std::chrono::steady_clock::now();
    colikv::VerifyReport v = store.verify();
    std::printf("verify: %lld conversations, %lld chunks, %.1f MB checked in %.2f s, integrity %s, %zu problems\n",
                static_cast<long long>(v.conversations), static_cast<long long>(v.chunks), v.bytes / 1e6,
                seconds_since(t0), v.integrity.c_str(), v.problems.size());
    for (const auto& p : v.problems) std::printf("  problem: %s: %s\n", p.conversation.c_str(), p.what.c_str());
    all_ok = all_ok && v.ok();
    std::printf("%s\n", all_ok ? "OK: every conversation read back bit-exact" : "FAILED");
    return all_ok ? 0 : 1;
  } catch (const colikv::Error& e) {
    std::fprintf(stderr, "colikv_demo: %s\n", e.what());
    return 1;
  }
}
