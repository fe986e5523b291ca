// The --pg server's side of the harness: a fresh schema per workload, and the
// benchmark's own libpq connections (plain libpq, not a store's).
#include <cctype>
#include <stdexcept>

#include "bench.h"

#if COLIKV_WITH_POSTGRES
#include <libpq-fe.h>
#endif

namespace colikv_bench {

#if COLIKV_WITH_POSTGRES
namespace {

void drop_notice(void*, const char*) {}

std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

// libpq reads the scheme in lower case only; colikv accepts it in any case.
std::string libpq_uri(std::string uri) {
  const size_t end = uri.find("://");
  if (end != std::string::npos)
    for (size_t i = 0; i < end; ++i) uri[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(uri[i])));
  return uri;
}

}  // namespace

PgSession::PgSession(const std::string& uri) {
  const std::string location = libpq_uri(uri);
  // The URI's own connect_timeout, if any, wins: it comes after.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"10", "colikv_bench", location.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, 1);
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
    const std::string why = conn_ ? one_line(PQerrorMessage(conn_)) : "out of memory";
    if (conn_) PQfinish(conn_);
    throw colikv::Error(colikv::ErrorCode::kIO, "bench: connecting to " + colikv::shown_store_location(uri) + ": " + why);
  }
  PQsetNoticeProcessor(conn_, &drop_notice, nullptr);
}

PgSession::~PgSession() { PQfinish(conn_); }

void PgSession::exec(const std::string& sql, const std::string& what) {
  PGresult* r = PQexec(conn_, sql.c_str());
  const ExecStatusType status = PQresultStatus(r);
  PQclear(r);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
    throw colikv::Error(colikv::ErrorCode::kIO, what + ": " + one_line(PQerrorMessage(conn_)));
}
#endif

std::string pg_store(const Config& cfg, const std::string& name) {
#if !COLIKV_WITH_POSTGRES
  (void)name;
  throw std::runtime_error("--pg " + colikv::shown_store_location(cfg.pg) +
                           ": this build has no PostgreSQL backend (COLIKV_WITH_POSTGRES=OFF)");
#else
  PgSession conn(cfg.pg);
  const std::string schema = "colikv_bench_" + name;
  conn.exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema, "bench: " + schema);
  return cfg.pg + (cfg.pg.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema;
#endif
}

void drop_pg_store(const Config& cfg, const std::string& name) {
#if COLIKV_WITH_POSTGRES
  PgSession conn(cfg.pg);
  conn.exec("DROP SCHEMA IF EXISTS colikv_bench_" + name + " CASCADE", "bench: " + name);
#else
  (void)cfg, (void)name;
#endif
}

int64_t plain_select_payloads(const std::string& location) {
#if !COLIKV_WITH_POSTGRES
  (void)location;
  return 0;
#else
  PGconn* c = PQconnectdb(location.c_str());
  int64_t bytes = 0;
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult* r = PQexecParams(c,
                               "SELECT ch.payload FROM conversations v JOIN conversation_chunks cc "
                               "ON cc.conversation_id = v.conversation_id JOIN chunks ch ON ch.chunk_id = cc.chunk_id "
                               "WHERE v.name = 'conv' ORDER BY cc.seq",
                               0, nullptr, nullptr, nullptr, nullptr, 1);
    if (PQresultStatus(r) == PGRES_TUPLES_OK)
      for (int i = 0; i < PQntuples(r); ++i) bytes += PQgetlength(r, i, 0);
    PQclear(r);
  }
  PQfinish(c);
  return bytes;
#endif
}

}  // namespace colikv_bench
