// Where a store location meets its backend: the one place that opens a
// catalog and knows every backend's exceptions.
#include "backend_error.h"
#include "catalog.h"
#include "postgres/pg_catalog.h"
#include "sqlite/sqlite_catalog.h"
#include "sqlite/sqlite_util.h"

namespace colikv {
namespace detail {

std::unique_ptr<Catalog> open_catalog(const std::string& location, const Options& options) {
  require_store_location(location);
  if (is_postgres_uri(location))
    return with_context("store " + shown_location(location), [&] { return std::make_unique<PgCatalog>(location, options); });
  return std::make_unique<SqliteCatalog>(location, options);
}

void rethrow_backend_error(const std::string& what, Reading reading) {
  try {
    throw;
  } catch (const PgError& e) {
    throw Error(e.code(), what + ": " + e.what());
  } catch (const SQLite::Exception& e) {
    if (reading == Reading::kStoredRows) rethrow_sqlite_reading_rows(e, what);
    rethrow_sqlite(e, what);
  }
}

}  // namespace detail
}  // namespace colikv
