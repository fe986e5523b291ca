// Engine-shaped KV buffers filled with activation-like values, shared by the
// demo (examples/demo.cpp) and the benchmark (tools/bench/), so that
// both write the same data: Lc[layer][pos * kv_lora + j], likewise Rc, no
// indexer, as colikv::KvSource / KvTarget expect them.
#ifndef COLIKV_EXAMPLES_SYNTHETIC_ENGINE_H
#define COLIKV_EXAMPLES_SYNTHETIC_ENGINE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "colikv/store.h"

namespace colikv_examples {

inline uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline float round_bf16(float f) {  // round to nearest even, NaN kept
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    u |= 0x00400000u;
    u &= 0xffff0000u;
  } else {
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  }
  std::memcpy(&f, &u, 4);
  return f;
}

struct EngineBuffers {
  colikv::ModelSignature m;
  int64_t cap = 0;
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> lc, rc;
  std::vector<const float*> lcp, rcp;
  std::vector<float*> lw, rw;

  EngineBuffers(const colikv::ModelSignature& model, int64_t capacity) : m(model), cap(capacity), tokens(capacity) {
    for (int l = 0; l < m.n_layers; ++l) {
      lc.emplace_back(static_cast<size_t>(cap * m.kv_lora));
      rc.emplace_back(static_cast<size_t>(cap * m.qk_rope));
      lcp.push_back(lc.back().data());
      rcp.push_back(rc.back().data());
      lw.push_back(lc.back().data());
      rw.push_back(rc.back().data());
    }
  }
  colikv::KvSource source() const { return {lcp.data(), rcp.data(), nullptr}; }
  colikv::KvTarget target() { return {lw.data(), rw.data(), nullptr}; }

  // Positions [from, to): deterministic token ids and activation-like values:
  // full float32 mantissas, per-channel scales spread ~100x, rotary parts
  // smooth across positions. bf16_origin rounds them to bf16 and widens them
  // back (data that came from a bf16 model).
  void compute(int64_t from, int64_t to, uint64_t seed, bool bf16_origin = false) {
    for (int64_t p = from; p < to; ++p) {
      uint64_t s = seed * 1000003 + static_cast<uint64_t>(p);
      tokens[p] = static_cast<int32_t>(splitmix(s) % static_cast<uint64_t>(m.vocab));
    }
    for (int l = 0; l < m.n_layers; ++l) {
      uint64_t s = seed ^ (static_cast<uint64_t>(l) << 40) ^ (static_cast<uint64_t>(from) << 8);
      for (int64_t p = from; p < to; ++p) {
        float* L = &lc[l][p * m.kv_lora];
        for (int j = 0; j < m.kv_lora; ++j) {
          double u = static_cast<double>(splitmix(s) >> 11) * (1.0 / 9007199254740992.0) - 0.5;
          float v = static_cast<float>(u * (0.02 + 2.0 * ((j * 37) % 101) / 100.0));
          L[j] = bf16_origin ? round_bf16(v) : v;
        }
        float* R = &rc[l][p * m.qk_rope];
        for (int j = 0; j < m.qk_rope; ++j) {
          float v = static_cast<float>(std::sin(0.01 * static_cast<double>(p) * (j + 1) + l) * (1.0 + j % 7));
          R[j] = bf16_origin ? round_bf16(v) : v;
        }
      }
    }
  }

  void zero(int64_t n) {
    std::fill(tokens.begin(), tokens.begin() + n, 0);
    for (int l = 0; l < m.n_layers; ++l) {
      std::fill(lc[l].begin(), lc[l].begin() + n * m.kv_lora, 0.0f);
      std::fill(rc[l].begin(), rc[l].begin() + n * m.qk_rope, 0.0f);
    }
  }

  // Positions [0, n) bit for bit.
  bool same_as(const EngineBuffers& o, int64_t n) const {
    if (std::memcmp(tokens.data(), o.tokens.data(), static_cast<size_t>(n) * 4) != 0) return false;
    for (int l = 0; l < m.n_layers; ++l)
      if (std::memcmp(lc[l].data(), o.lc[l].data(), static_cast<size_t>(n * m.kv_lora) * 4) != 0 ||
          std::memcmp(rc[l].data(), o.rc[l].data(), static_cast<size_t>(n * m.qk_rope) * 4) != 0)
        return false;
    return true;
  }
};

}  // namespace colikv_examples

#endif  // COLIKV_EXAMPLES_SYNTHETIC_ENGINE_H
