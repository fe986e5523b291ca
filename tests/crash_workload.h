// The deterministic workload shared by tests/helpers/crash_child.cpp (the process the
// crash and multi-process tests start and kill) and the tests that check it.
//
// Every conversation's content is a function of its seed and the position
// only: tokens make_tokens(n, vocab, seed)[p] and KV values
// EngineBuffers::fill(.., seed) at p. A conversation "<prefix>c<k>" and its
// fork "<prefix>f<k>" share one seed, so a checker needs only the name and
// the committed count to regenerate the exact expected content.
#ifndef COLIKV_TESTS_CRASH_WORKLOAD_H
#define COLIKV_TESTS_CRASH_WORKLOAD_H

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>

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

// "<prefix>c12" and "<prefix>f12" -> a seed from prefix and 12.
inline uint32_t seed_of(const std::string& name) {
  size_t i = name.size();
  while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') --i;
  uint32_t h = 2166136261u;
  for (size_t j = 0; j + 1 < i; ++j) h = (h ^ static_cast<uint8_t>(name[j])) * 16777619u;  // prefix without c/f
  return h ^ (static_cast<uint32_t>(std::stoul(name.substr(i))) * 2654435761u) ^ 0x5eedu;
}

// The whole deterministic history of a seed up to kCapacity positions.
struct History {
  explicit History(uint32_t seed) : buffers(model(), kCapacity) {
    buffers.fill(0, kCapacity, seed);
    buffers.tokens = make_tokens(kCapacity, model().vocab, seed);
  }
  EngineBuffers buffers;
};

inline const History& history_of(const std::string& name) {
  static std::mutex mu;
  static std::map<uint32_t, std::unique_ptr<History>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& h = cache[seed_of(name)];
  if (!h) h = std::make_unique<History>(seed_of(name));
  return *h;
}

// Loads a conversation into poisoned buffers and compares it bit for bit
// with its history over `expect` positions. "" or what is wrong.
// A store holding the first len positions of each named conversation's history.
inline void write_store(const std::string& path, const std::vector<std::pair<std::string, int64_t>>& lengths,
                        bool full_sync) {
  colikv::Store s(path, options(full_sync));
  for (const auto& [name, len] : lengths) {
    const auto& b = history_of(name).buffers;
    s.append(name, model(), b.tokens.data(), len, b.source());
  }
}

inline std::string check_content(colikv::Store& store, const std::string& name, int64_t expect) {
  EngineBuffers got(model(), kCapacity);
  got.poison();
  int64_t n = 0;
  try {
    n = store.load(name, model(), got.tokens.data(), kCapacity, got.target());
  } catch (const colikv::Error& e) {
    return name + ": load failed: " + e.what();
  }
  if (n != expect) return name + ": loaded " + std::to_string(n) + " tokens, expected " + std::to_string(expect);
  std::string d = got.compare(history_of(name).buffers, n);
  if (!d.empty()) return name + ": " + d;
  return "";
}

// One step of a writer: an append, truncate, fork or delete on conversation k
// of `prefix`, chosen by rng. announce(name, new_len) is called before the
// operation (new_len -1: deleted) and done() after it returns.
inline void step(colikv::Store& store, const std::string& prefix, int k, std::mt19937& rng,
                 const std::function<void(const std::string&, int64_t)>& announce,
                 const std::function<void()>& done) {
  const std::string c = prefix + "c" + std::to_string(k);
  const std::string f = prefix + "f" + std::to_string(k);
  const int64_t cur = store.count(c);
  const unsigned dice = rng() % 100;
  if (dice < 70 || !store.exists(c)) {
    int64_t len = cur + 1 + static_cast<int64_t>(rng() % 24);
    if (cur >= kCapacity) {
      len = static_cast<int64_t>(rng() % (kCapacity / 2));
      announce(c, len);
      store.truncate(c, len);
      done();
      return;
    }
    len = std::min(len, kCapacity);
    const EngineBuffers& b = history_of(c).buffers;
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
