// StoreCall: the lock of one Store call (store_call.h).
#include "store_call.h"

#include <exception>
#include <functional>

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
  enter_counting();
}

StoreCall::StoreCall(Store::Impl& s, NoWait) : s_(s), counts_errors_(false) {
  if (s.gate.forked()) s.gate.refuse(CallGate::Refusal::kForked, s.where());
  lock_ = std::unique_lock<std::recursive_mutex>(s.mu);
  if (!s.catalog) s.gate.refuse(CallGate::Refusal::kClosing, s.where());  // published (Store::publish)
  enter_counting();
}

void StoreCall::enter_counting() noexcept {
  ++t_call_depth;
  ++s_.calls_in;
  exceptions_ = std::uncaught_exceptions();
  errors_noted_ = errors_noted();
  // The backend's lock waits and reclaims in this call are this Store's.
  outer_counters_ = exchange_counters(&s_.counters);
}

StoreCall::~StoreCall() {
  --t_call_depth;
  exchange_counters(outer_counters_);
  if (--s_.calls_in == 0) {  // this Store's outermost call (another Store's call may hold this one)
    if (std::uncaught_exceptions() > exceptions_) {
      s_.pending = PendingCounts();  // its transactions rolled back
      // The error it throws was made in it (the last one noted), or is no colikv::Error.
      const ErrorCode code = errors_noted() != errors_noted_ ? last_error_noted() : ErrorCode::kInternal;
      if (counts_errors_)
        s_.counters.count_error(code);
      else if (code == ErrorCode::kConflict)
        StoreCounters::add(s_.counters.conflicts, 1);  // a queued turn's: wait() counts the error
    } else {
      s_.counters.commit(s_.pending);
    }
  }
  if (t_call_depth == 0) {
    // What a tenant's retention deleted inside this call's transactions, erased
    // from the files once the outermost of them has committed (an append may be
    // a savepoint of write's or a queued turn's transaction). Never throws.
    s_.erase_if_due();
  }
  lock_ = {};
  if (gate_) gate_->leave();  // last: the Store may be destroyed as soon as the gate is left
}

namespace {

Store::Impl* lower(Store::Impl& a, Store::Impl& b) { return std::less<Store::Impl*>()(&a, &b) ? &a : &b; }

}  // namespace

StorePairCall::StorePairCall(Store::Impl& a, Store::Impl& b, const std::string& id)
    : first_(lower(a, b)), second_(first_ == &a ? &b : &a) {
  if (t_call_depth == 0) {
    first_->gate.enter([&] { return first_->where(id); });
    try {
      second_->gate.enter([&] { return second_->where(id); });
    } catch (...) {
      first_->gate.leave();
      throw;
    }
    entered_ = true;
    // The queues are drained before either lock is taken: the writer thread
    // of each takes its Store's lock to commit.
    try {
      if (first_->async) first_->async->drain(&id);
      if (second_->async) second_->async->drain(&id);
    } catch (...) {
      second_->gate.leave();
      first_->gate.leave();
      throw;
    }
  }
  first_lock_ = std::unique_lock<std::recursive_mutex>(first_->mu);
  second_lock_ = std::unique_lock<std::recursive_mutex>(second_->mu);
  ++t_call_depth;
}

StorePairCall::~StorePairCall() {
  --t_call_depth;
  if (t_call_depth == 0) {  // as ~StoreCall, for each Store
    first_->erase_if_due();
    second_->erase_if_due();
  }
  second_lock_ = {};
  first_lock_ = {};
  if (entered_) {
    second_->gate.leave();
    first_->gate.leave();  // last: either Store may be destroyed as soon as its gate is left
  }
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
