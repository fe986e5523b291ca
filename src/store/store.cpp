// The free functions of colikv/store.h: what a store location names. Store's
// own methods are in the store_*.cpp files, each named for what it does.
#include "colikv/store.h"

#include "catalog/staging.h"
#include "catalog/location.h"

namespace colikv {

bool is_postgres_location(const std::string& location) { return detail::is_postgres_uri(location); }
std::string shown_store_location(const std::string& location) { return detail::shown_location(location); }
std::string store_file_of(const std::string& location) {
  return detail::store_file_for(location);
}

}  // namespace colikv
