// colikv/error.h: the one error model of the library.
//
// Every failing call of the C++ API throws colikv::Error. Its code() is one of
// ErrorCode, whose numeric values are exactly the negative return codes of the
// C API (colikv.h), and its what() is one line naming what failed and where
// (the store path, the conversation id, the position or chunk). A call that
// throws has changed nothing in the store.
#ifndef COLIKV_ERROR_H
#define COLIKV_ERROR_H

#include <cstdint>
#include <stdexcept>
#include <string>

#include "colikv/export.h"

namespace colikv {

enum class ErrorCode : int {
  kOk = 0,
  kNotFound = -1,        // the conversation (or store file) does not exist
  kModelMismatch = -2,   // the caller's model signature differs from the stored one
  kDiverged = -3,        // the caller's tokens differ from the committed ones (see Error::position)
  kConflict = -4,        // another writer changed the conversation meanwhile, or the id is taken
  kCorrupt = -5,         // stored data fails a checksum, size or structure check
  kBusy = -6,            // the database stayed locked longer than Options::busy_timeout_ms
  kDiskFull = -7,        // the disk or the store's size limit is full
  kInvalidArgument = -8, // a bad argument or a malformed input file
  kIO = -9,              // an operating-system read, write or sync failed
  kReadOnly = -10,       // a write to a store opened read-only, or on a read-only file
  kTooLarge = -11,       // the conversation does not fit the caller's maximum
  kVersion = -12,        // the store's schema is newer than this library
  kInternal = -13,       // a bug or an unexpected database error
  kEvicted = -14,        // the conversation's KV data was evicted to honour the store's byte
                         // budget; its token ids are kept (see Error::position)
  kUnsupported = -15,    // the store's backend does not offer the call (e.g. tenant roles on SQLite)
};

// The stable name of a code, e.g. "not found", "model mismatch".
COLIKV_API const char* error_code_name(ErrorCode code) noexcept;

class COLIKV_API Error : public std::runtime_error {
 public:
  // Out of line: the library's metrics count a failing call by the code of
  // the Error it throws, noted on the thread that makes it.
  Error(ErrorCode code, const std::string& message, int64_t position = -1);

  ErrorCode code() const noexcept { return code_; }
  // For kDiverged: the first position whose token differs; for kEvicted: the
  // first position whose KV data is gone (positions before it still load);
  // -1 otherwise.
  int64_t position() const noexcept { return position_; }

 private:
  ErrorCode code_;
  int64_t position_;
};

}  // namespace colikv

#endif  // COLIKV_ERROR_H
