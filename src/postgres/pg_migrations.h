// PostgreSQL's schema migrations: migrations/postgres/NNNN_name.sql, compiled
// into the library, applied by version as SQLite's are (the version is kept
// in the table colikv_schema instead of PRAGMA user_version).
#ifndef COLIKV_SRC_POSTGRES_PG_MIGRATIONS_H
#define COLIKV_SRC_POSTGRES_PG_MIGRATIONS_H

#include <string>
#include <vector>

#include "catalog/migration.h"
#include "postgres/pg_connection.h"

namespace colikv {
namespace detail {

// All PostgreSQL migrations, in ascending version order (generated at build time).
const std::vector<Migration>& embedded_postgres_migrations();
int latest_postgres_schema_version();

// The store's schema version; 0 when it has none (no colikv_schema table).
int postgres_schema_version(PgConnection& conn, const std::string& what);

// Brings the store's schema to the latest version, each migration in its own
// transaction under the store's write lock. Throws Error(kVersion) when the
// store is newer than this library, and Error(kNotFound) when it has no
// schema and create_if_missing is false. A read-only opening migrates
// nothing: a store that needs a migration fails with kVersion.
void open_postgres_schema(PgConnection& conn, bool create_if_missing, bool read_only, const std::string& what);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_POSTGRES_PG_MIGRATIONS_H
