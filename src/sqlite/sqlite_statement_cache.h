// Prepared statements kept across calls (the prefix lookup, eviction): SQL
// text compiled once per connection.
#ifndef COLIKV_SRC_SQLITE_SQLITE_STATEMENT_CACHE_H
#define COLIKV_SRC_SQLITE_SQLITE_STATEMENT_CACHE_H

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace colikv {
namespace detail {

// One use of a cached statement: reset when the use ends, however it ends (a
// statement left stepped would hold its read snapshot open).
class StatementUse {
 public:
  explicit StatementUse(SQLite::Statement& q) : q_(q) {}
  ~StatementUse() {
    try {
      q_.reset();
      q_.clearBindings();
    } catch (...) {
    }
  }
  StatementUse(const StatementUse&) = delete;
  StatementUse& operator=(const StatementUse&) = delete;
  SQLite::Statement* operator->() { return &q_; }
  SQLite::Statement& operator*() { return q_; }

 private:
  SQLite::Statement& q_;
};

class StatementCache {
 public:
  // db must outlive the cache.
  explicit StatementCache(SQLite::Database& db) : db_(db) {}
  // The statement of `sql`, prepared on first use. A statement is not
  // re-entrant: one use of each at a time. Found by the text as given (a
  // literal, mostly), without copying it into a std::string: an append uses
  // a dozen statements, and each copy was an allocation (issue 20).
  StatementUse use(std::string_view sql) {
    auto it = statements_.find(sql);
    if (it == statements_.end()) {
      std::string text(sql);
      auto q = std::make_unique<SQLite::Statement>(db_, text);
      it = statements_.emplace(std::move(text), std::move(q)).first;
    }
    return StatementUse(*it->second);
  }

 private:
  SQLite::Database& db_;
  std::map<std::string, std::unique_ptr<SQLite::Statement>, std::less<>> statements_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_STATEMENT_CACHE_H
