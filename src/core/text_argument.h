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

// The longest tenant name, in bytes (the tenants table's CHECK says the same).
constexpr size_t kMaxTenantBytes = 255;

// Throws kInvalidArgument naming `where` when `tenant` is not a name a tenant
// may have: longer than kMaxTenantBytes, or holding a control character
// (below 0x20, or 0x7f), which would reach terminals and logs that show it.
// The name is not shown (it may be that long, or hold those bytes).
inline void require_tenant_name(const std::string& tenant, const std::string& where) {
  if (tenant.size() > kMaxTenantBytes)
    throw Error(ErrorCode::kInvalidArgument, where + ": the tenant name of " + std::to_string(tenant.size()) +
                                                 " bytes is longer than " + std::to_string(kMaxTenantBytes) + " bytes");
  for (size_t i = 0; i < tenant.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(tenant[i]);
    if (c < 0x20 || c == 0x7f)
      throw Error(ErrorCode::kInvalidArgument, where + ": the tenant name holds the control character 0x" +
                                                   "0123456789abcdef"[c >> 4] + "0123456789abcdef"[c & 15] +
                                                   " at byte " + std::to_string(i) + ", which no tenant name may hold");
  }
}

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_TEXT_ARGUMENT_H
