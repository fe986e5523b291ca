// What a person can do when a write to a store failed for want of disk space.
#ifndef COLIKV_TOOLS_CLI_DISK_FULL_H
#define COLIKV_TOOLS_CLI_DISK_FULL_H

#include <cstdint>
#include <string>

namespace colikv_cli {

// Figures to append to a "disk full" error about the store at store_path:
// how much the filesystem has free, and how much to free. A store whose WAL
// holds changes not yet copied into the database takes no write, not even a
// delete, until that copy (a checkpoint) can grow the database: about the
// WAL's size must be freed first (the library's message says why).
std::string disk_full_advice(const std::string& store_path);

// Figures to append to a "disk full" error writing `file` (not a store) of
// file_bytes: how much its filesystem has free, and the file size limit if
// there is one.
std::string file_disk_full_advice(const std::string& file, int64_t file_bytes);

// For an I/O error or a full disk: the file size limit of this process
// (ulimit -f), when it has one. A write past it fails with EFBIG, which
// SQLite reports as a plain "disk I/O error" even with a disk half empty.
std::string file_size_limit_note();

}  // namespace colikv_cli

#endif  // COLIKV_TOOLS_CLI_DISK_FULL_H
