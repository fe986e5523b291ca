// What a store location names: a file path (SQLite, the embedded default) or
// a PostgreSQL connection URI (postgresql://... or postgres://..., libpq's
// syntax, the scheme in any case).
//
// A libpq keyword/value string ("host=... dbname=...") is neither: it is
// refused (kInvalidArgument), so that it never becomes a SQLite file named
// after its password. A URI says the same, and PGPASSWORD, ~/.pgpass and
// service files keep the password out of it (docs/postgres.md).
#ifndef COLIKV_SRC_STORE_LOCATION_H
#define COLIKV_SRC_STORE_LOCATION_H

#include <string>

namespace colikv {
namespace detail {

// True when `location` is a PostgreSQL connection URI rather than a file path
// (the scheme compared case-insensitively).
bool is_postgres_uri(const std::string& location);

// True when `location` parses as a libpq keyword/value connection string.
bool is_keyword_conninfo(const std::string& location);

// The URI as libpq takes it: the scheme in lower case (libpq compares it
// case-sensitively).
std::string libpq_uri(const std::string& uri);

// The location as messages show it. A URI or a keyword/value string is
// rebuilt from libpq's own parse (PQconninfoParse) with every secret option
// (password, sslpassword: libpq's dispchar "*") shown as ***, and control
// characters percent-encoded; one libpq cannot parse is shown without any of
// its text after the scheme. A path is unchanged.
std::string shown_location(const std::string& location);

// True when libpq parses the URI (libpq's own message for one it cannot may
// quote any of it, the password too).
bool libpq_parses(const std::string& uri);

// `text` with each secret of the location's parse (of 4 bytes or more) that
// occurs in it replaced by ***: a guard for messages a library writes.
std::string without_secrets(const std::string& text, const std::string& location);

// Throws kInvalidArgument naming the (masked) location when it is a
// keyword/value string (see above) or holds a NUL byte (every system call
// and libpq would cut it there).
void require_store_location(const std::string& location);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_STORE_LOCATION_H
