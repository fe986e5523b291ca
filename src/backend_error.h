// A backend's exceptions (SQLiteCpp's, ...) become colikv::Error naming what
// the store was doing. Each backend's translation is listed once, beside the
// factory that opens it (catalog_factory.cpp).
#ifndef COLIKV_SRC_BACKEND_ERROR_H
#define COLIKV_SRC_BACKEND_ERROR_H

#include <string>
#include <utility>

#include "colikv/error.h"

namespace colikv {
namespace detail {

enum class Reading {
  kAny,
  // Reading stored rows: a value larger than any colikv writes means a
  // damaged or hostile store (kCorrupt), not the caller's argument.
  kStoredRows,
};

// Inside a catch block: rethrows the exception being handled as colikv::Error
// prefixed by `what` if a backend threw it; anything else unchanged.
[[noreturn]] void rethrow_backend_error(const std::string& what, Reading reading);

// Runs f(), turning backend exceptions into colikv::Error with context.
template <class F>
auto with_context(const std::string& what, F&& f, Reading reading = Reading::kAny) -> decltype(f()) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (...) {
    rethrow_backend_error(what, reading);
  }
}

// with_context for a read of stored rows.
template <class F>
auto read_rows(const std::string& what, F&& f) -> decltype(f()) {
  return with_context(what, std::forward<F>(f), Reading::kStoredRows);
}

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_BACKEND_ERROR_H
