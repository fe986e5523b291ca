#include "catalog/location.h"

#include <cctype>
#include <sstream>

#include "colikv/error.h"
#include "core/text_argument.h"

namespace colikv {
namespace detail {

namespace {

constexpr const char* kSchemes[] = {"postgresql://", "postgres://"};

// The length of the URI's scheme and "://", 0 when it has none of ours.
size_t scheme_length(const std::string& s) {
  for (const char* scheme : kSchemes) {
    const std::string p(scheme);
    if (s.size() < p.size()) continue;
    bool same = true;
    for (size_t i = 0; i < p.size() && same; ++i)
      same = std::tolower(static_cast<unsigned char>(s[i])) == p[i];
    if (same) return p.size();
  }
  return 0;
}

#if !COLIKV_WITH_POSTGRES
// Without libpq (a build with COLIKV_WITH_POSTGRES=OFF) nothing parses a URI,
// and no store on a server can be opened: a URI is shown without any of its
// text after the scheme, and a keyword/value string is recognised by libpq's
// common keywords alone.
bool looks_like_keywords(const std::string& location) {
  static const char* kKeywords[] = {"host", "hostaddr", "port", "dbname", "user", "password", "passfile",
                                    "service", "sslmode", "sslpassword", "connect_timeout", "options",
                                    "application_name", "target_session_attrs"};
  std::istringstream words(location);
  std::string word;
  bool any = false;
  while (words >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos) return false;
    bool known = false;
    for (const char* k : kKeywords) known = known || (eq == std::string(k).size() && word.compare(0, eq, k) == 0);
    if (!known) return false;
    any = true;
  }
  return any;
}
#endif

}  // namespace

bool is_postgres_uri(const std::string& location) { return scheme_length(location) != 0; }

std::string libpq_uri(const std::string& uri) {
  const size_t n = scheme_length(uri);
  if (n == 0) return uri;
  std::string out = uri;
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(out[i])));
  return out;
}

#if !COLIKV_WITH_POSTGRES
// The PostgreSQL build parses locations with libpq (postgres/pg_location.cpp).
bool is_keyword_conninfo(const std::string& location) {
  return !is_postgres_uri(location) && looks_like_keywords(location);
}

std::string shown_location(const std::string& location) {
  if (is_postgres_uri(location)) return "postgresql://(not shown: this build has no PostgreSQL backend)";
  if (looks_like_keywords(location)) return "(a libpq keyword/value string, not shown)";
  return location;
}

bool libpq_parses(const std::string&) { return false; }

std::string without_secrets(const std::string& text, const std::string&) { return text; }
#endif

void require_store_location(const std::string& location) {
  require_no_nul(location, "store location", "store");
  if (is_keyword_conninfo(location))
    throw Error(ErrorCode::kInvalidArgument,
                "store " + shown_location(location) +
                    ": a libpq keyword/value connection string is not a store location; write it as a "
                    "postgresql:// URI (its password in PGPASSWORD or ~/.pgpass), or a file path");
}

}  // namespace detail

}  // namespace colikv
