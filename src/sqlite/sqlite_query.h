// One use of a statement by a catalog, whose SQLite errors are named by the
// catalog's ErrorContext (backend_error.h). A catalog method runs its
// statements through it and translates no error of its own; the backend's
// own steps that name their context themselves use sqlite_context
// (sqlite_util.h).
#ifndef COLIKV_SRC_SQLITE_SQLITE_QUERY_H
#define COLIKV_SRC_SQLITE_SQLITE_QUERY_H

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "catalog/backend_error.h"
#include "sqlite/sqlite_statement_cache.h"
#include "sqlite/sqlite_util.h"

namespace colikv {
namespace detail {

// The calls are SQLite::Statement's, by the same names; each one that fails
// throws the colikv::Error that `errors` names (sqlite_named), read as
// `reading` (kStoredRows: the statement reads stored rows).
class Query {
 public:
  // A statement prepared for this use alone.
  Query(SQLite::Database& db, const std::string& sql, const ErrorContext& errors, Reading reading = Reading::kAny)
      : errors_(errors), reading_(reading) {
    translated([&] { own_.emplace(db, sql); });
    q_ = &*own_;
  }
  // The cache's statement of `sql` (StatementCache::use), reset when this use ends.
  Query(StatementCache& cache, std::string_view sql, const ErrorContext& errors, Reading reading = Reading::kAny)
      : errors_(errors), reading_(reading) {
    q_ = translated([&] { return &cache.statement(sql); });
    cached_.emplace(*q_);
  }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  template <class... Value>
  void bind(int index, const Value&... value) {
    translated([&] { q_->bind(index, value...); });
  }
  // The blob is SQLite's to read until the statement is reset: it must outlive this use's steps.
  void bindNoCopy(int index, const void* blob, int bytes) {
    translated([&] { q_->bindNoCopy(index, blob, bytes); });
  }
  // True for a row, false when done.
  bool executeStep() {
    return translated([&] { return q_->executeStep(); });
  }
  // The rows changed.
  int exec() {
    return translated([&] { return q_->exec(); });
  }
  void reset() {
    translated([&] { q_->reset(); });
  }
  SQLite::Column getColumn(int index) {
    return translated([&] { return q_->getColumn(index); });
  }

  // An INTEGER column of a stored row, `column` naming it; anything else is
  // a damaged or hostile store (kCorrupt, not_an_integer).
  int64_t stored_int(int index, const char* column) {
    const SQLite::Column col = getColumn(index);
    const std::string why = not_an_integer(col, column);
    if (!why.empty()) corrupt(why);
    return col.getInt64();
  }
  // The same for a column that may be NULL (none).
  std::optional<int64_t> stored_optional_int(int index, const char* column) {
    if (getColumn(index).isNull()) return std::nullopt;
    return stored_int(index, column);
  }
  // The store holds what no colikv writes: kCorrupt saying `why`.
  [[noreturn]] void corrupt(const std::string& why) const {
    throw errors_.name(BackendError(ErrorCode::kCorrupt, why), reading_);
  }

 private:
  template <class F>
  auto translated(F&& f) -> decltype(f()) {
    return sqlite_named(errors_, f, reading_);
  }

  const ErrorContext& errors_;
  Reading reading_;
  std::optional<SQLite::Statement> own_;
  std::optional<StatementUse> cached_;
  SQLite::Statement* q_ = nullptr;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_QUERY_H
