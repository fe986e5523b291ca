// What a store location names: a file path (SQLite, the embedded default) or
// a PostgreSQL connection URI (postgresql://... or postgres://..., libpq's
// syntax).
#ifndef COLIKV_SRC_STORE_LOCATION_H
#define COLIKV_SRC_STORE_LOCATION_H

#include <string>

namespace colikv {
namespace detail {

// True when `location` is a PostgreSQL connection URI rather than a file path.
bool is_postgres_uri(const std::string& location);

// The location as messages show it: a URI without its password (in the user
// info or a password= parameter); a path unchanged.
std::string shown_location(const std::string& location);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_STORE_LOCATION_H
