// Erasing deleted rows from a SQLite store's files: the step after a commit
// that deleted a conversation (or evicted KV data in gc).
#ifndef COLIKV_SRC_SQLITE_SQLITE_ERASE_H
#define COLIKV_SRC_SQLITE_SQLITE_ERASE_H

#include <sqlite3.h>

#include "sqlite/sqlite_util.h"

namespace colikv {
namespace detail {

// Every connection of a store deletes with secure_delete on (open_store sets
// it), so a delete's commit writes zeros over the rows and pages it frees;
// but those zeros are new WAL frames, while the deleted bytes are still in
// the database file and in older frames of the WAL. This copies every frame
// into the database file and cuts the WAL to zero bytes (a TRUNCATE
// checkpoint), after which no byte freed by a committed delete is left in
// either file.
//
// The checkpoint needs every reader to read the latest snapshot: a reader
// holding an older one (a read transaction begun before the delete) keeps
// the frames it may still read. The write lock is never held while waiting
// for it: each attempt fails at once (busy handler off) and is retried after
// a short sleep until wait_ms have passed; the connection's busy timeout is
// then set back to `busy`, its own (SQLite cannot tell it). Returns true when the WAL was
// emptied, false when readers (or writers) kept it busy that long or SQLite
// failed; the frames then stay, safe, for a later attempt.
bool erase_freed_pages(sqlite3* db, int wait_ms, BusyWait& busy);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_SQLITE_ERASE_H
