// Schema migrations: migrations/NNNN_name.sql, compiled into the library.
#ifndef COLIKV_SRC_MIGRATIONS_H
#define COLIKV_SRC_MIGRATIONS_H

#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>

namespace colikv {
namespace detail {

struct Migration {
  int version;       // NNNN: the user_version once applied
  const char* name;  // file name without .sql
  const char* sql;
};

// All migrations, in ascending version order (generated at build time).
const std::vector<Migration>& embedded_migrations();

// The highest version this library knows.
int latest_schema_version();

// Applies the migrations with version in (current user_version, up_to], each
// in its own BEGIN IMMEDIATE transaction that also sets user_version. up_to < 0
// means all. Throws Error(kVersion) when the file's version is newer than the
// library's, naming both. `what` names the store in messages.
void apply_migrations(SQLite::Database& db, const std::string& what, int up_to = -1);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_MIGRATIONS_H
