// The deterministic workload shared by tests/helpers/crash_child.cpp (the process the
// crash and multi-process tests start and kill) and the tests that check it.
//
// Every conversation's content is a function of its seed and the position
// only: tokens make_tokens(n, vocab, seed)[p] and KV values
// EngineBuffers::fill(.., seed) at p. A conversation "<prefix>c<k>" and its
// fork "<prefix>f<k>" share one seed, so a checker needs only the name, the
// committed count and the workload's Shape to regenerate the exact expected
// content. A Shape with a shared prefix gives every conversation the same
// first positions (a system prompt), so that conversations of different
// writers share those chunks.
#ifndef COLIKV_TESTS_CRASH_WORKLOAD_H
#define COLIKV_TESTS_CRASH_WORKLOAD_H

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "colikv/error.h"
#include "colikv/options.h"
#include "colikv/store.h"
#include "test_support.h"

namespace colikv_test {
namespace workload {

constexpr int64_t kCapacity = 160;    // positions a conversation grows to before it is cut back
constexpr int64_t kChunkTokens = 8;   // tokens per chunk

inline colikv::ModelSignature model() { return tiny_model(); }

inline colikv::Options options(bool full_sync) {
  colikv::Options o;
  o.chunk_target_bytes = kChunkTokens * model().record_bytes();
  o.synchronous = full_sync ? colikv::Synchronous::kFull : colikv::Synchronous::kNormal;
  o.threads = 1;
  o.busy_timeout_ms = 10000;
  return o;
}

// How a writer's conversations grow: up to `capacity` positions, by appends
// of min_turn..max_turn tokens, the first shared_prefix positions alike in
// every conversation (from kSharedSeed). The default is the crash and
// concurrency tests' workload.
struct Shape {
  int64_t capacity = kCapacity;
  int64_t min_turn = 1;
  int64_t max_turn = 24;
  int64_t shared_prefix = 0;
};

// The two-writer kill loop's: each append spans 4 to 17 chunks, so a kill
// lands inside a turn's chunk writes as often as between turns, and the
// first 5 chunks of every conversation are one set of shared chunks.
inline Shape long_turns() { return Shape{48 * kChunkTokens, 4 * kChunkTokens, 16 * kChunkTokens, 5 * kChunkTokens}; }

constexpr uint32_t kSharedSeed = 0x5157e4u;

// "<prefix>c12" and "<prefix>f12" -> a seed from prefix and 12.
inline uint32_t seed_of(const std::string& name) {
  size_t i = name.size();
  while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') --i;
  uint32_t h = 2166136261u;
  for (size_t j = 0; j + 1 < i; ++j) h = (h ^ static_cast<uint8_t>(name[j])) * 16777619u;  // prefix without c/f
  return h ^ (static_cast<uint32_t>(std::stoul(name.substr(i))) * 2654435761u) ^ 0x5eedu;
}

// The whole deterministic history of a seed up to shape.capacity positions.
struct History {
  History(uint32_t seed, const Shape& shape) : buffers(model(), shape.capacity) {
    buffers.fill(0, shape.capacity, seed);
    buffers.tokens = make_tokens(shape.capacity, model().vocab, seed);
    if (shape.shared_prefix > 0) {
      buffers.fill(0, shape.shared_prefix, kSharedSeed);
      const std::vector<int32_t> shared = make_tokens(shape.shared_prefix, model().vocab, kSharedSeed);
      std::copy(shared.begin(), shared.end(), buffers.tokens.begin());
    }
  }
  EngineBuffers buffers;
};

inline const History& history_of(const std::string& name, const Shape& shape = Shape()) {
  static std::mutex mu;
  static std::map<std::tuple<uint32_t, int64_t, int64_t>, std::unique_ptr<History>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& h = cache[{seed_of(name), shape.capacity, shape.shared_prefix}];
  if (!h) h = std::make_unique<History>(seed_of(name), shape);
  return *h;
}

// A store holding the first len positions of each named conversation's history.
inline void write_store(const std::string& path, const std::vector<std::pair<std::string, int64_t>>& lengths,
                        bool full_sync) {
  colikv::Store s(path, options(full_sync));
  for (const auto& [name, len] : lengths) {
    const auto& b = history_of(name).buffers;
    s.append(name, model(), b.tokens.data(), len, b.source());
  }
}

// Loads a conversation into poisoned buffers (one read snapshot) and
// compares what it holds bit for bit with its history. n receives the
// loaded count, -1 when there is no such conversation. "" or what is wrong.
inline std::string load_checked(colikv::Store& store, const std::string& name, int64_t& n,
                                const Shape& shape = Shape()) {
  EngineBuffers got(model(), shape.capacity);
  got.poison();
  n = -1;
  try {
    n = store.load(name, model(), got.tokens.data(), shape.capacity, got.target());
  } catch (const colikv::Error& e) {
    if (e.code() == colikv::ErrorCode::kNotFound) return "";
    return name + ": load failed: " + e.what();
  }
  std::string d = got.compare(history_of(name, shape).buffers, n);
  if (!d.empty()) return name + ": " + d;
  return "";
}

// The same for a conversation that must hold `expect` positions.
inline std::string check_content(colikv::Store& store, const std::string& name, int64_t expect,
                                 const Shape& shape = Shape()) {
  int64_t n = -1;
  const std::string err = load_checked(store, name, n, shape);
  if (!err.empty()) return err;
  if (n < 0) return name + ": load failed: no such conversation";
  if (n != expect) return name + ": loaded " + std::to_string(n) + " tokens, expected " + std::to_string(expect);
  return "";
}

// One step of a writer: an append, truncate, fork or delete on conversation k
// of `prefix`, chosen by rng. announce(name, new_len) is called before the
// operation (new_len -1: deleted) and done() after it returns.
inline void step(colikv::Store& store, const std::string& prefix, int k, std::mt19937& rng,
                 const std::function<void(const std::string&, int64_t)>& announce,
                 const std::function<void()>& done, const Shape& shape = Shape()) {
  const std::string c = prefix + "c" + std::to_string(k);
  const std::string f = prefix + "f" + std::to_string(k);
  const int64_t cur = store.count(c);
  const unsigned dice = rng() % 100;
  if (dice < 70 || !store.exists(c)) {
    int64_t len = cur + shape.min_turn + static_cast<int64_t>(rng() % (shape.max_turn - shape.min_turn + 1));
    if (cur >= shape.capacity) {
      len = static_cast<int64_t>(rng() % (shape.capacity / 2));
      announce(c, len);
      store.truncate(c, len);
      done();
      return;
    }
    len = std::min(len, shape.capacity);
    const EngineBuffers& b = history_of(c, shape).buffers;
    announce(c, len);
    store.append(c, model(), b.tokens.data(), len, b.source());
    done();
  } else if (dice < 80) {
    const int64_t len = static_cast<int64_t>(rng() % static_cast<uint32_t>(cur + 1));
    announce(c, len);
    store.truncate(c, len);
    done();
  } else if (store.exists(f)) {
    announce(f, -1);
    store.remove(f);
    done();
  } else {
    const int64_t len = static_cast<int64_t>(rng() % static_cast<uint32_t>(cur + 1));
    announce(f, len);
    store.fork(c, f, len);
    done();
  }
}

// nops random operations (step) on the conversations of `prefix`, checking
// each touched conversation's content after its operation. expect receives
// every conversation's final length. Returns "" or the first problem.
inline std::string run_operations(colikv::Store& store, const std::string& prefix, int nconv, int nops,
                                  uint32_t seed, std::map<std::string, int64_t>& expect) {
  std::mt19937 rng(seed);
  try {
    for (int i = 0; i < nops; ++i) {
      const int k = static_cast<int>(rng() % static_cast<unsigned>(nconv));
      std::string touched;
      step(
          store, prefix, k, rng,
          [&](const std::string& name, int64_t len) {
            touched = name;
            if (len < 0)
              expect.erase(name);
            else
              expect[name] = len;
          },
          [] {});
      if (expect.count(touched)) {
        std::string err = check_content(store, touched, expect[touched]);
        if (!err.empty()) return prefix + " after operation " + std::to_string(i) + ": " + err;
      }
    }
  } catch (const colikv::Error& e) {
    return prefix + ": " + colikv::error_code_name(e.code()) + ": " + e.what();
  }
  return "";
}

}  // namespace workload
}  // namespace colikv_test

#endif  // COLIKV_TESTS_CRASH_WORKLOAD_H
