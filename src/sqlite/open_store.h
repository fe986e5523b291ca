// Opening a store's SQLite file: the path checked first, the connection
// hardened, WAL mode, the schema checked and migrated.
#ifndef COLIKV_SRC_SQLITE_OPEN_STORE_H
#define COLIKV_SRC_SQLITE_OPEN_STORE_H

#include <SQLiteCpp/Database.h>

#include <cstdint>
#include <string>

#include "colikv/options.h"

namespace colikv {
namespace detail {

// Opens (or creates) the store at path, ready for use. Throws kNotFound,
// kVersion, kCorrupt, kReadOnly, kIO, kBusy, kInvalidArgument (a path that is
// not a regular file) as Store's constructor documents.
SQLite::Database open_store(const std::string& path, const Options& options);

// Throws kInvalidArgument naming `what` for an Options::file_mode with bits
// outside 0777.
void check_file_mode(int file_mode, const std::string& what);

// Options::wal_checkpoint_bytes in pages of db (at least 1).
int wal_checkpoint_pages(SQLite::Database& db, const Options& options);

// Bytes of a file; 0 when it does not exist.
int64_t file_size_or_zero(const std::string& path);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_OPEN_STORE_H
