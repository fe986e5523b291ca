// Opening a store's SQLite file (see sqlite_connection.h).
#include "sqlite/sqlite_connection.h"

#include <SQLiteCpp/Statement.h>
#include <sqlite3.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "colikv/error.h"
#include "core/file_kind.h"
#include "core/path.h"
#include "sqlite/sqlite_checkpointer.h"
#include "sqlite/sqlite_migrations.h"
#include "sqlite/sqlite_util.h"
#include "core/store_limits.h"

namespace colikv {
namespace detail {

namespace {

// SQLite checkpoints the WAL and removes the -wal and -shm files when the
// last connection closes, but only for a connection that may write: a
// read-only one leaves them behind in the user's folder. So a read-only open
// of a file (and folder) it could write opens read-write with query_only on:
// every write still fails, and the close cleans up as a writer's does.
bool open_writable_for_cleanup(const std::string& path) {
  return ::access(path.c_str(), W_OK) == 0 && ::access(directory_of(path).c_str(), W_OK) == 0;
}

int open_flags(const std::string& path, const Options& o) {
  if (o.read_only) return open_writable_for_cleanup(path) ? SQLite::OPEN_READWRITE : SQLite::OPEN_READONLY;
  return SQLite::OPEN_READWRITE | (o.create_if_missing ? SQLite::OPEN_CREATE : 0);
}

// Reports a refusal plainly ("permission denied") instead of SQLite's
// "unable to open database file". access(), not open(): closing a descriptor
// of the file would drop the POSIX locks of this process's other connections.
void check_access(const std::string& path, bool write, const std::string& what) {
  if (::access(path.c_str(), R_OK) != 0)
    throw Error(ErrorCode::kIO, what + ": cannot read it: " + std::strerror(errno));
  if (write && ::access(path.c_str(), W_OK) != 0)
    throw Error(ErrorCode::kReadOnly, what + ": cannot write it: " + std::strerror(errno) + "; open it read-only to read it");
}

// A WAL store is opened, even to read it, through its -shm file, which SQLite
// creates beside it when no connection left one: in a directory this user may
// not write, or on a read-only filesystem, that fails as "attempt to write a
// readonly database", whatever the file's own permissions. Said plainly,
// naming the directory.
void check_shm_can_be_created(const std::string& path, const std::string& what) {
  if (::access((path + "-shm").c_str(), F_OK) == 0) return;
  const std::string dir = directory_of(path);
  if (::access(dir.c_str(), W_OK) == 0) return;
  const int err = errno;
  throw Error(ErrorCode::kReadOnly, what + ": cannot open it: SQLite must create " + path +
                                        "-shm beside it, even to read it, and directory " + dir +
                                        " is not writable (" + std::strerror(err) + ")");
}

// SQLite blocks forever opening a FIFO, answers "disk I/O error" for a
// directory and "unable to open database file" for a missing directory: the
// path is checked first, so the library (and the C API) say what is wrong.
// The -wal and -shm files SQLite opens beside it are held to the same rule.
void check_store_path(const std::string& path, const Options& o) {
  // SQLite opens "" as a private temporary database, which cannot use WAL.
  if (path.empty()) throw Error(ErrorCode::kInvalidArgument, "store path is empty");
  const std::string what = "store " + path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT)
      throw Error(ErrorCode::kIO, what + ": cannot look at it: " + std::strerror(errno));
    if (o.read_only) throw Error(ErrorCode::kNotFound, what + ": no such file (opened read-only)");
    if (!o.create_if_missing) throw Error(ErrorCode::kNotFound, what + ": no such file");
    const std::string dir = directory_of(path);
    struct stat ds;
    if (::stat(dir.c_str(), &ds) != 0)
      throw Error(ErrorCode::kNotFound, what + ": cannot create it: directory " + dir + ": " + std::strerror(errno));
    if (!S_ISDIR(ds.st_mode))
      throw Error(ErrorCode::kInvalidArgument, what + ": cannot create it: " + dir + " is not a directory");
    refuse_leftover_companions(path, what);
    return;
  }
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorCode::kInvalidArgument, what + ": " + file_kind(st.st_mode) + ", not a store file");
  for (const char* suffix : {"-wal", "-shm"}) {
    struct stat side;
    if (::stat((path + suffix).c_str(), &side) == 0 && !S_ISREG(side.st_mode))
      throw Error(ErrorCode::kInvalidArgument, what + ": " + path + suffix + " is " + file_kind(side.st_mode) +
                                                   ", not SQLite's " + (suffix[1] == 'w' ? "WAL" : "shared-memory") +
                                                   " file");
  }
  check_access(path, !o.read_only, what);
  check_shm_can_be_created(path, what);
}

// SQLite creates a new database file with mode 0644 (less the umask), and its
// -wal and -shm with the database file's mode: a new store is created here
// first, empty (which SQLite takes for a new database), with
// Options::file_mode. O_EXCL: a file another process created meanwhile is
// left as it is. The descriptor is closed at once, before any connection of
// this process holds a POSIX lock on the file (closing it would drop them).
void create_with_mode(const std::string& path, const Options& o, const std::string& what) {
  check_file_mode(o.file_mode, what);
  if (o.read_only || !o.create_if_missing) return;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                        static_cast<mode_t>(o.file_mode));
  if (fd >= 0) {
    ::close(fd);
  } else if (errno != EEXIST) {
    throw Error(ErrorCode::kIO, what + ": cannot create it: " + std::strerror(errno));
  }
}

// Deleted rows and freed pages are overwritten with zeros as they are freed,
// whatever SQLite's build defaults to (Debian's has SQLITE_SECURE_DELETE,
// others do not): a conversation deleted must not stay readable in the free
// space of the file, nor in that of an older tail piece an append replaced
// (so FAST, which zeroes only pages already written, is not enough). The cost,
// writing the freed pages once more, falls on deletes and on tail rewrites;
// Debian's default build pays it already. Read back, in case a build ignores it.
void zero_what_is_deleted(SQLite::Database& db, const std::string& what) {
  exec(db, "PRAGMA secure_delete=ON", what);
  if (query_int(db, "PRAGMA secure_delete", what) != 1)
    throw Error(ErrorCode::kIO, what + ": this SQLite build does not zero deleted content (PRAGMA secure_delete)");
}

// A store may come from someone else: no schema-defined code runs, SQL
// cannot corrupt the file on purpose, no value larger than any the library
// writes is ever loaded, and the page cache has SQLite's default size, not
// the one the file's header suggests.
void harden(SQLite::Database& db, const Options& options, const std::string& what) {
  sqlite3* h = db.getHandle();
  if (options.defensive) {
    sqlite3_db_config(h, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    sqlite3_db_config(h, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    sqlite3_db_config(h, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
    sqlite3_db_config(h, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
  }
  sqlite3_limit(h, SQLITE_LIMIT_LENGTH, static_cast<int>(kMaxStoredValueBytes));
  exec(db, "PRAGMA cache_size=-2000", what);
  zero_what_is_deleted(db, what);
}

// Statement journals in memory: on disk, SQLite opened and unlinked a
// temporary file for every append (a statement journal of its transaction).
void keep_temporaries_in_memory(SQLite::Database& db, const std::string& what) {
  exec(db, "PRAGMA temp_store=MEMORY", what);
}

struct SchemaState {
  int64_t version = 0;  // PRAGMA user_version
  int64_t objects = 0;  // rows of sqlite_schema
};

// Any read fails here on a file that is not a database. Version and schema
// are read in one snapshot: another process may be creating or migrating the
// schema right now.
SchemaState check_schema_version(SQLite::Database& db, const std::string& what) {
  SchemaState st;
  SqlTransaction snapshot(db, what, SqlTransaction::kRead);
  sqlite_context(what, [&] {
    SQLite::Statement q(db, "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema)");
    q.executeStep();
    st.version = q.getColumn(0).getInt64();
    st.objects = q.getColumn(1).getInt64();
  });
  if (st.version == 0 && st.objects > 0)
    throw Error(ErrorCode::kCorrupt, what + ": not a colikv store (schema version 0 with " +
                                         std::to_string(st.objects) + " objects of another application)");
  if (st.version > latest_schema_version())
    throw Error(ErrorCode::kVersion, what + ": schema version " + std::to_string(st.version) +
                                         " is newer than this library's " + std::to_string(latest_schema_version()) +
                                         "; upgrade colikv to open it");
  if (st.version < 0)
    throw Error(ErrorCode::kCorrupt, what + ": not a colikv store (schema version " + std::to_string(st.version) + ")");
  check_schema(db, static_cast<int>(st.version), what);
  snapshot.commit();
  return st;
}

void check_readable_as_is(const SchemaState& st, const std::string& path, const std::string& what) {
  if (st.version == 0)
    throw Error(ErrorCode::kCorrupt, what + ": not a colikv store (" +
                                         (file_size_or_zero(path) == 0 ? std::string("an empty file")
                                                                       : std::string("an SQLite database without colikv's tables")) +
                                         ")");
  if (st.version < latest_schema_version())
    throw Error(ErrorCode::kVersion, what + ": schema version " + std::to_string(st.version) + " needs migrating to " +
                                         std::to_string(latest_schema_version()) +
                                         ", which a read-only open cannot do");
}

void use_wal(SQLite::Database& db, const SchemaState& st, const Options& options, const std::string& what) {
  if (st.version == 0 && st.objects == 0) {
    int ps = std::clamp(options.page_size, 512, 65536);
    exec(db, "PRAGMA page_size=" + std::to_string(ps), what);
    // Set before the first table, or only a VACUUM can: vacuum and gc then
    // give free pages back in short steps instead of one rewrite (sqlite_space.h).
    exec(db, "PRAGMA auto_vacuum=INCREMENTAL", what);
  }
  std::string mode = sqlite_context(what, [&] { return db.execAndGet("PRAGMA journal_mode=WAL").getString(); });
  if (mode != "wal")
    throw Error(ErrorCode::kIO, what + ": cannot use the WAL journal (PRAGMA journal_mode answered '" + mode + "')");
}

void set_up(SQLite::Database& db, const std::string& path, const Options& options, const std::string& what) {
  const SchemaState st = check_schema_version(db, what);
  if (options.read_only)
    check_readable_as_is(st, path, what);
  else
    use_wal(db, st, options, what);
  exec(db, options.synchronous == Synchronous::kFull ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", what);
  exec(db, "PRAGMA foreign_keys=ON", what);
  if (!options.read_only) apply_migrations(db, what);
}

// Setting up a new store races other processes opening it: switching to WAL
// and the first migration need locks that SQLite may refuse at once
// (SQLITE_BUSY without calling the busy handler, to avoid a deadlock), so the
// setup is retried until the busy timeout has passed.
void set_up_retrying(SQLite::Database& db, const std::string& path, const Options& options, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);
  for (;;) {
    try {
      set_up(db, path, options, what);
      return;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kBusy || std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

// A WAL that grew while a long reader blocked checkpoints is cut back to the
// checkpoint size when it is next restarted. SQLite's own auto-checkpoint
// (which the background checkpointer replaces, but not with a custom VFS)
// uses the same size.
void limit_wal_size(SQLite::Database& db, const Options& options, const std::string& what) {
  const int pages = wal_checkpoint_pages(db, options);
  const int64_t page_size = query_int(db, "PRAGMA page_size", what);
  exec(db, "PRAGMA journal_size_limit=" + std::to_string(pages * page_size), what);
  exec(db, "PRAGMA wal_autocheckpoint=" + std::to_string(pages), what);
}

}  // namespace

void check_file_mode(int file_mode, const std::string& what) {
  if (file_mode >= 0 && file_mode <= 0777) return;
  char octal[24];
  std::snprintf(octal, sizeof octal, "%o", static_cast<unsigned>(file_mode));
  throw Error(ErrorCode::kInvalidArgument, what + ": file mode " + octal + " (octal) has bits outside 0777");
}

int wal_checkpoint_pages(SQLite::Database& db, const Options& options) {
  const int64_t page_size = query_int(db, "PRAGMA page_size", "store " + db.getFilename());
  const int64_t bytes = wal_checkpoint_bytes_for(options.wal_checkpoint_bytes, free_bytes_beside(db.getFilename()));
  const int64_t pages = bytes / page_size;
  return static_cast<int>(std::clamp<int64_t>(pages, 1, int64_t{1} << 28));
}

int64_t file_size_or_zero(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

void refuse_leftover_companions(const std::string& path, const std::string& what) {
  struct Companion {
    const char* suffix;
    const char* is;
  };
  static constexpr Companion kCompanions[] = {
      {"-wal", "the write-ahead log (WAL)"},
      {"-journal", "the rollback journal"},
      {"-shm", "the WAL's shared-memory index"},
  };
  for (const Companion& c : kCompanions) {
    const std::string side = path + c.suffix;
    struct stat st;
    if (::lstat(side.c_str(), &st) != 0) continue;
    // The database may have been given its name meanwhile (another process
    // created the store): then the file is that store's.
    if (::lstat(path.c_str(), &st) == 0) return;
    throw Error(ErrorCode::kConflict,
                what + ": cannot create it: " + side + " exists without its database: it is " + c.is +
                    " of a store deleted from this name, which SQLite would replay into the new store at its first "
                    "open (the deleted store's data would come back over the new one's). It was left as it is: it "
                    "may hold that store's last transactions. Move it away, or delete it if that data is not "
                    "wanted, then create the store again");
  }
}

SQLite::Database open_store(const std::string& path, const Options& options, BusyWait* busy) {
  const std::string what = "store " + path;
  check_store_path(path, options);
  create_with_mode(path, options, what);
  SQLite::Database db = sqlite_context(what + ": open", [&] {
    return SQLite::Database(path, open_flags(path, options), options.busy_timeout_ms, options.vfs_name);
  });
  if (busy) wait_when_busy(db.getHandle(), busy);  // else SQLite's own busy timeout
  if (options.read_only) exec(db, "PRAGMA query_only=1", what);
  harden(db, options, what);
  keep_temporaries_in_memory(db, what);
  set_up_retrying(db, path, options, what);
  if (!options.read_only) limit_wal_size(db, options, what);
  return db;
}

}  // namespace detail
}  // namespace colikv
