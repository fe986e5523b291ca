// Schema migrations: migrations/NNNN_name.sql, compiled into the library.
#ifndef COLIKV_SRC_SQLITE_SQLITE_MIGRATIONS_H
#define COLIKV_SRC_SQLITE_SQLITE_MIGRATIONS_H

#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "catalog/migration.h"

namespace colikv {
namespace detail {

// All migrations, in ascending version order (generated at build time).
const std::vector<Migration>& embedded_migrations();

// The highest version this library knows.
int latest_schema_version();

// Applies the migrations with version in (current user_version, up_to], each
// in its own BEGIN IMMEDIATE transaction that also sets user_version. up_to < 0
// means all. Throws Error(kVersion) when the file's version is newer than the
// library's, naming both. `what` names the store in messages.
void apply_migrations(SQLite::Database& db, const std::string& what, int up_to = -1);

// One row of sqlite_schema.
struct SchemaObject {
  std::string type, name, tbl_name, sql;
  bool operator==(const SchemaObject& o) const {
    return type == o.type && name == o.name && tbl_name == o.tbl_name && sql == o.sql;
  }
};

// sqlite_schema exactly as migrations 1..version leave it, by (type, name):
// derived by applying them to an in-memory database once per version and
// process, so it follows every new migration by itself.
const std::vector<SchemaObject>& expected_schema(int version);

// Throws Error(kCorrupt) naming every table, index, view or trigger of the
// store that differs from expected_schema(version): with triggers and views
// off a hostile schema still acts (an ON DELETE CASCADE, a UNIQUE index, a
// generated column), so only colikv's own is accepted. SQLite's statistics
// tables (ANALYZE) are allowed.
void check_schema(SQLite::Database& db, int version, const std::string& what);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_MIGRATIONS_H
