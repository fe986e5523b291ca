#include "postgres/pg_connection.h"

#include <cstring>

namespace colikv {
namespace detail {

namespace {

ErrorCode error_code_for_sqlstate(const std::string& state) {
  if (state.compare(0, 2, "08") == 0) return ErrorCode::kIO;  // connection exception
  if (state == "57P01" || state == "57P02" || state == "57P03") return ErrorCode::kIO;  // server shut down
  if (state == "55P03" || state == "57014" || state == "40P01") return ErrorCode::kBusy;  // lock or statement timeout, deadlock
  if (state == "40001" || state == "23505") return ErrorCode::kConflict;  // a racing writer
  if (state.compare(0, 2, "23") == 0) return ErrorCode::kConflict;  // another constraint, as SQLITE_CONSTRAINT
  if (state == "53100") return ErrorCode::kDiskFull;
  if (state == "25006") return ErrorCode::kReadOnly;
  if (state == "42501") return ErrorCode::kReadOnly;  // insufficient privilege
  if (state == "3D000" || state == "3F000") return ErrorCode::kNotFound;  // no such database or schema
  if (state.compare(0, 2, "28") == 0) return ErrorCode::kIO;  // authentication
  if (state.compare(0, 2, "22") == 0) return ErrorCode::kInvalidArgument;  // data exception (e.g. bad UTF-8)
  if (state.compare(0, 2, "54") == 0) return ErrorCode::kTooLarge;  // program limit exceeded
  return ErrorCode::kInternal;
}

// libpq's messages end with a newline and may span lines: one line for ours.
std::string one_line(const char* text) {
  std::string s = text ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return s;
}

int64_t big_endian(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  if (n < 8 && n > 0 && (p[0] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
  return static_cast<int64_t>(v);
}

}  // namespace

PgParams& PgParams::add(int64_t v) { return add(std::to_string(v)); }

PgParams& PgParams::add(const std::string& s) {
  owned_.push_back(s);
  values_.push_back(owned_.back().c_str());
  lengths_.push_back(0);
  formats_.push_back(0);
  return *this;
}

PgParams& PgParams::add_bytes(const void* data, size_t size) {
  static const char kEmpty = 0;
  values_.push_back(size ? static_cast<const char*>(data) : &kEmpty);
  lengths_.push_back(static_cast<int>(size));
  formats_.push_back(1);
  return *this;
}

PgParams& PgParams::add_hash(const ChunkHash& h) {
  owned_.emplace_back(reinterpret_cast<const char*>(h.data()), h.size());
  return add_bytes(owned_.back().data(), h.size());
}

PgParams& PgParams::add_null() {
  values_.push_back(nullptr);
  lengths_.push_back(0);
  formats_.push_back(0);
  return *this;
}

int64_t PgRows::int64(int row, int col) const {
  if (is_null(row, col)) return 0;
  return big_endian(bytes(row, col), static_cast<int>(length(row, col)));
}

std::string PgRows::text(int row, int col) const {
  return std::string(PQgetvalue(r_.get(), row, col), static_cast<size_t>(length(row, col)));
}

ChunkHash PgRows::hash(int row, int col) const {
  ChunkHash h{};
  if (!is_null(row, col) && length(row, col) == static_cast<int64_t>(h.size()))
    std::memcpy(h.data(), bytes(row, col), h.size());
  return h;
}

std::optional<ChunkHash> PgRows::optional_hash(int row, int col) const {
  if (is_null(row, col)) return std::nullopt;
  return hash(row, col);
}

int64_t PgRows::affected() const {
  const char* n = PQcmdTuples(r_.get());
  return n && *n ? std::stoll(n) : 0;
}

PgConnection::PgConnection(const std::string& uri, const Settings& settings)
    : uri_(uri), settings_(settings), server_("postgresql server " + shown_location(uri)) {
  connect("connecting");
}

void PgConnection::connect(const std::string& what) {
  prepared_.clear();
  // The URI's own connect_timeout, if any, wins: it comes after.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"10", "colikv", uri_.c_str(), nullptr};
  conn_.reset(PQconnectdbParams(keys, values, 1));
  if (!conn_) throw PgError(ErrorCode::kInternal, what + ": " + server_ + ": out of memory");
  if (PQstatus(conn_.get()) != CONNECTION_OK) {
    const std::string msg = one_line(PQerrorMessage(conn_.get()));
    // No such database is the caller's to fix, like a missing store file.
    const bool missing_db = msg.find("does not exist") != std::string::npos && msg.find("database") != std::string::npos;
    throw PgError(missing_db ? ErrorCode::kNotFound : ErrorCode::kIO, what + ": " + server_ + ": " + msg);
  }
  // A library prints nothing: the server's notices (a shutdown's warning) are dropped.
  PQsetNoticeProcessor(conn_.get(), [](void*, const char*) {}, nullptr);
  server_ = "postgresql server " + std::string(PQhost(conn_.get())) + ":" + PQport(conn_.get()) + "/" + PQdb(conn_.get());
  configure_session(what);
}

void PgConnection::configure_session(const std::string& what) {
  std::string sql = "SET lock_timeout = " + std::to_string(settings_.lock_timeout_ms) +
                    "; SET synchronous_commit = " + (settings_.synchronous_commit ? "on" : "off") +
                    "; SET default_transaction_read_only = " + (settings_.read_only ? "on" : "off") +
                    "; SET client_min_messages = warning";
  exec(sql, what);
  // A key per schema: several stores (schemas) in one database do not block each other.
  PgRows key = query("SELECT ('x' || substr(md5(coalesce(current_schema(), '')), 1, 16))::bit(64)::bigint", what);
  lock_key_ = key.int64(0, 0);
}

bool PgConnection::in_transaction() const {
  const PGTransactionStatusType s = PQtransactionStatus(conn_.get());
  return s == PQTRANS_INTRANS || s == PQTRANS_INERROR || s == PQTRANS_ACTIVE;
}

void PgConnection::ensure_connected(const std::string& what) {
  if (PQstatus(conn_.get()) == CONNECTION_OK) return;
  connect(what + ": reconnecting");
}

void PgConnection::fail(const PGresult* r, const std::string& what) {
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const bool lost = PQstatus(conn_.get()) != CONNECTION_OK;
  ErrorCode code = lost ? ErrorCode::kIO : error_code_for_sqlstate(state ? state : "");
  std::string msg = one_line(r ? PQresultErrorMessage(r) : PQerrorMessage(conn_.get()));
  if (msg.empty()) msg = one_line(PQerrorMessage(conn_.get()));
  if (lost) msg += " (the connection to the server was lost; the next call reconnects)";
  if (code == ErrorCode::kBusy) msg += " (another connection held the lock past the busy timeout)";
  throw PgError(code, what + ": " + server_ + ": " + msg);
}

PgRows PgConnection::query(const std::string& sql, const PgParams& params, const std::string& what) {
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    const std::string name = "colikv_" + std::to_string(prepared_.size() + 1);
    PgResultPtr r(PQprepare(conn_.get(), name.c_str(), sql.c_str(), params.size(), nullptr));
    if (!r || PQresultStatus(r.get()) != PGRES_COMMAND_OK) fail(r.get(), what);
    it = prepared_.emplace(sql, name).first;
  }
  PgResultPtr r(PQexecPrepared(conn_.get(), it->second.c_str(), params.size(), params.values(), params.lengths(),
                               params.formats(), 1));
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) fail(r.get(), what);
  return PgRows(std::move(r));
}

void PgConnection::exec(const std::string& sql, const std::string& what) {
  PgResultPtr r(PQexec(conn_.get(), sql.c_str()));
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) fail(r.get(), what);
}

}  // namespace detail
}  // namespace colikv
