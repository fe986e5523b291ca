// Setting the append's sync point ("append:chunk", test_sync_point.h) for
// one scope: cleared when the scope ends, also when a failed REQUIRE or an
// error throws out of it, so that no later test case's appends call a
// callback whose captures are gone. And, for one scope, a read snapshot
// before every append's write transaction (ReadsBeforeWriteLock).
// In a build without the sync points (COLIKV_TEST_SYNC_POINTS off) the test
// cases that set one are not registered (tests/CMakeLists.txt, tag [sync]);
// one run by hand ends the process with 77, skipped, saying why.
#ifndef COLIKV_TESTS_APPEND_HOOK_H
#define COLIKV_TESTS_APPEND_HOOK_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>

#include "core/test_sync_point.h"
#include "store/write/append.h"

namespace colikv_test {

class AppendHook {
 public:
  using Fn = std::function<void(const std::string& id, int64_t seq)>;
#ifdef COLIKV_TEST_SYNC_POINTS
  explicit AppendHook(Fn hook) {
    colikv::detail::set_test_sync_point(kName, [hook = std::move(hook)](const void* arg) {
      const auto& at = *static_cast<const colikv::detail::AppendChunkPoint*>(arg);
      hook(at.id, at.seq);
    });
  }
  ~AppendHook() { colikv::detail::set_test_sync_point(kName, nullptr); }
  static bool set() { return colikv::detail::test_sync_point_set(kName); }
#else
  explicit AppendHook(const Fn&) {
    std::fprintf(stderr, "skipped: this case needs the test sync points (cmake -DCOLIKV_TEST_SYNC_POINTS=ON)\n");
    std::fflush(stderr);
    std::_Exit(77);
  }
  static bool set() { return false; }
#endif
  AppendHook(const AppendHook&) = delete;
  AppendHook& operator=(const AppendHook&) = delete;

 private:
  static constexpr const char* kName = "append:chunk";
};

// For one scope, every append reads what is committed in a read snapshot of
// its own before it takes its write transaction, however small its
// conversation (colikv::detail::one_transaction_max_bytes): what another
// writer does between the two is made on a few tokens.
class ReadsBeforeWriteLock {
 public:
  ReadsBeforeWriteLock() { colikv::detail::one_transaction_max_bytes() = -1; }
  ~ReadsBeforeWriteLock() { colikv::detail::one_transaction_max_bytes() = saved_; }
  ReadsBeforeWriteLock(const ReadsBeforeWriteLock&) = delete;
  ReadsBeforeWriteLock& operator=(const ReadsBeforeWriteLock&) = delete;

 private:
  const int64_t saved_ = colikv::detail::one_transaction_max_bytes();
};

}  // namespace colikv_test

#endif  // COLIKV_TESTS_APPEND_HOOK_H
