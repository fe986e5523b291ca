#include "migrations.h"

#include "colikv/error.h"
#include "sqlite_util.h"

namespace colikv {
namespace detail {

int latest_schema_version() {
  const auto& all = embedded_migrations();
  return all.empty() ? 0 : all.back().version;
}

void apply_migrations(SQLite::Database& db, const std::string& what, int up_to) {
  const int latest = latest_schema_version();
  if (up_to < 0 || up_to > latest) up_to = latest;
  const int current = static_cast<int>(query_int(db, "PRAGMA user_version", what));
  if (current > latest)
    throw Error(ErrorCode::kVersion, what + ": schema version " + std::to_string(current) +
                                         " is newer than this library's " + std::to_string(latest) +
                                         "; upgrade colikv to open it");
  for (const Migration& m : embedded_migrations()) {
    if (m.version <= current || m.version > up_to) continue;
    SqlTransaction txn(db, what);
    // Another process may have migrated between our check and our lock.
    if (query_int(db, "PRAGMA user_version", what) >= m.version) continue;
    exec(db, m.sql, what + ": migration " + m.name);
    exec(db, "PRAGMA user_version=" + std::to_string(m.version), what);
    txn.commit();
  }
}

}  // namespace detail
}  // namespace colikv
