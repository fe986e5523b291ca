#include "sqlite/sqlite_migrations.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "colikv/error.h"
#include "sqlite/sqlite_util.h"

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
  if (current >= up_to) return;
  // A migration that rebuilds a table (0007) must run with foreign key
  // enforcement off, which SQLite allows to change only outside a
  // transaction; each migration then checks the keys it could break.
  const bool enforced = query_int(db, "PRAGMA foreign_keys", what) != 0;
  exec(db, "PRAGMA foreign_keys=OFF", what);
  struct Restore {
    SQLite::Database& db;
    bool on;
    ~Restore() {
      try {
        if (on) db.exec("PRAGMA foreign_keys=ON");
      } catch (const std::exception&) {  // only outside a transaction can it fail, and none is open here
      }
    }
  } restore{db, enforced};
  for (const Migration& m : embedded_migrations()) {
    if (m.version <= current || m.version > up_to) continue;
    SqlTransaction txn(db, what);
    // Another process may have migrated between our check and our lock.
    if (query_int(db, "PRAGMA user_version", what) >= m.version) continue;
    exec(db, m.sql, what + ": migration " + m.name);
    if (query_int(db, "SELECT count(*) FROM pragma_foreign_key_check('conversations')", what) != 0)
      throw Error(ErrorCode::kCorrupt, what + ": migration " + m.name +
                                           ": a conversation names a model, parent or tenant that does not exist");
    exec(db, "PRAGMA user_version=" + std::to_string(m.version), what);
    txn.commit();
  }
}

namespace {

const char* kSchemaSelect = "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name";

std::vector<SchemaObject> read_schema(SQLite::Database& db) {
  std::vector<SchemaObject> out;
  SQLite::Statement q(db, kSchemaSelect);
  while (q.executeStep())
    out.push_back({q.getColumn(0).getString(), q.getColumn(1).getString(), q.getColumn(2).getString(),
                   q.getColumn(3).getString()});
  return out;
}

bool is_statistics_table(const SchemaObject& o) {
  return o.type == "table" && o.name.compare(0, 11, "sqlite_stat") == 0;
}

// Names come from the file: control bytes are shown as \xNN, never printed.
std::string visible(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : s) {
    if (ch < 0x20 || ch == 0x7f) {
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string describe(const SchemaObject& o) { return visible(o.type) + " '" + visible(o.name) + "'"; }

}  // namespace

const std::vector<SchemaObject>& expected_schema(int version) {
  // Never destroyed: an atexit handler registered before the first open runs
  // after static destructors would have run, and may still open a store.
  static std::mutex& mu = *new std::mutex;
  static std::map<int, std::vector<SchemaObject>>& cache = *new std::map<int, std::vector<SchemaObject>>;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(version);
  if (it != cache.end()) return it->second;
  SQLite::Database mem(":memory:", SQLite::OPEN_READWRITE);
  for (const Migration& m : embedded_migrations())
    if (m.version <= version) exec(mem, m.sql, "in-memory schema: migration " + std::string(m.name));
  return cache.emplace(version, sqlite_context("in-memory schema", [&] { return read_schema(mem); })).first->second;
}

void check_schema(SQLite::Database& db, int version, const std::string& what) {
  const std::vector<SchemaObject> found = sqlite_context(what, [&] { return read_schema(db); });
  const std::vector<SchemaObject>& want = expected_schema(version);
  std::map<std::pair<std::string, std::string>, const SchemaObject*> wanted;
  for (const SchemaObject& o : want) wanted[{o.type, o.name}] = &o;
  std::vector<std::string> problems;
  for (const SchemaObject& o : found) {
    auto w = wanted.find({o.type, o.name});
    if (w == wanted.end()) {
      if (!is_statistics_table(o)) problems.push_back(describe(o) + " is not colikv's");
      continue;
    }
    if (!(*w->second == o)) problems.push_back(describe(o) + " differs from colikv's definition");
    wanted.erase(w);
  }
  for (const auto& w : wanted) problems.push_back(describe(*w.second) + " is missing");
  if (problems.empty()) return;
  std::string msg = what + ": not colikv's schema version " + std::to_string(version) + " (altered or damaged): ";
  const size_t shown = std::min<size_t>(problems.size(), 5);
  for (size_t i = 0; i < shown; ++i) msg += (i ? "; " : "") + problems[i];
  if (problems.size() > shown) msg += "; and " + std::to_string(problems.size() - shown) + " more";
  throw Error(ErrorCode::kCorrupt, msg);
}

}  // namespace detail
}  // namespace colikv
