// The one check of the text a caller names conversations and describes them
// with (ids, titles, metadata) and of the paths it names files with: none
// holds a NUL byte. PostgreSQL's text cannot
// hold one and a C caller's string ends at it, so both backends refuse it
// alike, before anything is read or written, rather than one of them storing
// "a\0b" and "a\0c" apart and the other cutting both to "a" (and a path would
// be cut at it by every system call).
#ifndef COLIKV_SRC_CORE_TEXT_ARGUMENT_H
#define COLIKV_SRC_CORE_TEXT_ARGUMENT_H

#include <string>

#include "colikv/error.h"

namespace colikv {
namespace detail {

// Throws kInvalidArgument naming `where`, `what` and the byte offset when
// `value` holds a NUL byte (the value itself is not shown: it is cut there).
inline void require_no_nul(const std::string& value, const char* what, const std::string& where) {
  const size_t at = value.find('\0');
  if (at == std::string::npos) return;
  throw Error(ErrorCode::kInvalidArgument, where + ": the " + what + " of " + std::to_string(value.size()) +
                                               " bytes holds a NUL byte at byte " + std::to_string(at) +
                                               ", which no id, title, metadata or path may hold");
}

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_TEXT_ARGUMENT_H
