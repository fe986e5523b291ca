// Where a store location meets its backend: the one place that opens a
// catalog. The PostgreSQL backend is built only with COLIKV_WITH_POSTGRES
// (the CMake option of that name).
#include "catalog/backend_error.h"
#include "catalog/catalog.h"
#include "colikv/error.h"
#include "core/text_argument.h"
#include "sqlite/sqlite_migrations.h"
#include "sqlite/sqlite_catalog.h"
#include "sqlite/sqlite_util.h"
#include "sqlite/sqlite_staged_store.h"
#include "catalog/staging.h"
#include "catalog/location.h"
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

std::unique_ptr<Catalog> open_catalog(const std::string& location, const Options& options,
                                      StoreCounters* counters) {
  require_store_location(location);
  require_tenant_name(options.tenant, "store " + shown_location(location));
  if (is_postgres_uri(location)) {
#if COLIKV_WITH_POSTGRES
    return with_context("store " + shown_location(location), [&] { return std::make_unique<PgCatalog>(location, options); });
#else
    throw_no_postgres(location);
#endif
  }
  return with_context("store " + shown_location(location), [&] { return std::make_unique<SqliteCatalog>(location, options, counters); });
}

void StagedStoreDeleter::operator()(StagedStore* s) const { delete s; }

StagedStorePtr stage_new_store(const std::string& location, const Options& o) {
  if (!o.create_staged) return nullptr;
  require_store_location(location);
  const std::string what = "store " + shown_location(location);
  if (is_postgres_uri(location))
    throw Error(ErrorCode::kInvalidArgument,
                what + ": Options::create_staged is for a store file; a store on a server is created by its "
                       "first transaction, with no file to build aside");
  if (o.read_only) throw Error(ErrorCode::kInvalidArgument, what + ": Options::create_staged with read_only");
  return StagedStorePtr(new StagedStore(location, o.file_mode));
}

std::unique_ptr<Catalog> open_catalog_staged(const std::string& location, const Options& o,
                                             const StagedStore* staged, StoreCounters* counters) {
  if (!staged) return open_catalog(location, o, counters);
  Options create = o;
  create.create_if_missing = true;
  try {
    return open_catalog(staged->path(), create, counters);
  } catch (const Error& e) {
    throw Error(e.code(), staged->named(e.what()));
  }
}

void publish_staged(StagedStore& staged) { staged.publish(); }

std::string store_file_for(const std::string& location) {
  return is_postgres_uri(location) ? std::string() : sqlite_file_of(location);
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

}  // namespace detail
}  // namespace colikv
