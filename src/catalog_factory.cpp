// Where a store location meets its backend: the one place that opens a
// catalog and knows every backend's exceptions. The PostgreSQL backend is
// built only with COLIKV_WITH_POSTGRES (the CMake option of that name).
#include "backend_error.h"
#include "catalog.h"
#include "colikv/error.h"
#include "core/text_argument.h"
#include "sqlite/migrations.h"
#include "sqlite/sqlite_catalog.h"
#include "sqlite/sqlite_util.h"
#include "store_location.h"
#if COLIKV_WITH_POSTGRES
#include "postgres/pg_catalog.h"
#include "postgres/pg_migrations.h"
#endif

namespace colikv {
namespace detail {

#if !COLIKV_WITH_POSTGRES
namespace {

[[noreturn]] void throw_no_postgres(const std::string& location) {
  throw Error(ErrorCode::kInvalidArgument,
              "store " + shown_location(location) +
                  ": this colikv was built without the PostgreSQL backend (configure with -DCOLIKV_WITH_POSTGRES=ON)");
}

}  // namespace
#endif

std::unique_ptr<Catalog> open_catalog(const std::string& location, const Options& options) {
  require_store_location(location);
  require_tenant_name(options.tenant, "store " + shown_location(location));
  if (is_postgres_uri(location)) {
#if COLIKV_WITH_POSTGRES
    return with_context("store " + shown_location(location), [&] { return std::make_unique<PgCatalog>(location, options); });
#else
    throw_no_postgres(location);
#endif
  }
  return std::make_unique<SqliteCatalog>(location, options);
}

int latest_schema_version_for(const std::string& location) {
  if (is_postgres_uri(location)) {
#if COLIKV_WITH_POSTGRES
    return latest_postgres_schema_version();
#else
    throw_no_postgres(location);
#endif
  }
  return latest_schema_version();
}

void rethrow_backend_error(const std::string& what, Reading reading) {
  try {
    throw;
#if COLIKV_WITH_POSTGRES
  } catch (const PgError& e) {
    throw Error(e.code(), what + ": " + e.what());
#endif
  } catch (const SQLite::Exception& e) {
    if (reading == Reading::kStoredRows) rethrow_sqlite_reading_rows(e, what);
    rethrow_sqlite(e, what);
  }
}

}  // namespace detail
}  // namespace colikv
