#include "store_location.h"

#if COLIKV_WITH_POSTGRES
#include <libpq-fe.h>
#endif

#include <cctype>
#include <memory>
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

#if COLIKV_WITH_POSTGRES
struct ConninfoDeleter {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};
using Conninfo = std::unique_ptr<PQconninfoOption, ConninfoDeleter>;

// libpq's parse of a URI or keyword/value string; null when it cannot parse
// it (its message is dropped: it may quote the password).
Conninfo parse(const std::string& conninfo) {
  char* err = nullptr;
  Conninfo o(PQconninfoParse(conninfo.c_str(), &err));
  if (err) PQfreemem(err);
  return o;
}

// A value for display: control characters, spaces and '%' percent-encoded,
// so that the line stays one line and the value one token.
std::string shown_value(const char* v) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : std::string(v)) {
    if (c < 0x21 || c == 0x7f || c == '%') {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool secret(const PQconninfoOption& o) { return o.dispchar && o.dispchar[0] == '*'; }

const char* value_of(const PQconninfoOption* opts, const std::string& key) {
  for (const PQconninfoOption* o = opts; o->keyword; ++o)
    if (key == o->keyword) return o->val;
  return nullptr;
}

std::string shown_uri(const std::string& location) {
  const std::string scheme = "postgresql://";
  const Conninfo opts = parse(libpq_uri(location));
  if (!opts) return scheme + "(a URI libpq cannot parse)";
  std::string out = scheme;
  const char* user = value_of(opts.get(), "user");
  const char* host = value_of(opts.get(), "host");
  const char* port = value_of(opts.get(), "port");
  const char* db = value_of(opts.get(), "dbname");
  // A password with an unencoded '/' ends libpq's user info early: the rest
  // of it would then show as a port or database name.
  const auto has_at = [](const char* v) { return v && std::string(v).find('@') != std::string::npos; };
  if (location.find('@') != std::string::npos && (!(user && *user) || has_at(host) || has_at(port) || has_at(db)))
    return scheme + "(a URI whose user info libpq cannot read: percent-encode '/', '?', '#' and '@' in it)";
  if (user && *user) out += shown_value(user) + "@";
  const bool socket_dir = host && host[0] == '/';  // shown as ?host=, as a URI writes it
  if (host && !socket_dir) {
    const std::string h = shown_value(host);
    out += h.find(':') != std::string::npos && h.find(',') == std::string::npos ? "[" + h + "]" : h;
  }
  if (port && *port) out += ":" + shown_value(port);
  out += "/";
  if (db) out += shown_value(db);
  char sep = '?';
  for (const PQconninfoOption* o = opts.get(); o->keyword; ++o) {
    const std::string k = o->keyword;
    if (!o->val || k == "user" || (k == "host" && !socket_dir) || k == "port" || k == "dbname") continue;
    out += sep + k + "=" + (secret(*o) ? std::string("***") : shown_value(o->val));
    sep = '&';
  }
  return out;
}

std::string shown_keywords(const Conninfo& opts) {
  std::string out;
  for (const PQconninfoOption* o = opts.get(); o->keyword; ++o) {
    if (!o->val) continue;
    out += (out.empty() ? "" : " ") + std::string(o->keyword) + "=" + (secret(*o) ? std::string("***") : shown_value(o->val));
  }
  return out;
}

#else
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

bool is_keyword_conninfo(const std::string& location) {
  // libpq takes a string with '=' for keyword/value text; a path with '=' in
  // it is one only when every word is one of libpq's keywords.
#if COLIKV_WITH_POSTGRES
  return !is_postgres_uri(location) && location.find('=') != std::string::npos && parse(location) != nullptr;
#else
  return !is_postgres_uri(location) && looks_like_keywords(location);
#endif
}

std::string libpq_uri(const std::string& uri) {
  const size_t n = scheme_length(uri);
  if (n == 0) return uri;
  std::string out = uri;
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(out[i])));
  return out;
}

#if COLIKV_WITH_POSTGRES
std::string shown_location(const std::string& location) {
  if (is_postgres_uri(location)) return shown_uri(location);
  if (location.find('=') != std::string::npos) {
    const Conninfo opts = parse(location);
    if (opts) return shown_keywords(opts);
  }
  return location;
}

bool libpq_parses(const std::string& uri) { return parse(libpq_uri(uri)) != nullptr; }

std::string without_secrets(const std::string& text, const std::string& location) {
  const Conninfo opts = parse(libpq_uri(location));
  if (!opts) return text;
  std::string out = text;
  for (const PQconninfoOption* o = opts.get(); o->keyword; ++o) {
    if (!secret(*o) || !o->val || std::string(o->val).size() < 4) continue;
    const std::string v = o->val;
    for (size_t p = out.find(v); p != std::string::npos; p = out.find(v, p + 3)) out.replace(p, v.size(), "***");
  }
  return out;
}
#else
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
