// One libpq connection to a PostgreSQL store, with RAII handles, parameters,
// prepared statements kept per connection, reconnection, and server errors
// turned into a BackendError naming the server (never the password).
//
// libpq, not libpqxx: colikv needs a dozen statements, binary bytea in and out
// and SQLSTATE codes; libpq gives all three in C with no second exception
// hierarchy to translate, and Debian's libpq5 is what every PostgreSQL client
// has installed already (libpqxx would add a C++ ABI to keep in step).
#ifndef COLIKV_SRC_POSTGRES_PG_CONNECTION_H
#define COLIKV_SRC_POSTGRES_PG_CONNECTION_H

#include <libpq-fe.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "catalog/backend_error.h"
#include "core/chunk_codec.h"
#include "colikv/error.h"
#include "catalog/location.h"

namespace colikv {
namespace detail {

// A server's error, or a lost connection: the BackendError (backend_error.h)
// that the PostgreSQL backend throws, with the code its SQLSTATE maps to;
// the store names what it was doing before the message.
class PgError : public BackendError {
 public:
  PgError(ErrorCode code, const std::string& message) : BackendError(code, message) {}
};

struct PgResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
struct PgConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using PgResultPtr = std::unique_ptr<PGresult, PgResultDeleter>;

// Query parameters: numbers and text in text format, bytes in binary.
class PgParams {
 public:
  PgParams& add(int64_t v);
  // Text, whole: a NUL byte in it (which PostgreSQL's text cannot hold, and
  // libpq's text format would cut at) makes the statement that gets these
  // parameters throw PgError(kInvalidArgument) instead of running.
  PgParams& add(const std::string& s);
  bool holds_nul() const { return holds_nul_; }
  PgParams& add_bytes(const void* data, size_t size);  // not copied: must outlive the query
  PgParams& add_hash(const ChunkHash& h);
  PgParams& add_null();

  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  std::deque<std::string> owned_;
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
  bool holds_nul_ = false;
};

// A result's rows in binary format: integers of any width, text, bytes.
class PgRows {
 public:
  // `errors` (may be null) names a column's error as the connection's.
  explicit PgRows(PgResultPtr r, const ErrorContext* errors = nullptr) : r_(std::move(r)), errors_(errors) {}
  int size() const { return PQntuples(r_.get()); }
  bool is_null(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
  // An integer or boolean column; one of another type (changed by hand)
  // throws PgError(kCorrupt) naming the column and its type.
  int64_t int64(int row, int col) const;
  std::string text(int row, int col) const;
  const uint8_t* bytes(int row, int col) const { return reinterpret_cast<const uint8_t*>(PQgetvalue(r_.get(), row, col)); }
  int64_t length(int row, int col) const { return PQgetlength(r_.get(), row, col); }
  // A 32-byte hash column: all zero when it holds another size (as blob_to_hash).
  ChunkHash hash(int row, int col) const;
  std::optional<ChunkHash> optional_hash(int row, int col) const;
  int64_t affected() const;
  // Throws `e` (about these rows), named as the connection's errors.
  [[noreturn]] void raise(const PgError& e) const;

 private:
  PgResultPtr r_;
  const ErrorContext* errors_;
};

class PgConnection {
 public:
  struct Settings {
    int lock_timeout_ms = 5000;   // how long a write waits for another's lock: then kBusy
    bool synchronous_commit = true;
    bool read_only = false;
  };
  // Connects; throws PgError(kIO) naming the server when it cannot.
  PgConnection(const std::string& uri, const Settings& settings);
  // Not copied or moved: libpq's notice receiver holds its address.
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // "postgresql server HOST:PORT/DB" for messages.
  const std::string& server() const { return server_; }

  // Names the errors of query(), exec(), vacuum_full(), ensure_connected()
  // and PgRowStream by `errors` (its catalog's, backend_error.h) from now on;
  // before, they throw PgError for the opener to name.
  void set_errors(const ErrorContext* errors) { errors_ = errors; }
  // Throws `e`, named by the errors set (its own `what` may be empty).
  [[noreturn]] void raise(const PgError& e) const;

  // Runs one statement (prepared once per connection and kept), results in
  // binary. Throws PgError naming `what` (when not empty) and the server.
  PgRows query(const std::string& sql, const PgParams& params, const std::string& what);
  PgRows query(const std::string& sql, const std::string& what) { return query(sql, PgParams(), what); }
  // Runs SQL text, possibly several statements, without parameters.
  void exec(const std::string& sql, const std::string& what);

  // Runs VACUUM FULL on each of `tables`: throws PgError(kReadOnly) with the
  // server's warning when it skipped any of them (a role that does not own
  // them), saying which were vacuumed.
  void vacuum_full(const std::vector<std::string>& tables, const std::string& what);

  bool in_transaction() const;
  // Outside a transaction: reconnects when the connection was lost (a server
  // restart, or its idle_session_timeout, while this one was idle); throws
  // PgError(kIO) naming the server when that fails. query() and exec() call
  // it before sending a statement outside a transaction, so that only a
  // transaction in flight fails with the connection.
  // A lost connection is tried again until the busy timeout (lock_timeout_ms)
  // has passed, then its error is thrown.
  void ensure_connected(const std::string& what);
  // For a caller that gives up a transaction it began with its own BEGIN:
  // rolls it back, or forgets it when the connection was lost with it, so
  // that the next statement reconnects instead of failing as its rest.
  void abandon_transaction() noexcept;

  // The schema the store's tables live in: the one holding colikv_schema as
  // the connection's search_path found it at the first connect, or for a new
  // store the current schema then. Resolved once; every statement runs with
  // search_path pinned to it (reconnects pin the same one), so that roles
  // with other search_paths reach the same rows and take the same lock.
  const std::string& schema_name() const { return schema_name_; }
  int64_t schema_oid() const { return schema_oid_; }

  // The advisory-lock key of this store (its schema's name), taken by write
  // transactions so that writers of one store run one at a time, as SQLite's.
  int64_t store_lock_key() const { return lock_key_; }

  // How many times this connection has waited for the server: each query()
  // and exec(), a statement's first PREPARE, a PgRowStream once, not the
  // connecting. What the tests count to bound a call's round trips.
  int64_t round_trips() const { return round_trips_; }

 private:
  friend class PgRowStream;
  // Runs f, naming a PgError it throws by errors_ (raise).
  template <class F>
  auto named(F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const PgError& e) {
      raise(e);
    }
  }
  // query(), exec(), vacuum_full() and ensure_connected() throwing PgError
  // unnamed: for the connection's own steps (a reconnect's session setup).
  PgRows query_unnamed(const std::string& sql, const PgParams& params, const std::string& what);
  PgRows query_unnamed(const std::string& sql, const std::string& what) { return query_unnamed(sql, PgParams(), what); }
  void exec_unnamed(const std::string& sql, const std::string& what);
  void vacuum_tables(const std::vector<std::string>& tables, const std::string& what);
  void reconnect_if_closed(const std::string& what);
  // Throws PgError(kInvalidArgument) for parameters holding a NUL byte.
  void check_params(const PgParams& params, const std::string& what) const;
  // `what` and the server, for the start of a message.
  std::string at(const std::string& what) const { return what.empty() ? server_ : what + ": " + server_; }
  void connect(const std::string& what);
  void configure_session(const std::string& what);
  void resolve_schema(const std::string& what);
  // True when the server closed this idle connection (its goodbye and EOF
  // are waiting on the socket); reads them without blocking.
  bool closed_by_server();
  // Before a statement is sent: reconnects an idle connection the server
  // closed; false for a ROLLBACK that a lost connection made needless.
  bool ready_to_send(const std::string& sql, const std::string& what);
  [[noreturn]] void fail(const PGresult* r, const std::string& what);
  // The name of `sql` prepared on this connection, preparing it the first time.
  const std::string& prepared(const std::string& sql, const PgParams& params, const std::string& what);
  static void on_notice(void* self, const PGresult* r);

  std::string uri_;
  Settings settings_;
  std::string server_;
  std::unique_ptr<PGconn, PgConnDeleter> conn_;
  std::map<std::string, std::string> prepared_;  // SQL text -> statement name
  std::string schema_name_;
  int64_t schema_oid_ = 0;  // 0: not resolved (no schema to create the store in)
  int64_t lock_key_ = 0;
  bool sent_in_transaction_ = false;  // the last statement was sent inside a transaction
  bool lost_in_transaction_ = false;  // and the connection was lost with it
  std::vector<std::string>* warnings_ = nullptr;  // where the server's warnings go while collected
  int64_t round_trips_ = 0;
  const ErrorContext* errors_ = nullptr;
  bool streaming_ = false;  // a PgRowStream's rows are still coming: no other statement may be sent
};

// One statement whose rows are read one at a time while later ones are still
// on their way (libpq's single-row mode, in binary): a caller decodes a row
// while the server sends the next, in one round trip, holding about one row.
// While it lives, no other statement may run on the connection.
class PgRowStream {
 public:
  // Sends the statement (prepared once per connection, as query()); throws
  // PgError naming `what` and the server when it cannot be sent.
  PgRowStream(PgConnection& conn, const std::string& sql, const PgParams& params, const std::string& what);
  // Reads and drops the rows not read yet, so that the connection can run
  // the next statement (or is left cleanly failed when it was lost).
  ~PgRowStream();
  PgRowStream(const PgRowStream&) = delete;
  PgRowStream& operator=(const PgRowStream&) = delete;

  // The next row, as a one-row PgRows; none after the last. A server error or
  // a lost connection throws PgError as query() does (kIO for a lost one),
  // after the statement's remaining results are read.
  std::optional<PgRows> next();

  // For the tests only: called after each row arrives, before next()
  // returns it (a test stops the server there, mid-statement). Empty otherwise.
  static std::function<void()> after_row_for_tests;

 private:
  void send(const std::string& sql, const PgParams& params);
  void finish() noexcept;

  PgConnection& conn_;
  std::string what_;
  bool done_ = false;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_POSTGRES_PG_CONNECTION_H
