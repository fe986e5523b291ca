#include "store/call_gate.h"

#include <unistd.h>

#include "colikv/error.h"

namespace colikv {
namespace detail {

CallGate::CallGate() : pid_(::getpid()) {}

bool CallGate::forked() const { return ::getpid() != pid_; }

CallGate::Refusal CallGate::try_enter() {
  if (forked()) return Refusal::kForked;
  LockGuard<Mutex> lock(mu_);
  if (closing_) return Refusal::kClosing;
  ++in_flight_;
  return Refusal::kNone;
}

void CallGate::refuse(Refusal why, const std::string& where) const {
  if (why == Refusal::kForked)
    throw Error(ErrorCode::kInvalidArgument,
                where + ": this handle was opened by process " + std::to_string(pid_) +
                    " and cannot be used in its forked child " + std::to_string(::getpid()) +
                    " (its threads and locks stay in the parent); open the store again in the child");
  std::string closed;
  {
    LockGuard<Mutex> lock(mu_);
    closed = why_;
  }
  throw Error(ErrorCode::kInvalidArgument,
              where + ": " + (closed.empty() ? "the handle is being closed by another thread" : closed));
}

void CallGate::leave() {
  // Notified under the lock: a close() waiting for the last call may destroy
  // the gate as soon as it sees none in flight, so the condition variable must
  // not be touched after the mutex is released.
  LockGuard<Mutex> lock(mu_);
  --in_flight_;
  left_.notify_all();
}

bool CallGate::close(const std::string& why) {
  if (forked()) return false;
  UniqueLock<Mutex> lock(mu_);
  closing_ = true;
  if (!why.empty()) why_ = why;
  while (in_flight_ != 0) left_.wait(lock.native());
  return true;
}

}  // namespace detail
}  // namespace colikv
