#include "backend.h"

#include "colikv/store.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>

#include <SQLiteCpp/SQLiteCpp.h>
#if COLIKV_WITH_POSTGRES
#include <libpq-fe.h>
#endif

#include <memory>

#if COLIKV_WITH_POSTGRES
#include "postgres/pg_connection.h"
#endif

namespace colikv_test {

bool testing_postgres() {
  const char* b = std::getenv("COLIKV_TEST_BACKEND");
  return b && std::string(b) == "postgres";
}

std::string test_pg_uri() {
  const char* u = std::getenv("COLIKV_TEST_PG_URI");
  return u ? u : "";
}

namespace {

// The schemas this process created on the test server, dropped when each test
// case ends (SchemaCleanup) so that a developer's own server does not fill up.
std::mutex schemas_mu;
std::vector<std::string> created_schemas;
std::map<std::string, std::string> store_schemas;  // store_at: test file name -> store URI

std::string schema_prefix() { return "t" + std::to_string(::getpid()) + "_"; }

}  // namespace

std::string quoted_identifier(const std::string& name) {
  std::string out = "\"";
  for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string fresh_pg_schema(const std::string& suffix) {
  static std::atomic<int> counter{0};
  const std::string uri = test_pg_uri();
  if (uri.empty()) throw std::runtime_error("no PostgreSQL test server: COLIKV_TEST_PG_URI is not set");
  const std::string schema = schema_prefix() + std::to_string(counter++) + "_" +
                             (suffix.empty() ? std::to_string(std::rand() % 100000) : suffix);
#if COLIKV_WITH_POSTGRES
  colikv::detail::PgConnection conn(uri, colikv::detail::PgConnection::Settings());
  const std::string q = quoted_identifier(schema);
  conn.exec("DROP SCHEMA IF EXISTS " + q + " CASCADE; CREATE SCHEMA " + q, "creating a test schema");
#else
  throw std::runtime_error("no PostgreSQL backend in this build (COLIKV_WITH_POSTGRES=OFF)");
#endif
  std::lock_guard<std::mutex> lock(schemas_mu);
  created_schemas.push_back(schema);
  return schema;
}

std::string with_search_path(const std::string& uri, const std::vector<std::string>& schemas) {
  std::string path;
  for (const std::string& s : schemas) path += (path.empty() ? "" : ",") + quoted_identifier(s);
  std::string encoded;
  static const char* kHex = "0123456789ABCDEF";
  for (const unsigned char c : path) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.') {
      encoded += static_cast<char>(c);
    } else {
      encoded += '%';
      encoded += kHex[c >> 4];
      encoded += kHex[c & 15];
    }
  }
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + encoded;
}

std::string fresh_pg_store() { return with_search_path(test_pg_uri(), {fresh_pg_schema()}); }

std::string store_at(const TempDir& dir, const std::string& name) {
  const std::string file = dir.file(name);
  if (!testing_postgres()) return file;
  {
    std::lock_guard<std::mutex> lock(schemas_mu);
    auto it = store_schemas.find(file);
    if (it != store_schemas.end()) return it->second;
  }
  const std::string uri = fresh_pg_store();
  std::lock_guard<std::mutex> lock(schemas_mu);
  return store_schemas.emplace(file, uri).first->second;
}

namespace {

SqlRows sqlite_query(const std::string& path, const std::string& sql, const std::vector<std::string>& params,
                     bool write = false) {
  SQLite::Database db(path, write ? SQLite::OPEN_READWRITE : SQLite::OPEN_READONLY);
  db.setBusyTimeout(5000);
  SQLite::Statement q(db, sql);
  for (size_t i = 0; i < params.size(); ++i) q.bind(static_cast<int>(i + 1), params[i]);
  SqlRows rows;
  while (q.executeStep()) {
    rows.emplace_back();
    for (int c = 0; c < q.getColumnCount(); ++c) rows.back().push_back(q.getColumn(c).isNull() ? "" : q.getColumn(c).getString());
  }
  return rows;
}

SqlRows pg_query(const std::string& uri, std::string sql, const std::vector<std::string>& params) {
#if !COLIKV_WITH_POSTGRES
  (void)uri, (void)sql, (void)params;
  throw std::runtime_error("no PostgreSQL backend in this build (COLIKV_WITH_POSTGRES=OFF)");
#else
  std::unique_ptr<PGconn, colikv::detail::PgConnDeleter> conn(PQconnectdb(uri.c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(conn.get()));
  for (size_t i = 0, n = 1; (i = sql.find('?', i)) != std::string::npos; ++n) sql.replace(i, 1, "$" + std::to_string(n));
  std::vector<const char*> values;
  for (const std::string& p : params) values.push_back(p.c_str());
  colikv::detail::PgResultPtr r(PQexecParams(conn.get(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                                             values.data(), nullptr, nullptr, 0));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK && PQresultStatus(r.get()) != PGRES_COMMAND_OK) throw std::runtime_error(sql + ": " + PQresultErrorMessage(r.get()));
  SqlRows rows(static_cast<size_t>(PQntuples(r.get())));
  for (int i = 0; i < PQntuples(r.get()); ++i)
    for (int c = 0; c < PQnfields(r.get()); ++c) rows[static_cast<size_t>(i)].push_back(PQgetvalue(r.get(), i, c));
  return rows;
#endif
}

}  // namespace

SqlRows store_query(const std::string& location, const std::string& sql, const std::vector<std::string>& params) {
  return colikv::is_postgres_location(location) ? pg_query(location, sql, params) : sqlite_query(location, sql, params);
}

int64_t store_int(const std::string& location, const std::string& sql, const std::vector<std::string>& params) {
  const SqlRows rows = store_query(location, sql, params);
  if (rows.empty() || rows[0].empty() || rows[0][0].empty()) return 0;
  return std::stoll(rows[0][0]);
}

namespace {

// Polls a count on the test server until done(count); fails the test after a
// minute, saying `never`. Returns how many polls came before the one that
// ended it.
int64_t poll_pg_count(const std::string& sql, const std::vector<std::string>& params,
                      const std::function<bool(int64_t)>& done, const std::string& never) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int64_t polls = 0;; ++polls) {
    if (done(store_int(test_pg_uri(), sql, params))) return polls;
    if (std::chrono::steady_clock::now() >= give_up) throw std::runtime_error(never);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

void wait_for_pg_lock_waiters(int n) {
  poll_pg_count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = 'colikv'",
                {}, [n](int64_t waiting) { return waiting >= n; },
                "no " + std::to_string(n) + " colikv connections waited for a lock within a minute");
}

std::string with_application_name(const std::string& location, const std::string& name) {
  if (!colikv::is_postgres_location(location)) return location;
  return location + (location.find('?') == std::string::npos ? "?" : "&") + "application_name=" + name;
}

bool wait_for_pg_sessions_to_end(const std::string& name) {
  return poll_pg_count("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", {name},
                       [](int64_t sessions) { return sessions == 0; },
                       "the server sessions named " + name + " did not end within a minute") > 0;
}

void store_exec(const std::string& location, const std::string& sql, const std::vector<std::string>& params) {
  if (colikv::is_postgres_location(location))
    pg_query(location, sql, params);
  else
    sqlite_query(location, sql, params, true);
}

int64_t orphan_chunks(const std::string& location, bool live_writer) {
  const bool postgres = colikv::is_postgres_location(location);
  auto has_table = [&](const std::string& name) {
    return store_int(location, postgres ? "SELECT count(*) FROM information_schema.tables WHERE table_schema = "
                                          "current_schema() AND table_name = '" + name + "'"
                                        : "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '" +
                                              name + "'") > 0;
  };
  std::string sql =
      "SELECT count(*) FROM chunks c WHERE NOT EXISTS "
      "(SELECT 1 FROM conversation_chunks l WHERE l.chunk_id = c.chunk_id)";
  // A live writer's chunks on their way in (held) or out (queued to free) are
  // no orphans; with none running, every one is.
  int64_t pending = 0;
  for (const std::string table : {"held_chunks", "chunks_to_free"}) {
    if (!has_table(table)) continue;
    if (live_writer)
      sql += " AND NOT EXISTS (SELECT 1 FROM " + table + " h WHERE h.chunk_id = c.chunk_id)";
    else
      pending += store_int(location, "SELECT count(*) FROM " + table);
  }
  return store_int(location, sql) + pending;
}

int drop_test_schemas() {
  std::vector<std::string> schemas;
  {
    std::lock_guard<std::mutex> lock(schemas_mu);
    schemas.swap(created_schemas);
    store_schemas.clear();
  }
  if (schemas.empty()) return 0;
#if !COLIKV_WITH_POSTGRES
  return 1;  // without the backend fresh_pg_store creates none
#else
  int failures = 0;
  try {
    colikv::detail::PgConnection conn(test_pg_uri(), colikv::detail::PgConnection::Settings());
    conn.exec("SET lock_timeout = '10s'", "bounding the wait of a test schema's drop");
    for (const std::string& schema : schemas) {
      try {
        conn.exec("DROP SCHEMA IF EXISTS " + quoted_identifier(schema) + " CASCADE", "dropping the test schema " + schema);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "test schema %s not dropped: %s\n", schema.c_str(), e.what());
        ++failures;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "test schemas not dropped: %s\n", e.what());
    return 1;
  }
  // None of this process's schemas may be left (also those created behind fresh_pg_store's back).
  const int64_t left = store_int(test_pg_uri(), "SELECT count(*) FROM pg_namespace WHERE starts_with(nspname, ?)",
                                 {schema_prefix()});
  if (left != 0) {
    std::fprintf(stderr, "%lld test schemas named %s* are left on the server\n", static_cast<long long>(left),
                 schema_prefix().c_str());
    ++failures;
  }
  return failures;
#endif
}

int check_backend_configured() {
  const char* require = std::getenv("COLIKV_REQUIRE_PG");
#if !COLIKV_WITH_POSTGRES
  if (testing_postgres()) {
    std::fprintf(stderr, "%s: this build has no PostgreSQL backend (COLIKV_WITH_POSTGRES=OFF)\n",
                 require && std::string(require) == "1" ? "COLIKV_REQUIRE_PG=1 fails" : "skipped");
    return require && std::string(require) == "1" ? 1 : 77;
  }
#endif
  if (!testing_postgres() || !test_pg_uri().empty()) return 0;
  if (require && std::string(require) == "1") {
    std::fprintf(stderr, "COLIKV_REQUIRE_PG=1 but COLIKV_TEST_PG_URI is not set: no PostgreSQL server to test on\n");
    return 1;
  }
  std::fprintf(stderr, "skipped: no PostgreSQL server (set COLIKV_TEST_PG_URI, or run tools/dev.sh test)\n");
  return 77;
}

}  // namespace colikv_test
