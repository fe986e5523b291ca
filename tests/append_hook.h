// Setting the process-global append hook (detail::append_chunk_hook) for one
// scope: cleared when the scope ends, also when a failed REQUIRE or an error
// throws out of it, so that no later test case's appends call a hook whose
// captures are gone.
#ifndef COLIKV_TESTS_APPEND_HOOK_H
#define COLIKV_TESTS_APPEND_HOOK_H

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "store_append.h"

namespace colikv_test {

class AppendHook {
 public:
  using Fn = std::function<void(const std::string& id, int64_t seq)>;
  explicit AppendHook(Fn hook) { colikv::detail::append_chunk_hook() = std::move(hook); }
  ~AppendHook() { colikv::detail::append_chunk_hook() = nullptr; }
  AppendHook(const AppendHook&) = delete;
  AppendHook& operator=(const AppendHook&) = delete;
};

}  // namespace colikv_test

#endif  // COLIKV_TESTS_APPEND_HOOK_H
