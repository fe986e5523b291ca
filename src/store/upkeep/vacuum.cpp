// Store::vacuum: the backend gives back the space of freed chunks.
#include "colikv/store.h"

#include "colikv/maintenance.h"

#include "catalog/backend_error.h"
#include "store/store_call.h"
#include "store/store_impl.h"

namespace colikv {
namespace detail {

VacuumReport run_vacuum(Store::Impl& s, const ProgressFn& progress) REQUIRES(s.mu) {
  s.require_writable("vacuum");
  // Outside any transaction (a vacuum runs in none): the operation names its errors.
  const ErrorContext::Scope named(s.catalog().errors(), s.where() + ": vacuum", Reading::kAny);
  VacuumReport r;
  s.catalog().free_queued_chunks();  // their space is given back too
  r.file_bytes_before = s.catalog().file_bytes();
  const detail::Catalog::CompactOutcome done = s.catalog().compact(s.where() + ": vacuum", s.options().chunk_target_bytes, progress);
  r.file_bytes_after = s.catalog().file_bytes();
  r.reclaimable_bytes = done.reclaimable_bytes;
  r.held_back = done.held_back;
  return r;
}

}  // namespace detail

VacuumReport Store::vacuum() {
  return detail::StoreCall::run(*impl_, [&](Store::Impl& s) REQUIRES(s.mu) {
    return detail::run_vacuum(s, ProgressFn());
  });
}

VacuumReport vacuum(Store& store, const ProgressFn& progress) {
  return detail::StoreCall::run(detail::StoreAccess::impl(store), [&](Store::Impl& s) REQUIRES(s.mu) {
    return detail::run_vacuum(s, progress);
  });
}

}  // namespace colikv
