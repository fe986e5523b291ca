// StoreCall: the lock of one Store call (store_call.h).
#include "store/store_call.h"

#include <exception>
#include <functional>
#include <thread>

#include "store/write/async_writer.h"
#include "store/store_impl.h"

namespace colikv {

namespace detail {

bool in_call(const Store::Impl& s) noexcept {
  // Only this thread stores its own id there, and clears it before it
  // releases the Store's lock: a relaxed load cannot show it stale.
  return s.call_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

GateTicket& GateTicket::operator=(GateTicket&& o) noexcept {
  if (this != &o) {
    if (gate_) gate_->leave();
    gate_ = o.gate_;
    o.gate_ = nullptr;
  }
  return *this;
}

GateTicket::~GateTicket() {
  if (gate_) gate_->leave();
}

namespace {

// Enters s's gate, for `id`'s messages.
GateTicket enter_gate(Store::Impl& s, const std::string* id) {
  s.gate().enter([&] { return s.where(id ? *id : std::string()); });
  return GateTicket(&s.gate());
}

// An outermost call of s: its gate entered, then its queue of id (of all
// when null) drained; a call nested in one of s's on this thread: nothing.
GateTicket enter_unless_nested(Store::Impl& s, const std::string* id) {
  if (in_call(s)) return GateTicket();
  GateTicket t = enter_gate(s, id);
  if (s.async()) s.async()->drain(id);  // before the lock: the writer thread takes it to commit
  return t;
}

Store::Impl& unforked(Store::Impl& s) {
  if (s.gate().forked()) s.gate().refuse(CallGate::Refusal::kForked, s.where());
  return s;
}

}  // namespace

StoreHold::StoreHold(Store::Impl& s, bool counts_errors)
    : s_(s), lock_(s.mu.native()), counts_errors_(counts_errors) {
  if (s_.calls_in_++ == 0) s_.call_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  exceptions_ = std::uncaught_exceptions();
}

void StoreHold::failed() noexcept {
  try {
    throw;  // the exception this call's catch handler is handling
  } catch (const Error& e) {
    thrown_ = e.code();
  } catch (...) {
    thrown_ = ErrorCode::kInternal;
  }
}

StoreHold::~StoreHold() {
  if (--s_.calls_in_ == 0) {  // this Store's outermost call on this thread
    if (std::uncaught_exceptions() > exceptions_) {
      s_.pending_ = PendingCounts();  // its transactions rolled back
      if (counts_errors_)
        s_.counters().count_error(thrown_);
      else if (thrown_ == ErrorCode::kConflict)
        StoreCounters::add(s_.counters().conflicts, 1);  // a queued turn's: wait() counts the error
    } else {
      s_.counters().commit(s_.pending_);
    }
    // What a tenant's retention deleted inside this call's transactions, erased
    // from the files once the outermost of them has committed (an append may be
    // a savepoint of write's or a queued turn's transaction). Never throws.
    s_.erase_if_due();
    s_.call_thread_.store(std::thread::id(), std::memory_order_relaxed);
  }
}

StoreCall::StoreCall(Store::Impl& s, const std::string* id) : gate_(enter_unless_nested(s, id)), hold_(s, true) {}

StoreCall::StoreCall(Store::Impl& s, NoWait) : hold_(unforked(s), false) {
  if (!s.has_catalog()) s.gate().refuse(CallGate::Refusal::kClosing, s.where());  // published (Store::publish)
}

namespace {

Store::Impl* lower(Store::Impl& a, Store::Impl& b) { return std::less<Store::Impl*>()(&a, &b) ? &a : &b; }

}  // namespace

StorePairCall::StorePairCall(Store::Impl& a, Store::Impl& b, const std::string& id)
    : first_(lower(a, b)), second_(first_ == &a ? &b : &a) {
  // A Store this thread is in a call of already (the copy is made from a
  // progress callback of its call) is not entered again nor drained: its
  // writer thread would wait for the lock this thread holds.
  if (!in_call(*first_)) first_gate_ = enter_gate(*first_, &id);
  if (!in_call(*second_)) second_gate_ = enter_gate(*second_, &id);
  // The queues are drained before either lock is taken: the writer thread
  // of each takes its Store's lock to commit.
  if (first_gate_ && first_->async()) first_->async()->drain(&id);
  if (second_gate_ && second_->async()) second_->async()->drain(&id);
  first_hold_.emplace(*first_, true);
  second_hold_.emplace(*second_, true);
}

void StorePairCall::failed() noexcept {
  first_hold_->failed();
  second_hold_->failed();
}

void close_store(std::unique_ptr<Store::Impl>& impl) noexcept {
  if (!impl) return;
  if (impl->gate().forked()) {
    (void)impl.release();  // joining its threads would hang the child, and SQLite must not close there
    return;
  }
  if (impl->async()) impl->async()->pause(false);  // a call blocked on the queue bound must be able to finish
  impl->gate().close();
  impl.reset();  // commits what is queued (~Impl)
}

}  // namespace detail

}  // namespace colikv
