// Store::adopt and colikv_adopt's core: a loadable prefix match and the load
// of its rows in one read snapshot, so that a writer rewriting the matched
// conversation in between cannot hand the engine another history.
#include <string>

#include "colikv/store.h"
#include "store/store_call.h"
#include "store/store_impl.h"

namespace colikv {

PrefixMatch Store::adopt(const ModelSignature& model, const int32_t* prompt, int64_t len, int64_t from,
                         int32_t* tokens, const KvTarget& kv) {
  return detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {  // waits for every queued turn: the match may be any conversation
    const std::string here = s.where() + ": adopt";
    if (from < 0 || from > len)
      throw Error(ErrorCode::kInvalidArgument, here + ": from " + std::to_string(from) + " is outside [0, " +
                                                   std::to_string(len) + "]");
    // The nested calls below take savepoints inside this snapshot: one view of the store.
    const auto snapshot = s.catalog().begin(detail::Catalog::Access::kRead, here);
    PrefixMatch r = match_loadable(model, prompt, len);
    if (r.tokens <= from) return r;
    load_range(r.id, model, from, r.tokens, tokens, kv);
    for (int64_t p = from; p < r.tokens; ++p)
      if (tokens[p] != prompt[p])
        throw Error(ErrorCode::kCorrupt, s.where(r.id) + ": adopt: the prefix index matched " +
                                             std::to_string(r.tokens) + " prompt tokens, but position " +
                                             std::to_string(p) + " holds token " + std::to_string(tokens[p]) +
                                             " where the prompt has " + std::to_string(prompt[p]) +
                                             " (run colikv verify)");
    detail::StoreCounters::add(s.counters().adoptions, 1);
    return r;
  });
}

}  // namespace colikv
