// colikv_store_child: a small program that the multi-process tests start.
//
//   colikv_store_child append STORE CONV SEED TURNS TOKENS_PER_TURN
//       Appends TURNS turns of TOKENS_PER_TURN tokens to CONV, one append per
//       turn, printing (and flushing) the committed count after each. Finally
//       loads CONV back and checks it bit for bit.
//   colikv_store_child read STORE DONE_FILE TOKENS_PER_TURN READ_ONLY CONV SEED FINAL [CONV SEED FINAL ...]
//       Loads every CONV over and over while others write, checking that each
//       load is a whole number of turns, never shrinks, and is bit-exact with
//       the deterministic history of SEED. Once DONE_FILE exists it makes one
//       last pass, in which every CONV must hold FINAL tokens, prints the
//       number of loads and exits. READ_ONLY is 1 to open the store read-only.
//
//   colikv_store_child hold STORE CONV SEED TOKENS SEQ
//       Appends TOKENS tokens of SEED's history to CONV in one turn; inside
//       its write transaction, after linking entry SEQ, prints "mid-turn" and
//       waits for a line on stdin; prints "committed N" once committed.
//
//   colikv_store_child host STORE NAME SEED OTHER OTHER_SEED TURNS TOKENS_PER_TURN
//       One engine host of several on one store: each turn it appends a turn
//       to its own conversation NAME and prints "ack N" once it is committed,
//       extends the conversation "shared" (history 777) that every host
//       extends, retrying on kConflict, loads what the other host has
//       acknowledged of OTHER and checks it bit for bit, forks NAME into
//       NAME/fork<T> and loads that back, and matches OTHER's history.
//
// Data: tiny_model(), chunks of 4 tokens; the history of SEED is
// EngineBuffers::fill(0, n, SEED) and make_tokens(n, vocab, SEED): a function
// of (SEED, position) only, so any prefix is regenerated from SEED alone.
//
// Exit status: 0 success, 1 a check failed, 2 bad usage, 3 a colikv::Error.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "colikv/error.h"
#include "colikv/store.h"
#include "append_hook.h"
#include "store/write/append.h"
#include "test_support.h"

using colikv::ModelSignature;
using colikv_test::EngineBuffers;

namespace {

ModelSignature child_model() { return colikv_test::tiny_model(); }

colikv::Options child_options(const ModelSignature& m) {
  colikv::Options o;
  o.chunk_target_bytes = 4 * m.record_bytes();
  return o;
}

using colikv_test::history;

int usage() {
  std::fprintf(stderr,
               "usage: colikv_store_child append STORE CONV SEED TURNS TOKENS_PER_TURN\n"
               "       colikv_store_child read STORE DONE_FILE TOKENS_PER_TURN READ_ONLY CONV SEED FINAL ...\n"
               "       colikv_store_child host STORE NAME SEED OTHER OTHER_SEED TURNS TOKENS_PER_TURN\n"
               "       colikv_store_child hold STORE CONV SEED TOKENS SEQ\n");
  return 2;
}

bool parse_i64(const char* s, int64_t& out) {
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  if (!*s || *end) return false;
  out = v;
  return true;
}

int run_append(int argc, char** argv) {
  if (argc != 7) return usage();
  const std::string store_path = argv[2], conv = argv[3];
  int64_t seed, turns, per_turn;
  if (!parse_i64(argv[4], seed) || !parse_i64(argv[5], turns) || !parse_i64(argv[6], per_turn) || turns < 1 ||
      per_turn < 1)
    return usage();
  const ModelSignature m = child_model();
  const int64_t n = turns * per_turn;
  EngineBuffers h = history(m, n, static_cast<uint32_t>(seed));
  colikv::Store store(store_path, child_options(m));
  for (int64_t t = 1; t <= turns; ++t) {
    store.append(conv, m, h.tokens.data(), t * per_turn, h.source());
    std::printf("%" PRId64 "\n", store.count(conv));
    std::fflush(stdout);
  }
  EngineBuffers out(m, n);
  out.poison();
  int64_t got = store.load(conv, m, out.tokens.data(), n, out.target());
  std::string diff = got == n ? h.compare(out, n) : "loaded " + std::to_string(got) + " tokens";
  if (!diff.empty()) {
    std::fprintf(stderr, "append %s: final load differs: %s\n", conv.c_str(), diff.c_str());
    return 1;
  }
  return 0;
}

int run_hold(int argc, char** argv) {
  if (argc != 7) return usage();
  const std::string store_path = argv[2], conv = argv[3];
  int64_t seed, n, seq;
  if (!parse_i64(argv[4], seed) || !parse_i64(argv[5], n) || !parse_i64(argv[6], seq) || n < 1) return usage();
  const ModelSignature m = child_model();
  EngineBuffers h = history(m, n, static_cast<uint32_t>(seed));
  colikv::Store store(store_path, child_options(m));
  {
    const colikv_test::AppendHook hold([&](const std::string& id, int64_t at) {
      if (id != conv || at != seq) return;
      std::printf("mid-turn\n");
      std::fflush(stdout);
      char line[64];
      if (!std::fgets(line, sizeof line, stdin)) throw std::runtime_error("hold: stdin closed before the go");
    });
    store.append(conv, m, h.tokens.data(), n, h.source());
  }
  std::printf("committed %" PRId64 "\n", store.count(conv));
  std::fflush(stdout);
  return 0;
}

// Loads conv into out (sized for it) and checks it against `expect`; returns
// the count loaded, or -1 after saying what differs.
int64_t load_checked(colikv::Store& store, const std::string& conv, const EngineBuffers& expect, EngineBuffers& out,
                     int64_t per_turn) {
  out.poison();
  int64_t n = 0;
  try {
    n = store.load(conv, expect.model, out.tokens.data(), out.capacity, out.target());
  } catch (const colikv::Error& e) {
    if (e.code() != colikv::ErrorCode::kNotFound) throw;
    return 0;
  }
  std::string diff = n % per_turn != 0 ? "not a whole number of turns" : expect.compare(out, n);
  if (diff.empty()) return n;
  std::fprintf(stderr, "host: %s: load of %" PRId64 " tokens: %s\n", conv.c_str(), n, diff.c_str());
  return -1;
}

// Extends "shared" by one turn past what it holds, as every host does: a
// racing host's commit makes this one kConflict, and it retries (or, when
// the other extended it to the same length, this append is a no-op).
void extend_shared(colikv::Store& store, const EngineBuffers& shared, int64_t per_turn) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int64_t now = store.count("shared");
    const int64_t next = std::min(now + per_turn, shared.capacity);
    try {
      store.append("shared", shared.model, shared.tokens.data(), next, shared.source());
      return;
    } catch (const colikv::Error& e) {
      if (e.code() != colikv::ErrorCode::kConflict) throw;
    }
  }
  throw std::runtime_error("shared: 1000 conflicts in a row");
}

int run_host(int argc, char** argv) {
  if (argc != 9) return usage();
  const std::string store_path = argv[2], name = argv[3], other = argv[5];
  int64_t seed, other_seed, turns, per_turn;
  if (!parse_i64(argv[4], seed) || !parse_i64(argv[6], other_seed) || !parse_i64(argv[7], turns) ||
      !parse_i64(argv[8], per_turn) || turns < 1 || per_turn < 1)
    return usage();
  const ModelSignature m = child_model();
  const int64_t n = turns * per_turn;
  const EngineBuffers mine = history(m, n, static_cast<uint32_t>(seed));
  const EngineBuffers theirs = history(m, n, static_cast<uint32_t>(other_seed));
  const EngineBuffers shared = history(m, 2 * n, 777);
  EngineBuffers out(m, 2 * n);
  colikv::Store store(store_path, child_options(m));
  int64_t seen = 0;
  for (int64_t t = 1; t <= turns; ++t) {
    store.append(name, m, mine.tokens.data(), t * per_turn, mine.source());
    std::printf("ack %" PRId64 "\n", store.count(name));
    std::fflush(stdout);
    extend_shared(store, shared, per_turn);
    const int64_t got = load_checked(store, other, theirs, out, per_turn);
    if (got < 0) return 1;
    if (got < seen) {
      std::fprintf(stderr, "host: %s went back from %" PRId64 " to %" PRId64 " tokens\n", other.c_str(), seen, got);
      return 1;
    }
    seen = got;
    const colikv::PrefixMatch hit = store.match(m, theirs.tokens.data(), n);
    if (hit.tokens < seen) {
      std::fprintf(stderr, "host: match found %" PRId64 " tokens of %s, which holds %" PRId64 "\n", hit.tokens,
                   other.c_str(), seen);
      return 1;
    }
    const std::string fork = name + "/fork" + std::to_string(t);
    store.fork(name, fork, t * per_turn / 2);
    if (load_checked(store, fork, mine, out, 1) != t * per_turn / 2) return 1;
    if (load_checked(store, "shared", shared, out, per_turn) < 0) return 1;
  }
  return load_checked(store, name, mine, out, per_turn) == n ? 0 : 1;
}

struct Watched {
  std::string conv;
  int64_t final_count = 0;
  EngineBuffers expect;
  EngineBuffers out;
  int64_t last = 0;
};

int run_read(int argc, char** argv) {
  if (argc < 9 || (argc - 6) % 3 != 0) return usage();
  const std::string store_path = argv[2], done_file = argv[3];
  int64_t per_turn, read_only;
  if (!parse_i64(argv[4], per_turn) || !parse_i64(argv[5], read_only) || per_turn < 1) return usage();
  const ModelSignature m = child_model();
  std::vector<Watched> watched;
  for (int i = 6; i + 2 < argc; i += 3) {
    int64_t seed, final_count;
    if (!parse_i64(argv[i + 1], seed) || !parse_i64(argv[i + 2], final_count) || final_count < 1) return usage();
    watched.push_back(Watched{argv[i], final_count, history(m, final_count, static_cast<uint32_t>(seed)),
                              EngineBuffers(m, final_count), 0});
  }
  colikv::Options o = child_options(m);
  o.read_only = read_only != 0;
  colikv::Store store(store_path, o);
  int64_t loads = 0;
  // The bound only keeps a broken parent from leaving this process behind.
  for (int iter = 0; iter < 200000; ++iter) {
    const bool last_pass = access(done_file.c_str(), F_OK) == 0;
    for (auto& w : watched) {
      int64_t n = 0;
      w.out.poison();
      try {
        n = store.load(w.conv, m, w.out.tokens.data(), w.final_count, w.out.target());
      } catch (const colikv::Error& e) {
        if (e.code() != colikv::ErrorCode::kNotFound) throw;
        n = 0;  // not created yet
      }
      ++loads;
      if (n % per_turn != 0) {
        std::fprintf(stderr, "read %s: %" PRId64 " tokens is not a whole number of turns\n", w.conv.c_str(), n);
        return 1;
      }
      if (n < w.last) {
        std::fprintf(stderr, "read %s: count went back from %" PRId64 " to %" PRId64 "\n", w.conv.c_str(), w.last, n);
        return 1;
      }
      w.last = n;
      std::string diff = w.expect.compare(w.out, n);
      if (!diff.empty()) {
        std::fprintf(stderr, "read %s: load of %" PRId64 " tokens differs: %s\n", w.conv.c_str(), n, diff.c_str());
        return 1;
      }
      if (last_pass && n != w.final_count) {
        std::fprintf(stderr, "read %s: %" PRId64 " tokens at the end, expected %" PRId64 "\n", w.conv.c_str(), n,
                     w.final_count);
        return 1;
      }
    }
    if (last_pass) {
      std::printf("loads %" PRId64 "\n", loads);
      std::fflush(stdout);
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  std::fprintf(stderr, "read: %s never appeared\n", done_file.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  // A test of objects first lowers the size from which an append stores its chunks first.
  if (const char* v = std::getenv("COLIKV_TEST_OBJECTS_FIRST_MIN_BYTES"))
    colikv::detail::objects_first_min_bytes() = std::atoll(v);
  try {
    if (std::strcmp(argv[1], "append") == 0) return run_append(argc, argv);
    if (std::strcmp(argv[1], "read") == 0) return run_read(argc, argv);
    if (std::strcmp(argv[1], "host") == 0) return run_host(argc, argv);
    if (std::strcmp(argv[1], "hold") == 0) return run_hold(argc, argv);
  } catch (const colikv::Error& e) {
    std::fprintf(stderr, "colikv_store_child %s: %s error: %s\n", argv[1], colikv::error_code_name(e.code()), e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "colikv_store_child %s: %s\n", argv[1], e.what());
    return 1;
  }
  return usage();
}
