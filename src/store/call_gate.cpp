#include "store/call_gate.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "colikv/error.h"

namespace colikv {
namespace detail {

namespace {

// Which process armed the marker: a word on a page the kernel hands a forked
// child zeroed (MADV_WIPEONFORK, Linux 4.14), so that forked() reads memory
// instead of making the getpid system call on every call of every handle.
// A child arms it again with its own id when it creates its first gate; from
// then on a gate of its parent's sees another id. Null where the kernel
// cannot wipe on fork: forked() asks getpid() each time.
std::atomic<pid_t>* fork_marker() {
  static std::atomic<pid_t>* const marker = []() -> std::atomic<pid_t>* {
#if defined(MADV_WIPEONFORK)
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    if (::madvise(p, page, MADV_WIPEONFORK) != 0) {
      ::munmap(p, page);
      return nullptr;
    }
    return new (p) std::atomic<pid_t>(0);  // the page lives as long as the process
#else
    return nullptr;
#endif
  }();
  return marker;
}

}  // namespace

CallGate::CallGate() : pid_(::getpid()) {
  // Zero in a child that has created no gate yet, which this one is the first of.
  if (std::atomic<pid_t>* marker = fork_marker()) marker->store(pid_, std::memory_order_relaxed);
}

bool CallGate::forked() const {
  const std::atomic<pid_t>* marker = fork_marker();
  return (marker ? marker->load(std::memory_order_relaxed) : ::getpid()) != pid_;
}

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
