#include "postgres/pg_connection.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace colikv {
namespace detail {

namespace {

ErrorCode error_code_for_sqlstate(const std::string& state) {
  if (state.compare(0, 2, "08") == 0) return ErrorCode::kIO;  // connection exception
  if (state == "57P01" || state == "57P02" || state == "57P03") return ErrorCode::kIO;  // server shut down
  // A lock or statement timeout, a deadlock: another try may get through.
  if (state == "55P03" || state == "57014" || state == "40P01") return ErrorCode::kBusy;
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

// The names of the types a hand-made change most likely gives a column.
std::string type_name(Oid t) {
  switch (t) {
    case 16: return "boolean";
    case 17: return "bytea";
    case 18: return "\"char\"";
    case 20: return "bigint";
    case 21: return "smallint";
    case 23: return "integer";
    case 25: return "text";
    case 26: return "oid";
    case 114: return "json";
    case 700: return "real";
    case 701: return "double precision";
    case 1042: return "character";
    case 1043: return "character varying";
    case 1082: return "date";
    case 1114: return "timestamp without time zone";
    case 1184: return "timestamp with time zone";
    case 1700: return "numeric";
    case 3802: return "jsonb";
  }
  return "the type with oid " + std::to_string(t);
}

bool integer_type(Oid t) { return t == 16 || t == 20 || t == 21 || t == 23 || t == 26; }

}  // namespace

PgParams& PgParams::add(int64_t v) { return add(std::to_string(v)); }

PgParams& PgParams::add(const std::string& s) {
  if (s.find('\0') != std::string::npos) holds_nul_ = true;
  owned_.push_back(s);
  values_.push_back(owned_.back().c_str());
  lengths_.push_back(static_cast<int>(s.size()));
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
  const Oid type = PQftype(r_.get(), col);
  if (!integer_type(type)) {
    raise(PgError(ErrorCode::kCorrupt, std::string("column ") + PQfname(r_.get(), col) + " is of type " +
                                            type_name(type) + ", not an integer (was it changed by hand?)"));
  }
  if (is_null(row, col)) return 0;
  return big_endian(bytes(row, col), static_cast<int>(length(row, col)));
}

void PgRows::raise(const PgError& e) const {
  if (errors_) throw errors_->name(e);
  throw e;
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
  if (!libpq_parses(uri_))
    throw PgError(ErrorCode::kInvalidArgument,
                  at(what) +
                      ": libpq cannot parse the URI (percent-encode '/', '?', '#', '@', '&' and '=' inside its parts)");
  const std::string uri = libpq_uri(uri_);
  const char* values[] = {"10", "colikv", uri.c_str(), nullptr};
  conn_.reset(PQconnectdbParams(keys, values, 1));
  if (!conn_) throw PgError(ErrorCode::kInternal, at(what) + ": out of memory");
  if (PQstatus(conn_.get()) != CONNECTION_OK) {
    const std::string msg = without_secrets(one_line(PQerrorMessage(conn_.get())), uri_);
    // No such database is the caller's to fix, like a missing store file.
    const bool missing_db = msg.find("does not exist") != std::string::npos && msg.find("database") != std::string::npos;
    throw PgError(missing_db ? ErrorCode::kNotFound : ErrorCode::kIO, at(what) + ": " + msg);
  }
  // A library prints nothing: the server's notices (a shutdown's warning) are
  // dropped, but for the warnings a caller collects (vacuum_full).
  PQsetNoticeReceiver(conn_.get(), &PgConnection::on_notice, this);
  server_ = "postgresql server " + std::string(PQhost(conn_.get())) + ":" + PQport(conn_.get()) + "/" + PQdb(conn_.get());
  configure_session(what);
}

void PgConnection::configure_session(const std::string& what) {
  std::string sql = "SET lock_timeout = " + std::to_string(settings_.lock_timeout_ms) +
                    "; SET synchronous_commit = " + (settings_.synchronous_commit ? "on" : "off") +
                    "; SET default_transaction_read_only = " + (settings_.read_only ? "on" : "off") +
                    "; SET client_min_messages = warning";
  exec_unnamed(sql, what);
  resolve_schema(what);
}

void PgConnection::resolve_schema(const std::string& what) {
  if (schema_oid_ == 0) {
    // Where the search_path finds the store's tables, else where it would
    // create them.
    PgRows r = query_unnamed("SELECT n.oid::bigint, n.nspname::text FROM pg_namespace n WHERE n.oid = coalesce("
                     "(SELECT relnamespace FROM pg_class WHERE oid = to_regclass('colikv_schema')), "
                     "(SELECT oid FROM pg_namespace WHERE nspname = current_schema()))",
                     what);
    if (r.size() == 0) {
      // No schema to create a store in: the migrations' CREATE fails with the server's own message.
      PgRows key = query_unnamed("SELECT ('x' || substr(md5(''), 1, 16))::bit(64)::bigint", what);
      lock_key_ = key.int64(0, 0);
      return;
    }
    schema_oid_ = r.int64(0, 0);
    schema_name_ = r.text(0, 1);
  }
  // The name, not the oid, keys the lock: what earlier versions took
  // (md5(current_schema())) for a store whose role's search_path starts at it.
  PgParams p;
  p.add(schema_name_);
  query_unnamed("SELECT set_config('search_path', quote_ident($1::text) || ', pg_temp', false)", p, what);
  lock_key_ = query_unnamed("SELECT ('x' || substr(md5($1::text), 1, 16))::bit(64)::bigint", p, what).int64(0, 0);
}

void PgConnection::on_notice(void* self, const PGresult* r) {
  auto* c = static_cast<PgConnection*>(self);
  if (!c->warnings_) return;
  const char* severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (severity && std::strcmp(severity, "WARNING") == 0) c->warnings_->push_back(one_line(PQresultErrorMessage(r)));
}

void PgConnection::vacuum_full(const std::vector<std::string>& tables, const std::string& what) {
  named([&] { vacuum_tables(tables, what); });
}

void PgConnection::vacuum_tables(const std::vector<std::string>& tables, const std::string& what) {
  std::vector<std::string> vacuumed, skipped, warnings;
  for (const std::string& t : tables) {
    warnings.clear();
    warnings_ = &warnings;
    try {
      exec_unnamed("VACUUM FULL " + t, what);
    } catch (...) {
      warnings_ = nullptr;
      throw;
    }
    warnings_ = nullptr;
    if (warnings.empty()) {
      vacuumed.push_back(t);
      continue;
    }
    skipped.push_back(t + " (" + warnings.front() + ")");
  }
  if (skipped.empty()) return;
  std::string msg = at(what) + ": the server skipped ";
  for (size_t i = 0; i < skipped.size(); ++i) msg += (i ? ", " : "") + skipped[i];
  if (vacuumed.empty()) {
    msg += "; nothing was vacuumed";
  } else {
    msg += "; vacuumed only ";
    for (size_t i = 0; i < vacuumed.size(); ++i) msg += (i ? ", " : "") + vacuumed[i];
  }
  throw PgError(ErrorCode::kReadOnly, msg + " (VACUUM FULL needs the role that owns the tables)");
}

bool PgConnection::in_transaction() const {
  const PGTransactionStatusType s = PQtransactionStatus(conn_.get());
  return s == PQTRANS_INTRANS || s == PQTRANS_INERROR || s == PQTRANS_ACTIVE;
}

bool PgConnection::closed_by_server() {
  if (PQstatus(conn_.get()) != CONNECTION_OK) return true;
  // An idle connection is sent nothing but a goodbye: read what is there.
  pollfd p{PQsocket(conn_.get()), POLLIN, 0};
  for (int i = 0; i < 16 && ::poll(&p, 1, 0) > 0; ++i) {
    if (PQconsumeInput(conn_.get()) == 0) break;  // EOF or a read error: the status says so
    while (PGnotify* n = PQnotifies(conn_.get())) PQfreemem(n);  // parses it (an error goes to on_notice)
  }
  return PQstatus(conn_.get()) != CONNECTION_OK;
}

void PgConnection::ensure_connected(const std::string& what) {
  named([&] { reconnect_if_closed(what); });
}

void PgConnection::reconnect_if_closed(const std::string& what) {
  if (!closed_by_server()) return;
  // A server restarting refuses connections for a moment: tried again until
  // the busy timeout, as a lock is waited for, and never longer.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(settings_.lock_timeout_ms);
  auto pause = std::chrono::milliseconds(20);
  for (;;) {
    try {
      connect(what.empty() ? "reconnecting" : what + ": reconnecting");
      return;
    } catch (const PgError& e) {
      if (e.code() != ErrorCode::kIO || std::chrono::steady_clock::now() + pause >= deadline) throw;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(250));
  }
}

void PgConnection::fail(const PGresult* r, const std::string& what) {
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const bool lost = PQstatus(conn_.get()) != CONNECTION_OK;
  ErrorCode code = lost ? ErrorCode::kIO : error_code_for_sqlstate(state ? state : "");
  std::string msg = one_line(r ? PQresultErrorMessage(r) : PQerrorMessage(conn_.get()));
  if (msg.empty()) msg = one_line(PQerrorMessage(conn_.get()));
  if (lost && sent_in_transaction_) lost_in_transaction_ = true;
  if (lost) msg += " (the connection to the server was lost; the next call reconnects)";
  if (state && std::strcmp(state, "55P03") == 0) msg += " (another connection held the lock past the busy timeout)";
  if (state && std::strcmp(state, "57014") == 0)
    msg += msg.find("statement timeout") != std::string::npos
               ? " (the server's statement_timeout fired: it cancels a statement that runs longer)"
               : " (the server cancelled the statement)";
  throw PgError(code, at(what) + ": " + msg);
}

namespace {

// A statement that ends the transaction whatever it does: after it, the
// transaction is over even when the connection went with it.
bool ends_transaction(const std::string& sql) {
  if (sql.rfind("COMMIT", 0) == 0) return true;
  return sql.rfind("ROLLBACK", 0) == 0 && sql.rfind("ROLLBACK TO", 0) != 0;
}

}  // namespace

bool PgConnection::ready_to_send(const std::string& sql, const std::string& what) {
  if (streaming_)
    throw PgError(ErrorCode::kInternal, at(what) + ": a statement was sent while another's rows were still coming");
  if (lost_in_transaction_) {
    // The server rolled the transaction back with the connection: only its
    // end (nothing left to send) or a new BEGIN may follow, never its
    // remaining statements on a new connection outside any transaction.
    if (ends_transaction(sql)) {
      lost_in_transaction_ = false;
      if (sql.rfind("ROLLBACK", 0) == 0) return false;
      throw PgError(ErrorCode::kIO, at(what) +
                                        ": the connection was lost inside the transaction, which the server rolled "
                                        "back; nothing of it was committed (the next call reconnects)");
    }
    if (sql.rfind("BEGIN", 0) != 0)
      throw PgError(ErrorCode::kIO, at(what) +
                                        ": the connection was lost inside a transaction, which the server rolled back");
    lost_in_transaction_ = false;
  }
  if (!in_transaction()) reconnect_if_closed(what);
  // A COMMIT or ROLLBACK that loses the connection still ends the
  // transaction: the next call starts afresh instead of failing as its rest.
  sent_in_transaction_ = in_transaction() && !ends_transaction(sql);
  return true;
}

void PgConnection::abandon_transaction() noexcept {
  if (lost_in_transaction_) {
    lost_in_transaction_ = false;
    return;
  }
  if (!in_transaction()) return;
  try {
    exec("ROLLBACK", "rolling back");
  } catch (const Error&) {  // lost: the server rolled it back
  }
}

const std::string& PgConnection::prepared(const std::string& sql, const PgParams& params, const std::string& what) {
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    const std::string name = "colikv_" + std::to_string(prepared_.size() + 1);
    ++round_trips_;
    PgResultPtr r(PQprepare(conn_.get(), name.c_str(), sql.c_str(), params.size(), nullptr));
    if (!r || PQresultStatus(r.get()) != PGRES_COMMAND_OK) fail(r.get(), what);
    it = prepared_.emplace(sql, name).first;
  }
  return it->second;
}

void PgConnection::raise(const PgError& e) const {
  if (errors_) throw errors_->name(e);
  throw e;
}

void PgConnection::check_params(const PgParams& params, const std::string& what) const {
  if (params.holds_nul())
    throw PgError(ErrorCode::kInvalidArgument, at(what) + ": a text value holds a NUL byte, which PostgreSQL text cannot store");
}

PgRows PgConnection::query(const std::string& sql, const PgParams& params, const std::string& what) {
  return named([&] { return query_unnamed(sql, params, what); });
}

PgRows PgConnection::query_unnamed(const std::string& sql, const PgParams& params, const std::string& what) {
  check_params(params, what);
  if (!ready_to_send(sql, what)) return PgRows(nullptr);
  const std::string& name = prepared(sql, params, what);
  ++round_trips_;
  PgResultPtr r(PQexecPrepared(conn_.get(), name.c_str(), params.size(), params.values(), params.lengths(),
                               params.formats(), 1));
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) fail(r.get(), what);
  return PgRows(std::move(r), errors_);
}

void PgConnection::exec(const std::string& sql, const std::string& what) {
  named([&] { exec_unnamed(sql, what); });
}

void PgConnection::exec_unnamed(const std::string& sql, const std::string& what) {
  if (!ready_to_send(sql, what)) return;
  ++round_trips_;
  PgResultPtr r(PQexec(conn_.get(), sql.c_str()));
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) fail(r.get(), what);
}

PgRowStream::PgRowStream(PgConnection& conn, const std::string& sql, const PgParams& params, const std::string& what)
    : conn_(conn), what_(what) {
  conn_.named([&] { send(sql, params); });
}

void PgRowStream::send(const std::string& sql, const PgParams& params) {
  const std::string& what = what_;
  conn_.check_params(params, what);
  if (!conn_.ready_to_send(sql, what)) {
    done_ = true;  // only a ROLLBACK is skipped so: no rows
    return;
  }
  const std::string& name = conn_.prepared(sql, params, what);
  PGconn* c = conn_.conn_.get();
  ++conn_.round_trips_;
  if (PQsendQueryPrepared(c, name.c_str(), params.size(), params.values(), params.lengths(), params.formats(), 1) == 0)
    conn_.fail(nullptr, what);
  conn_.streaming_ = true;
  // Fails only when called too late (never here): the rows would then come
  // in one result, still correct.
  PQsetSingleRowMode(c);
}

std::function<void()> PgRowStream::after_row_for_tests;

PgRowStream::~PgRowStream() { finish(); }

void PgRowStream::finish() noexcept {
  if (done_) return;
  done_ = true;
  // libpq reads the rest of the statement's results, one row at a time, and
  // returns null after the last (or once a lost connection is seen).
  while (PGresult* r = PQgetResult(conn_.conn_.get())) PQclear(r);
  conn_.streaming_ = false;
}

std::optional<PgRows> PgRowStream::next() {
  if (done_) return std::nullopt;
  PgResultPtr r(PQgetResult(conn_.conn_.get()));
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st == PGRES_SINGLE_TUPLE) {
    if (after_row_for_tests) after_row_for_tests();
    return PgRows(std::move(r), conn_.errors_);
  }
  if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
    finish();  // the end of the rows: reads the null result after it
    return std::nullopt;
  }
  finish();
  conn_.named([&] { conn_.fail(r.get(), what_); });
  return std::nullopt;  // not reached: fail throws
}

}  // namespace detail
}  // namespace colikv
