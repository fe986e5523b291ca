// Opening a store's SQLite file: the path checked first, the connection
// hardened, WAL mode, the schema checked and migrated.
#ifndef COLIKV_SRC_SQLITE_SQLITE_CONNECTION_H
#define COLIKV_SRC_SQLITE_SQLITE_CONNECTION_H

#include <SQLiteCpp/Database.h>

#include <cstdint>
#include <string>

#include "colikv/options.h"

namespace colikv {
namespace detail {

// Opens (or creates) the store at path, ready for use. Throws kNotFound,
// kVersion, kCorrupt, kReadOnly, kIO, kBusy, kInvalidArgument (a path that is
// not a regular file) as Store's constructor documents. Its waits for a lock
// are busy's (wait_when_busy), which must outlive it; without one, SQLite's
// own busy timeout, Options::busy_timeout_ms.
struct BusyWait;  // sqlite_util.h
SQLite::Database open_store(const std::string& path, const Options& options, BusyWait* busy = nullptr);

// Throws kInvalidArgument naming `what` for an Options::file_mode with bits
// outside 0777.
void check_file_mode(int file_mode, const std::string& what);

// Options::wal_checkpoint_bytes in pages of db (at least 1).
int wal_checkpoint_pages(SQLite::Database& db, const Options& options);

// Bytes of a file; 0 when it does not exist.
int64_t file_size_or_zero(const std::string& path);

// Before a store file is created at `path` (a plain open that creates, a
// staged creation and its publish): throws kConflict when path-wal,
// path-shm or path-journal exists while path does not. Such a file is what a
// deleted store left behind, and SQLite would replay it (a WAL or a rollback
// journal) into the new store at its first open, bringing the deleted
// store's data back over the new one. It is never deleted here: it may be
// the only copy of that store's last transactions.
void refuse_leftover_companions(const std::string& path, const std::string& what);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_CONNECTION_H
