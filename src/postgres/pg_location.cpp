// What a store location names, as libpq parses it (see store_location.h):
// the PostgreSQL build's half of store_location.cpp, so that only the
// PostgreSQL backend's files include libpq.
#include <libpq-fe.h>

#include <memory>

#include "catalog/location.h"

namespace colikv {
namespace detail {

namespace {

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

}  // namespace

bool is_keyword_conninfo(const std::string& location) {
  // libpq takes a string with '=' for keyword/value text; a path with '=' in
  // it is one only when every word is one of libpq's keywords.
  return !is_postgres_uri(location) && location.find('=') != std::string::npos && parse(location) != nullptr;
}

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

}  // namespace detail
}  // namespace colikv
