// The one error type that crosses catalog.h. A backend turns its own
// exceptions (SQLite's, libpq's results) into BackendError in its own files,
// and names it by its catalog's ErrorContext (the store and the operation of
// the open transaction) where it throws, so that users see one colikv::Error
// naming the store, the operation and the database's words, and the store
// adds no context at each call.
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
// doing: its catalog's ErrorContext names it before it is thrown across
// catalog.h (with_context, while a catalog opens). Caught as colikv::Error
// where no context is added, it is complete but for that prefix.
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

// What a catalog's errors are named by (catalog.h, "Errors"): the `what` of
// its outermost open transaction (Catalog::begin's), which names the store
// and the operation, else the store alone. Kept by the backend's begin, with
// a Scope its outermost transaction holds (a store operation that runs in no
// transaction may hold one too); one per catalog, used by one thread at a time.
class ErrorContext {
 public:
  // "store PATH", as Store::Impl::where() names it; set once the catalog is open.
  void set_store(std::string store) { store_ = std::move(store); }

  // While it lives, errors are named by `what` (reading kStoredRows: a read
  // snapshot's). Restores what was there before when it ends.
  class Scope {
   public:
    Scope(ErrorContext& c, const std::string& what, Reading reading)
        : c_(c), what_(std::move(c.what_)), reading_(c.reading_), open_(c.open_) {
      c_.what_ = what;
      c_.reading_ = reading;
      c_.open_ = true;
    }
    ~Scope() {
      c_.what_ = std::move(what_);
      c_.reading_ = reading_;
      c_.open_ = open_;
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ErrorContext& c_;
    std::string what_;
    Reading reading_;
    bool open_;
  };

  // `e` as users see it: named once, by the open transaction, else the store.
  // `reading` kStoredRows: the call read stored rows whatever the transaction.
  Error name(const BackendError& e, Reading reading = Reading::kAny) const {
    if (open_ && reading_ == Reading::kStoredRows) reading = Reading::kStoredRows;
    const std::string& what = open_ ? what_ : store_;
    if (what.empty()) return Error(e.code(), e.what());
    return e.in_context(what, reading);
  }

 private:
  std::string store_;
  std::string what_;
  Reading reading_ = Reading::kAny;
  bool open_ = false;
};

// Runs f(), turning a BackendError into colikv::Error prefixed by `what`
// (for a catalog being opened, whose errors() names nothing yet);
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

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_BACKEND_ERROR_H
