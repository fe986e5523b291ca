// Store itself: opening, moving and closing one, its location and options,
// and the schema versions.
#include "colikv/store.h"

#include <exception>

#include "store/write/async_writer.h"
#include "catalog/backend_error.h"
#include "store/store_call.h"
#include "store/store_impl.h"

namespace colikv {


Store::Store(const std::string& path, const Options& options) : impl_(new Impl(path, options)) {}

Store::~Store() { detail::close_store(impl_); }

Store::Store(Store&&) noexcept = default;

Store& Store::operator=(Store&& other) noexcept {
  if (this != &other) {
    detail::close_store(impl_);
    impl_ = std::move(other.impl_);
  }
  return *this;
}

const std::string& Store::path() const { return impl_->path(); }

const Options& Store::options() const { return impl_->options(); }

int Store::schema_version() const {
  return detail::StoreCall::run(*impl_, detail::StoreCall::NoWait{}, [&](Store::Impl& s) REQUIRES(s.mu) {  // reads no conversation
    return s.catalog().schema_version();
  });
}

void Store::publish() {
  Impl& s = *impl_;
  detail::StagedStorePtr staged;
  {
    detail::CallGate::Call in_flight(s.gate(), [&] { return s.where(); });
    detail::LockGuard<detail::RecursiveMutex> lock(s.mu);
    if (!s.options().create_staged)
      throw Error(ErrorCode::kInvalidArgument,
                  s.where() + ": publish: this Store was not opened with Options::create_staged");
    staged = s.take_staged();  // claimed: a publish racing this one finds none
    if (!staged) throw Error(ErrorCode::kInvalidArgument, s.where() + ": publish: published already");
  }
  // Closed as the destructor closes it (close_store), then for good: once
  // the calls in flight have left, nothing more can be queued.
  if (s.async()) s.async()->pause(false);
  s.gate().close("this Store was closed by publish(); open the store again to use it");
  // The new store is whole only with every turn queued for it.
  std::exception_ptr failed;
  try {
    if (s.async()) s.async()->wait(nullptr);
  } catch (...) {
    failed = std::current_exception();
  }
  s.stop_async();
  {
    detail::LockGuard<detail::RecursiveMutex> lock(s.mu);
    s.close_catalog();  // the last connection's close folds the WAL into the file
  }
  if (failed) std::rethrow_exception(failed);  // staged's destructor removes the files
  detail::publish_staged(*staged);
}

int Store::library_schema_version() { return detail::latest_schema_version_for(std::string()); }

int Store::library_schema_version(const std::string& location) { return detail::latest_schema_version_for(location); }

}  // namespace colikv
