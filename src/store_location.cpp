#include "store_location.h"

namespace colikv {
namespace detail {

bool is_postgres_uri(const std::string& location) {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

std::string shown_location(const std::string& location) {
  if (!is_postgres_uri(location)) return location;
  std::string out = location;
  // scheme://user:password@host...: drop ":password" from the user info.
  const size_t authority = out.find("://") + 3;
  const size_t end = out.find_first_of("/?", authority);
  const size_t at = out.rfind('@', end == std::string::npos ? out.size() : end);
  if (at != std::string::npos && at >= authority) {
    const size_t colon = out.find(':', authority);
    if (colon != std::string::npos && colon < at) out.erase(colon, at - colon);
  }
  // ...?password=secret&...
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    if (p == 0 || (out[p - 1] != '?' && out[p - 1] != '&')) continue;
    const size_t value = p + 9;
    const size_t stop = out.find('&', value);
    out.replace(value, (stop == std::string::npos ? out.size() : stop) - value, "***");
  }
  return out;
}

}  // namespace detail

}  // namespace colikv
