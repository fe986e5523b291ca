// The one error type that crosses catalog.h. A backend turns its own
// exceptions (SQLite's, libpq's results) into BackendError in its own files;
// the store adds what it was doing with with_context, so that users see one
// colikv::Error naming the store, the operation and the database's words.
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

// A colikv::Error raised by a backend, not yet named by what the store was
// doing: with_context prefixes it. Caught as colikv::Error where no context
// is added, it is complete but for that prefix.
class BackendError : public Error {
 public:
  BackendError(ErrorCode code, const std::string& message) : Error(code, message) {}
  // `stored_rows_message`, when not empty, is what the error means while the
  // store reads stored rows (Reading::kStoredRows): kCorrupt with that text.
  BackendError(ErrorCode code, const std::string& message, std::string stored_rows_message)
      : Error(code, message), stored_rows_message_(std::move(stored_rows_message)) {}

  // The colikv::Error that users see: `what` (the store and the operation)
  // before the backend's message.
  Error in_context(const std::string& what, Reading reading) const {
    if (reading == Reading::kStoredRows && !stored_rows_message_.empty())
      return Error(ErrorCode::kCorrupt, what + ": " + stored_rows_message_);
    return Error(code(), what + ": " + this->what());
  }

 private:
  std::string stored_rows_message_;
};

// Runs f(), turning a BackendError into colikv::Error prefixed by `what`;
// any other exception, a colikv::Error that names its context already among
// them, passes unchanged.
template <class F>
auto with_context(const std::string& what, F&& f, Reading reading = Reading::kAny) -> decltype(f()) {
  try {
    return f();
  } catch (const BackendError& e) {
    throw e.in_context(what, reading);
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
