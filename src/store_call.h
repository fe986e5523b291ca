// StoreCall, the lock every Store call takes (store_call.cpp). Not installed.
#ifndef COLIKV_SRC_STORE_CALL_H
#define COLIKV_SRC_STORE_CALL_H

#include <mutex>
#include <string>

#include "colikv/store.h"
#include "metrics.h"

namespace colikv {
namespace detail {

class CallGate;

// Locks a Store for one call after waiting for the queued appends the call
// must see: of the conversation named, or of all (read your own writes).
// An outermost call is counted in the Store's gate: it fails at once in a
// forked child or while the Store is being destroyed, and the destructor
// waits for it.
// Calls made from inside another call of the same thread (and the writer
// thread's own) do not wait: the outer call did, and waiting while holding
// the Store's lock would deadlock the writer.
// The outermost call on a thread commits the Store's pending counts when it
// returns and drops them when it throws, counting the error by its code
// (colikv/metrics.h) while it is still in the gate.
class StoreCall {
 public:
  StoreCall(Store::Impl& s, const std::string* id);  // null: every conversation
  StoreCall(Store::Impl& s, const std::string& id) : StoreCall(s, &id) {}
  explicit StoreCall(Store::Impl& s) : StoreCall(s, nullptr) {}
  ~StoreCall();
  StoreCall(const StoreCall&) = delete;
  StoreCall& operator=(const StoreCall&) = delete;

  // For the writer thread: lock without waiting.
  struct NoWait {};
  StoreCall(Store::Impl& s, NoWait);

 private:
  void enter_counting() noexcept;

  Store::Impl& s_;
  std::unique_lock<std::recursive_mutex> lock_;
  CallGate* gate_ = nullptr;  // entered by an outermost call: left last, after the lock
  bool counts_errors_ = true;  // false for the writer thread's own calls: wait() reports their errors
  int exceptions_ = 0;         // std::uncaught_exceptions() when it began
  uint64_t errors_noted_ = 0;  // errors_noted() when it began
  StoreCounters* outer_counters_ = nullptr;
};

// The lock of one call on two Stores (copy_conversation), as StoreCall's
// on each: both gates entered, both queues of `id` drained, both locks
// taken. Gates and locks are taken in one order, the Stores' addresses', so
// that two calls in opposite directions cannot each hold one lock and wait
// for the other; and closing either Store waits for the call.
class StorePairCall {
 public:
  StorePairCall(Store::Impl& a, Store::Impl& b, const std::string& id);
  ~StorePairCall();
  StorePairCall(const StorePairCall&) = delete;
  StorePairCall& operator=(const StorePairCall&) = delete;

 private:
  Store::Impl* first_;
  Store::Impl* second_;
  bool entered_ = false;  // the gates, by an outermost call: left last, after the locks
  std::unique_lock<std::recursive_mutex> first_lock_;
  std::unique_lock<std::recursive_mutex> second_lock_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_STORE_CALL_H
