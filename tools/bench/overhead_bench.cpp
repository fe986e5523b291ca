// What counting costs a small append and the async path's stall: the same
// turns timed through the public API only, so that one source builds against
// this library and against an older one, and the two run side by side
// (docs/benchmarks.md, "Metrics overhead", has the command and the figures).
//
//   colikv_overhead_bench DIR [TURNS]
// prints the median and p90 of a synchronous append of a small turn and of
// append_async's time on the caller's thread, in microseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "colikv/store.h"

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [TURNS]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int turns = argc > 2 ? std::atoi(argv[2]) : 2000;
  constexpr int kTurnTokens = 16, kTurnsPerConversation = 32;
  colikv::ModelSignature m;
  m.n_layers = 2;
  m.kv_lora = 16;
  m.qk_rope = 4;
  m.vocab = 1000;
  m.weights_id = "overhead";
  const int cap = kTurnTokens * kTurnsPerConversation;
  std::vector<std::vector<float>> lc(2, std::vector<float>(static_cast<size_t>(cap * 16))),
      rc(2, std::vector<float>(static_cast<size_t>(cap * 4)));
  for (auto& p : lc)
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>(i % 97) * 0.25f;
  for (auto& p : rc)
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>(i % 89) * 0.5f;
  const float* lp[2] = {lc[0].data(), lc[1].data()};
  const float* rp[2] = {rc[0].data(), rc[1].data()};
  colikv::KvSource kv;
  kv.Lc = lp;
  kv.Rc = rp;
  std::vector<int32_t> tokens(static_cast<size_t>(cap));
  colikv::Options o;
  o.synchronous = colikv::Synchronous::kNormal;  // the library's cost, not the device's flush

  auto run = [&](const std::string& name, bool async) {
    std::remove(name.c_str());
    colikv::Store s(name, o);
    std::vector<double> us;
    for (int t = 0; t < turns; ++t) {
      const int conv = t / kTurnsPerConversation, k = t % kTurnsPerConversation;
      for (int p = k * kTurnTokens; p < (k + 1) * kTurnTokens; ++p) tokens[static_cast<size_t>(p)] = (conv * 7 + p * 13) % 1000;
      const std::string id = "c" + std::to_string(conv);
      const auto t0 = Clock::now();
      if (async)
        s.append_async(id, m, tokens.data(), (k + 1) * kTurnTokens, kv);
      else
        s.append(id, m, tokens.data(), (k + 1) * kTurnTokens, kv);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      if (async && k == kTurnsPerConversation - 1) s.wait();  // bounded: one conversation queued at a time
    }
    s.wait();
    std::printf("%s_median_us %.1f\n%s_p90_us %.1f\n", async ? "async_stall" : "append", percentile(us, 0.5),
                async ? "async_stall" : "append", percentile(us, 0.9));
  };
  run(dir + "/overhead_sync.db", false);
  run(dir + "/overhead_async.db", true);
  return 0;
}
