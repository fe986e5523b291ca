// StoreCall: the lock of one Store call (store_call.h).
#include "store_call.h"

#include "async_writer.h"
#include "store_impl.h"

namespace colikv {



namespace detail {

namespace {

// A Store call in progress on this thread: nested calls and the writer
// thread's own do not wait for the queue (see StoreCall).
thread_local int t_call_depth = 0;

}  // namespace

StoreCall::StoreCall(Store::Impl& s, const std::string* id) : s_(s) {
  if (t_call_depth == 0) {
    s.gate.enter([&] { return s.where(id ? *id : std::string()); });
    gate_ = &s.gate;
    try {
      if (s.async) s.async->drain(id);
    } catch (...) {
      s.gate.leave();
      throw;
    }
  }
  lock_ = std::unique_lock<std::recursive_mutex>(s.mu);
  ++t_call_depth;
}

StoreCall::StoreCall(Store::Impl& s, NoWait) : s_(s) {
  if (s.gate.forked()) s.gate.refuse(CallGate::Refusal::kForked, s.where());
  lock_ = std::unique_lock<std::recursive_mutex>(s.mu);
  if (!s.catalog) s.gate.refuse(CallGate::Refusal::kClosing, s.where());  // published (Store::publish)
  ++t_call_depth;
}

StoreCall::~StoreCall() {
  --t_call_depth;
  // What a tenant's retention deleted inside this call's transactions, erased
  // from the files once the outermost of them has committed (an append may be
  // a savepoint of write's or a queued turn's transaction). Never throws.
  if (t_call_depth == 0) s_.erase_if_due();
  lock_ = {};
  if (gate_) gate_->leave();  // last: the Store may be destroyed as soon as the gate is left
}

void close_store(std::unique_ptr<Store::Impl>& impl) noexcept {
  if (!impl) return;
  if (impl->gate.forked()) {
    (void)impl.release();  // joining its threads would hang the child, and SQLite must not close there
    return;
  }
  if (impl->async) impl->async->pause(false);  // a call blocked on the queue bound must be able to finish
  impl->gate.close();
  impl.reset();  // commits what is queued (~Impl)
}

}  // namespace detail

}  // namespace colikv
