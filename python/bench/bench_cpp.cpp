// The C++ side of python/bench/bench_python.py: one Store::load or one
// Store::append of a stored conversation, timed, through the public C++ API
// as an engine calls it, printed as one JSON line with this process's RSS
// before the call and its peak RSS after.
//   colikv_py_bench STORE ID load
//   colikv_py_bench STORE ID append NEW_ID FIRST_TOKEN   (appends ID's KV under NEW_ID with
//                                                        token 0 set to FIRST_TOKEN, then deletes NEW_ID)
#include <sys/mman.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "colikv/store.h"

namespace {

int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * 4096;
}

int64_t peak_rss_bytes() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

// Allocated as numpy allocates an array's data (malloc, and transparent huge
// pages asked for over a block of 4 MiB or more), so that the comparison is
// of the binding, not of two allocators.
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
std::unique_ptr<T[], FreeDeleter> numpy_like_alloc(size_t count) {
  const size_t bytes = count * sizeof(T);
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p) throw std::bad_alloc();
  if (bytes >= (size_t{1} << 22)) {
    const size_t offset = 4096 - reinterpret_cast<uintptr_t>(p) % 4096;
    madvise(static_cast<char*>(p) + offset, bytes - offset, MADV_HUGEPAGE);
  }
  return std::unique_ptr<T[], FreeDeleter>(static_cast<T*>(p));
}

// Fresh, uninitialised buffers in the layout the Python module gives numpy:
// one block per array, layer l at l * n * width.
struct Buffers {
  std::unique_ptr<int32_t[], FreeDeleter> tokens;
  std::unique_ptr<float[], FreeDeleter> lc, rc;
  std::vector<float*> lp, rp;
  Buffers(const colikv::ModelSignature& m, int64_t n)
      : tokens(numpy_like_alloc<int32_t>(static_cast<size_t>(n))),
        lc(numpy_like_alloc<float>(static_cast<size_t>(m.n_layers * n * m.kv_lora))),
        rc(numpy_like_alloc<float>(static_cast<size_t>(m.n_layers * n * m.qk_rope))) {
    for (int l = 0; l < m.n_layers; ++l) {
      lp.push_back(lc.get() + l * n * m.kv_lora);
      rp.push_back(rc.get() + l * n * m.qk_rope);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || (std::string(argv[3]) == "append" && argc < 6)) {
    std::fprintf(stderr, "usage: colikv_py_bench STORE ID load | STORE ID append NEW_ID FIRST_TOKEN\n");
    return 2;
  }
  try {
    const std::string mode = argv[3];
    colikv::Store store(argv[1]);
    const colikv::ConversationInfo info = store.info(argv[2]);
    const colikv::ModelSignature m = info.model;
    const int64_t n = info.tokens;
    if (mode == "load") {
      const int64_t before = rss_bytes();
      const auto t0 = std::chrono::steady_clock::now();
      Buffers b(m, n);
      const int64_t got = store.load(argv[2], m, b.tokens.get(), n, {b.lp.data(), b.rp.data(), nullptr}, n);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("{\"seconds\": %.6f, \"tokens\": %lld, \"rss_before\": %lld, \"rss_peak\": %lld}\n", s,
                  static_cast<long long>(got), static_cast<long long>(before),
                  static_cast<long long>(peak_rss_bytes()));
      return 0;
    }
    if (mode == "append") {
      Buffers b(m, n);
      store.load(argv[2], m, b.tokens.get(), n, {b.lp.data(), b.rp.data(), nullptr}, n);
      b.tokens[0] = static_cast<int32_t>(std::stol(argv[5]));  // other chain hashes: nothing is shared
      const colikv::KvSource src{const_cast<const float* const*>(b.lp.data()),
                                 const_cast<const float* const*>(b.rp.data()), nullptr};
      const auto t0 = std::chrono::steady_clock::now();
      store.append(argv[4], m, b.tokens.get(), n, src);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      store.remove(argv[4]);
      std::printf("{\"seconds\": %.6f, \"tokens\": %lld}\n", s, static_cast<long long>(n));
      return 0;
    }
    std::fprintf(stderr, "colikv_py_bench: unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const colikv::Error& e) {
    std::fprintf(stderr, "colikv_py_bench: %s\n", e.what());
    return 1;
  }
}
