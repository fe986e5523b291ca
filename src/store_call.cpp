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

StoreCall::StoreCall(Store::Impl& s, const std::string* id) {
  if (t_call_depth == 0 && s.async) s.async->drain(id);
  lock_ = std::unique_lock<std::recursive_mutex>(s.mu);
  ++t_call_depth;
}

StoreCall::StoreCall(Store::Impl& s, NoWait) : lock_(s.mu) { ++t_call_depth; }

StoreCall::~StoreCall() { --t_call_depth; }

}  // namespace detail

}  // namespace colikv
