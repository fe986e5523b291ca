#include "colikv/error.h"

namespace colikv {

Error::Error(ErrorCode code, const std::string& message, int64_t position)
    : std::runtime_error(message), code_(code), position_(position) {}

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kModelMismatch: return "model mismatch";
    case ErrorCode::kDiverged: return "diverged tokens";
    case ErrorCode::kConflict: return "conflict";
    case ErrorCode::kCorrupt: return "corrupt data";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kDiskFull: return "disk full";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kIO: return "I/O error";
    case ErrorCode::kReadOnly: return "read-only";
    case ErrorCode::kTooLarge: return "too large";
    case ErrorCode::kVersion: return "schema version";
    case ErrorCode::kInternal: return "internal error";
    case ErrorCode::kEvicted: return "evicted";
    case ErrorCode::kUnsupported: return "unsupported";
  }
  return "unknown error";
}

}  // namespace colikv
