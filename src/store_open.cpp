// Store itself: opening, moving and closing one, its location and options,
// and the schema versions.
#include "colikv/store.h"

#include "backend_error.h"
#include "store_call.h"
#include "store_impl.h"
#include "sqlite/migrations.h"

namespace colikv {

using detail::with_context;

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

const std::string& Store::path() const { return impl_->path; }

const Options& Store::options() const { return impl_->options; }

int Store::schema_version() const {
  detail::StoreCall call(*impl_, detail::StoreCall::NoWait{});  // reads no conversation
  return with_context(impl_->where(), [&] { return impl_->catalog->schema_version(); });
}

int Store::library_schema_version() { return detail::latest_schema_version(); }

}  // namespace colikv
