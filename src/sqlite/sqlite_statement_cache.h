// Prepared statements kept across calls (the prefix lookup, eviction): SQL
// text compiled once per connection.
#ifndef COLIKV_SRC_SQLITE_SQLITE_STATEMENT_CACHE_H
#define COLIKV_SRC_SQLITE_SQLITE_STATEMENT_CACHE_H

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>
#include <SQLiteCpp/Statement.h>
#include <sqlite3.h>

#include <array>
#include <cstdint>
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
  // db must outlive the cache, which is the only authorizer of db's.
  explicit StatementCache(SQLite::Database& db) : db_(db) {
    sqlite3_set_authorizer(db_.getHandle(), &refuse_writes_while_reading, this);
  }
  ~StatementCache() { sqlite3_set_authorizer(db_.getHandle(), nullptr, nullptr); }
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;

  // While an outermost read transaction is open (SqlTransaction), a
  // statement that would write is refused (SQLITE_READONLY, or SQLITE_AUTH
  // when prepared meanwhile: both kReadOnly), as PRAGMA query_only would
  // refuse it. Not that pragma: setting it expires every prepared statement
  // of the connection, so every read transaction made the next call
  // re-prepare every statement it used.
  void set_reading(bool reading) { reading_ = reading; }

  // The statement of `sql`, prepared on first use. A statement is not
  // re-entrant: one use of each at a time. Found by the text as given (a
  // literal, mostly), without copying it into a std::string: an append uses
  // a dozen statements, and each copy was an allocation (issue 20).
  StatementUse use(std::string_view sql) { return StatementUse(statement(sql)); }

  // The same statement, for a use that resets it itself (Query).
  SQLite::Statement& statement(std::string_view sql) {
    const Cached& c = find(sql);
    if (reading_ && c.writes) throw SQLite::Exception("attempt to write in a read transaction", SQLITE_READONLY);
    return *c.statement;
  }

 private:
  struct Cached {
    std::unique_ptr<SQLite::Statement> statement;
    bool writes = false;  // changes a table, an index, a view, a trigger, an attachment or a setting
  };
  using Map = std::map<std::string, Cached, std::less<>>;

  // The map's entry of `sql`, through a small table found by where the text
  // is: the same literal comes at the same address each time, and one
  // comparison of it there costs less than the map's walk over texts that
  // share long beginnings. The comparison keeps any text correct (a string
  // built again at an address another used).
  const Cached& find(std::string_view sql) {
    Recent& r = recent_[(reinterpret_cast<uintptr_t>(sql.data()) >> 3) % kRecent];
    if (r.entry && r.data == sql.data() && r.entry->first == sql) return r.entry->second;
    auto it = statements_.find(sql);
    if (it == statements_.end()) {
      std::string text(sql);
      saw_write_ = false;  // the authorizer tells, while it is prepared
      auto q = std::make_unique<SQLite::Statement>(db_, text);
      it = statements_.emplace(std::move(text), Cached{std::move(q), saw_write_}).first;
    }
    r.data = sql.data();
    r.entry = &*it;  // a map's entries stay where they are: none is ever erased
    return it->second;
  }

  struct Recent {
    const char* data = nullptr;
    const Map::value_type* entry = nullptr;
  };
  static constexpr size_t kRecent = 64;

  // The authorizer: notes a statement that writes as it is prepared, and
  // refuses it while reading (a cached one is checked by use()).
  static int refuse_writes_while_reading(void* self, int action, const char*, const char* value, const char*,
                                         const char*) {
    switch (action) {
      case SQLITE_PRAGMA:  // one that sets a value may write the file (user_version)
        if (!value) return SQLITE_OK;
        break;
      case SQLITE_SELECT:
      case SQLITE_READ:
      case SQLITE_FUNCTION:
      case SQLITE_RECURSIVE:
      case SQLITE_TRANSACTION:
      case SQLITE_SAVEPOINT:
        return SQLITE_OK;
      default:
        break;
    }
    StatementCache& cache = *static_cast<StatementCache*>(self);
    cache.saw_write_ = true;
    return cache.reading_ ? SQLITE_DENY : SQLITE_OK;
  }

  SQLite::Database& db_;
  bool reading_ = false;
  bool saw_write_ = false;
  Map statements_;
  std::array<Recent, kRecent> recent_{};
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_STATEMENT_CACHE_H
