#include "postgres/pg_migrations.h"

namespace colikv {
namespace detail {

int latest_postgres_schema_version() {
  const auto& all = embedded_postgres_migrations();
  return all.empty() ? 0 : all.back().version;
}

int postgres_schema_version(PgConnection& conn, const std::string& what) {
  PgRows has = conn.query("SELECT to_regclass('colikv_schema') IS NOT NULL", what);
  if (has.int64(0, 0) == 0) return 0;
  PgRows v = conn.query("SELECT coalesce(max(version), 0)::bigint FROM colikv_schema", what);
  return static_cast<int>(v.int64(0, 0));
}

namespace {

void check_not_newer(int current, const std::string& what) {
  const int latest = latest_postgres_schema_version();
  if (current > latest)
    throw PgError(ErrorCode::kVersion, what + ": schema version " + std::to_string(current) +
                                         " is newer than this library's " + std::to_string(latest) +
                                         "; upgrade colikv to open it");
}

void apply_one(PgConnection& conn, const Migration& m, const std::string& what) {
  conn.exec("BEGIN", what);
  try {
    PgParams key;
    key.add(conn.store_lock_key());
    conn.query("SELECT pg_advisory_xact_lock($1::bigint)", key, what);
    conn.exec("CREATE TABLE IF NOT EXISTS colikv_schema (version integer NOT NULL)", what);
    // Another host may have migrated between our check and our lock.
    if (postgres_schema_version(conn, what) < m.version) {
      conn.exec(m.sql, what + ": migration " + m.name);
      PgParams v;
      v.add(static_cast<int64_t>(m.version));
      conn.query("DELETE FROM colikv_schema", what);
      conn.query("INSERT INTO colikv_schema (version) VALUES ($1::integer)", v, what);
    }
    conn.exec("COMMIT", what);
  } catch (...) {
    try {
      conn.exec("ROLLBACK", what);
    } catch (const Error&) {
    }
    throw;
  }
}

}  // namespace

void open_postgres_schema(PgConnection& conn, bool create_if_missing, bool read_only, const std::string& what) {
  const int current = postgres_schema_version(conn, what);
  check_not_newer(current, what);
  const int latest = latest_postgres_schema_version();
  if (current == latest) return;
  if (current == 0 && (!create_if_missing || read_only))
    throw PgError(ErrorCode::kNotFound, what + ": no colikv store there" +
                                          (read_only ? " (a read-only opening creates none)" : " (create_if_missing is off)"));
  if (read_only)
    throw PgError(ErrorCode::kVersion, what + ": schema version " + std::to_string(current) + " needs migrating to " +
                                         std::to_string(latest) + ", which a read-only opening does not do");
  for (const Migration& m : embedded_postgres_migrations())
    if (m.version > current) apply_one(conn, m, what);
}

}  // namespace detail
}  // namespace colikv
