// StoreCall, the lock every Store call takes (store_call.cpp). Not installed.
#ifndef COLIKV_SRC_STORE_CALL_H
#define COLIKV_SRC_STORE_CALL_H

#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "colikv/error.h"
#include "colikv/store.h"
#include "metrics/metrics.h"
#include "store/store_impl.h"  // the lock the annotations name
#include "core/thread_annotations.h"

namespace colikv {
namespace detail {

class CallGate;

// A call counted in a Store's gate (CallGate::enter) until it is destroyed.
class GateTicket {
 public:
  GateTicket() = default;
  explicit GateTicket(CallGate* entered) : gate_(entered) {}
  GateTicket(GateTicket&& o) noexcept : gate_(o.gate_) { o.gate_ = nullptr; }
  GateTicket& operator=(GateTicket&& o) noexcept;
  ~GateTicket();
  explicit operator bool() const { return gate_ != nullptr; }

 private:
  CallGate* gate_ = nullptr;
};

// A Store's lock held for one call, and the Store's call nesting: the
// outermost hold of a Store on a thread (Store::Impl::call_thread_) commits
// the Store's pending counts when it ends and drops them when an exception
// ends it, counting the error by its code (colikv/metrics.h) unless
// counts_errors is false (then only a conflict is counted), and erases what
// a tenant's retention deleted in it (Store::Impl::erase_if_due).
// The code is the one failed() saw: the call's catch handler (StoreCall::run)
// tells it what the call throws, which may have been made on another thread
// (a pool worker's) or be no colikv::Error (then kInternal).
class SCOPED_CAPABILITY StoreHold {
 public:
  StoreHold(Store::Impl& s, bool counts_errors) ACQUIRE(s.mu);
  ~StoreHold() RELEASE();
  StoreHold(const StoreHold&) = delete;
  StoreHold& operator=(const StoreHold&) = delete;

  // In a catch handler of the call: the exception being handled is what the
  // call throws.
  void failed() noexcept;

 private:
  Store::Impl& s_;
  std::unique_lock<std::recursive_mutex> lock_;
  bool counts_errors_;
  int exceptions_ = 0;                       // std::uncaught_exceptions() when it began
  ErrorCode thrown_ = ErrorCode::kInternal;  // what failed() saw
};

// True when this thread is in a call of s (holds its lock in a StoreHold):
// a call on s now is nested in that one.
bool in_call(const Store::Impl& s) noexcept;

// Locks a Store for one call after waiting for the queued appends the call
// must see: of the conversation named, or of all (read your own writes).
// A Store's outermost call on a thread is counted in the Store's gate: it
// fails at once in a forked child or while the Store is being destroyed, and
// the destructor waits for it.
// A call nested in a call of the same Store on the same thread (a progress
// callback's), and the writer thread's own, does not wait: the outer call
// did, and waiting while holding the Store's lock would deadlock the writer.
// A call on another Store from inside it is that Store's outermost call.
//
// A call is made by run() only, which runs its body in a try block whose
// catch (...) tells the hold what the call throws before it rethrows: the
// Store counts the error its call throws by the exception itself. Only the
// outermost call's count is kept, so a nested call's error is counted once,
// as its outer call's if it escapes that one too.
class SCOPED_CAPABILITY StoreCall {
 public:
  // For the writer thread: lock without waiting.
  struct NoWait {};

  // Runs body(s) as one call of s, locked as the constructor named by `where`
  // locks it: a conversation's id (const std::string& or a pointer, null for
  // every conversation) or NoWait; run(s, body) waits for every conversation.
  // body is a lambda taking the Store::Impl it runs under the lock of, which
  // says so (REQUIRES(s.mu)); it is called as body.operator()(s) because
  // clang's analysis maps a lambda's arguments one place off in body(s).
  template <class Where, class F>
  static decltype(auto) run(Store::Impl& s, const Where& where, F&& body) {
    StoreCall call(s, where);
    try {
      return body.operator()(s);
    } catch (...) {
      call.hold_.failed();
      throw;
    }
  }
  template <class F>
  static decltype(auto) run(Store::Impl& s, F&& body) {
    return run(s, static_cast<const std::string*>(nullptr), std::forward<F>(body));
  }

  ~StoreCall() RELEASE() = default;
  StoreCall(const StoreCall&) = delete;
  StoreCall& operator=(const StoreCall&) = delete;

 private:
  StoreCall(Store::Impl& s, const std::string* id) ACQUIRE(s.mu);  // null: every conversation
  StoreCall(Store::Impl& s, const std::string& id) ACQUIRE(s.mu) : StoreCall(s, &id) {}
  StoreCall(Store::Impl& s, NoWait) ACQUIRE(s.mu);

  GateTicket gate_;  // entered by an outermost call: left last, after the lock
  StoreHold hold_;
};

// The lock of one call on two Stores (copy_conversation), as StoreCall's
// on each: the gate of each Store this thread is not in a call of already
// entered, their queues of `id` drained, both locks taken. Gates and locks
// are taken in one order, the Stores' addresses', so that two calls in
// opposite directions cannot each hold one lock and wait for the other; and
// closing either Store waits for the call. Either Store counts its error.
class SCOPED_CAPABILITY StorePairCall {
 public:
  // Runs body(a, b) as one call of both (StoreCall::run).
  template <class F>
  static decltype(auto) run(Store::Impl& a, Store::Impl& b, const std::string& id, F&& body) {
    StorePairCall call(a, b, id);
    try {
      return body.operator()(a, b);
    } catch (...) {
      call.failed();
      throw;
    }
  }

  ~StorePairCall() RELEASE() = default;
  StorePairCall(const StorePairCall&) = delete;
  StorePairCall& operator=(const StorePairCall&) = delete;

 private:
  StorePairCall(Store::Impl& a, Store::Impl& b, const std::string& id) ACQUIRE(a.mu, b.mu);
  // In the call's catch handler, before it rethrows (StoreHold::failed).
  void failed() noexcept;

  Store::Impl* first_;
  Store::Impl* second_;
  // Destroyed in reverse: the locks, then the gates (either Store may be
  // destroyed as soon as its gate is left).
  GateTicket first_gate_, second_gate_;
  std::optional<StoreHold> first_hold_, second_hold_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_STORE_CALL_H
