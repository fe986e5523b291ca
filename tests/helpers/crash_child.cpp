// The writer process of the crash and multi-process tests (tests/test_crash.cpp,
// tests/test_concurrency.cpp).
//
//   colikv_crash_child crash STORE SEED NCONV full|normal
//     Runs the workload of crash_workload.h on conversations c0..c<NCONV-1>
//     (and their forks f<k>) until killed. On stdout, unbuffered, it writes
//     "R\n" once the store is open, then for every operation
//     "I <name> <new_len>\n" before it (new_len -1: a delete) and "D\n" once
//     the call has returned, i.e. once the operation is committed.
//   colikv_crash_child shared STORE PREFIX SEED NCONV full|normal
//     As crash, on <PREFIX>c<k> and <PREFIX>f<k>, in turns of several chunks
//     whose first chunks every conversation shares (workload::long_turns()):
//     one of the two writers of the two-writer kill loop.
//   colikv_crash_child async STORE SEED full|normal
//     Grows conversation "a" with append_async turns of 1..12 tokens until
//     killed, now and then waiting for them or truncating it. On stdout,
//     unbuffered: "R <count>\n" once the store is open; "Q <len>\n" before
//     each append_async; "W <len>\n" once a wait has returned OK (every turn
//     up to len is committed); "T <len>\n" before a truncate and "TD\n"
//     once it has returned.
//   colikv_crash_child engine STORE NAME SEED MAX_BYTES
//     As async, on conversation NAME of a store under a byte budget of
//     MAX_BYTES (Options::max_store_bytes), as a mock engine beside another
//     one: each turn appends all the engine's rows, so a conversation the
//     other engine's budget evicted is saved again. Same report lines; any
//     error ends it with exit status 1 (the kill loop expects none).
//   colikv_crash_child work STORE PREFIX NCONV NOPS SEED
//     Runs NOPS operations on <PREFIX>c<k>/<PREFIX>f<k>, loading every
//     conversation it touched after each one and comparing it bit for bit,
//     then writes "<name> <len>\n" for each of its conversations and exits 0.
//     Any error (a busy error included) goes to stderr with exit status 1.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "colikv/error.h"
#include "colikv/store.h"
#include "crash_workload.h"
#include "store/write/append.h"

namespace wl = colikv_test::workload;

namespace {

void put(const std::string& s) {
  const char* p = s.data();
  size_t n = s.size();
  while (n > 0) {
    ssize_t w = ::write(1, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      std::_Exit(3);  // the parent has gone away
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

int run_crash(const std::string& path, const std::string& prefix, uint32_t seed, int nconv, bool full,
              const wl::Shape& shape) {
  colikv::Store store(path, wl::options(full));
  put("R\n");
  std::mt19937 rng(seed);
  for (;;) {
    const int k = static_cast<int>(rng() % static_cast<unsigned>(nconv));
    wl::step(
        store, prefix, k, rng,
        [](const std::string& name, int64_t len) { put("I " + name + " " + std::to_string(len) + "\n"); },
        [] { put("D\n"); }, shape);
  }
}

int run_async(const std::string& path, uint32_t seed, bool full) {
  colikv::Options o = wl::options(full);
  o.max_queued_bytes = 24 * wl::model().floats_per_token() * 4;  // a few turns: the bound is reached too
  colikv::Store store(path, o);
  const auto& b = wl::history_of("a0").buffers;
  int64_t len = store.count("a0");
  put("R " + std::to_string(len) + "\n");
  std::mt19937 rng(seed);
  for (;;) {
    if (len > 0 && (len + 12 > wl::kCapacity || rng() % 10 == 0)) {
      len = static_cast<int64_t>(rng() % static_cast<unsigned>(len + 1));
      put("T " + std::to_string(len) + "\n");
      store.truncate("a0", len);
      put("TD\n");
      continue;
    }
    len += 1 + static_cast<int64_t>(rng() % 12);
    put("Q " + std::to_string(len) + "\n");
    store.append_async("a0", wl::model(), b.tokens.data(), len, b.source());
    if (rng() % 3 == 0) {
      store.wait("a0");
      put("W " + std::to_string(len) + "\n");
    }
  }
}

int run_engine(const std::string& path, const std::string& name, uint32_t seed, int64_t max_bytes) {
  colikv::Options o = wl::options(false);
  o.max_store_bytes = max_bytes;
  colikv::Store store(path, o);
  const auto& b = wl::history_of(name).buffers;
  int64_t len = store.count(name);
  put("R " + std::to_string(len) + "\n");
  std::mt19937 rng(seed);
  for (;;) {
    if (len > 0 && len + 12 > wl::kCapacity) {
      store.wait(name);  // the queued turns first: a truncate waits for them anyway
      put("W " + std::to_string(len) + "\n");
      len = static_cast<int64_t>(rng() % static_cast<unsigned>(len + 1));
      put("T " + std::to_string(len) + "\n");
      store.truncate(name, len);
      put("TD\n");
      continue;
    }
    len += 1 + static_cast<int64_t>(rng() % 12);
    put("Q " + std::to_string(len) + "\n");
    store.append_async(name, wl::model(), b.tokens.data(), len, b.source());
    if (rng() % 3 == 0) {
      store.wait(name);
      put("W " + std::to_string(len) + "\n");
    }
  }
}

int run_work(const std::string& path, const std::string& prefix, int nconv, int nops, uint32_t seed) {
  colikv::Store store(path, wl::options(false));
  std::map<std::string, int64_t> expect;
  const std::string err = wl::run_operations(store, prefix, nconv, nops, seed, expect);
  if (!err.empty()) {
    std::fprintf(stderr, "work %s\n", err.c_str());
    return 1;
  }
  std::string out;
  for (const auto& [name, len] : expect) out += name + " " + std::to_string(len) + "\n";
  put(out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "crash" && argc == 6)
      return run_crash(argv[2], "", static_cast<uint32_t>(std::stoul(argv[3])), std::stoi(argv[4]),
                       std::string(argv[5]) == "full", wl::Shape());
    if (mode == "shared" && argc == 7) {
      // The two-writer kill loop: every append of several chunks stores them
      // first (where the backend holds chunks), so that kills land between
      // a turn's chunks and its link.
      colikv::detail::objects_first_min_bytes() = 0;
      return run_crash(argv[2], argv[3], static_cast<uint32_t>(std::stoul(argv[4])), std::stoi(argv[5]),
                       std::string(argv[6]) == "full", wl::long_turns());
    }
    if (mode == "async" && argc == 5)
      return run_async(argv[2], static_cast<uint32_t>(std::stoul(argv[3])), std::string(argv[4]) == "full");
    if (mode == "engine" && argc == 6)
      return run_engine(argv[2], argv[3], static_cast<uint32_t>(std::stoul(argv[4])), std::stoll(argv[5]));
    if (mode == "work" && argc == 7)
      return run_work(argv[2], argv[3], std::stoi(argv[4]), std::stoi(argv[5]),
                      static_cast<uint32_t>(std::stoul(argv[6])));
    std::fprintf(stderr,
                 "usage: %s crash STORE SEED NCONV full|normal\n"
                 "       %s shared STORE PREFIX SEED NCONV full|normal\n"
                 "       %s async STORE SEED full|normal\n"
                 "       %s engine STORE NAME SEED MAX_BYTES\n"
                 "       %s work STORE PREFIX NCONV NOPS SEED\n",
                 argv[0], argv[0], argv[0], argv[0], argv[0]);
    return 2;
  } catch (const colikv::Error& e) {
    std::fprintf(stderr, "colikv error [%s]: %s\n", colikv::error_code_name(e.code()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
