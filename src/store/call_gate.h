// The calls in flight on a handle (a Store, a C colikv_store), so that closing
// it waits for them instead of tearing down what they use, and the process
// that opened it, so that a forked child's calls fail instead of joining
// threads or taking locks that exist only in the parent.
#ifndef COLIKV_SRC_CALL_GATE_H
#define COLIKV_SRC_CALL_GATE_H

#include <sys/types.h>

#include <condition_variable>
#include <mutex>
#include <string>

#include "core/thread_annotations.h"

namespace colikv {
namespace detail {

class CallGate {
 public:
  CallGate();
  CallGate(const CallGate&) = delete;
  CallGate& operator=(const CallGate&) = delete;

  // True in a process forked from the one that created the gate. Reads no
  // lock: one may have been held by a parent's thread at the fork.
  bool forked() const;

  // A call starts: counted until leave(), or refused (and not counted) in a
  // forked child or once close() has begun. The message is built only on a
  // refusal: a call's `where` costs a string.
  enum class Refusal { kNone, kForked, kClosing };
  Refusal try_enter() EXCLUDES(mu_);
  [[noreturn]] void refuse(Refusal why, const std::string& where) const EXCLUDES(mu_);
  template <class Where>
  void enter(Where&& where) {
    const Refusal r = try_enter();
    if (r != Refusal::kNone) refuse(r, where());
  }
  void leave() EXCLUDES(mu_);

  // Refuses new calls and waits until those in flight have left. Returns
  // false, waiting for nothing, in a forked child: the caller must then free
  // nothing that joins a thread or takes a lock of the parent's. `why`, when
  // not empty, is what a refused call's message says instead of "being
  // closed by another thread" (a handle closed for good, not being closed).
  bool close(const std::string& why = std::string()) EXCLUDES(mu_);

  // enter() ... leave() for one scope.
  class Call {
   public:
    template <class Where>
    Call(CallGate& g, Where&& where) : g_(g) {
      g_.enter(where);
    }
    ~Call() { g_.leave(); }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    CallGate& g_;
  };

 private:
  const pid_t pid_;
  mutable Mutex mu_;
  std::condition_variable left_;
  int in_flight_ GUARDED_BY(mu_) = 0;
  bool closing_ GUARDED_BY(mu_) = false;
  std::string why_ GUARDED_BY(mu_);  // close()'s reason, if it gave one
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CALL_GATE_H
