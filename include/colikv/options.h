// colikv/options.h: how a store is opened. Every field documents its default.
#ifndef COLIKV_OPTIONS_H
#define COLIKV_OPTIONS_H

#include <cstdint>

namespace colikv {

enum class Synchronous {
  // Default. Every committed turn is synced to the device before the call
  // returns: it survives a process crash and a power loss.
  kFull,
  // The WAL is synced only at checkpoints: a committed turn survives a process
  // crash; a power loss may lose the last turns but never corrupts the store.
  kNormal,
};

struct Options {
  // Create the file (and its schema) when it does not exist. Default: true.
  // When false, opening a missing file fails with kNotFound.
  bool create_if_missing = true;

  // Open read-only: every write fails with kReadOnly, and no migration is
  // applied (a store that needs one fails to open with kVersion). Default: false.
  bool read_only = false;

  // Durability of each commit. Default: Synchronous::kFull.
  Synchronous synchronous = Synchronous::kFull;

  // How long a call waits for another connection's lock before failing with
  // kBusy, in milliseconds. Default: 5000.
  int busy_timeout_ms = 5000;

  // zstd level of chunk payloads. Default: 1 (on full-precision activations,
  // higher levels gain under 1% in size for several times the time).
  int zstd_level = 1;

  // Target raw size of a chunk in bytes; a new model's chunk size in tokens is
  // the largest power of two whose chunk stays within it (at least 1 token,
  // at most 1024 tokens). Fixed per model when its row is first written.
  // Default: 4 MiB.
  int64_t chunk_target_bytes = int64_t{4} << 20;

  // Threads that shuffle, compress, checksum and decompress chunks; 0 means
  // one per hardware core. Default: 0.
  int threads = 0;

  // An append whose raw size is at most this is encoded entirely before its
  // write transaction starts, so the write lock is held only for the SQL
  // writes. A larger append (a whole imported file) is encoded while its one
  // transaction is open, a few chunks at a time, so that memory stays bounded.
  // Default: 256 MiB.
  int64_t max_staged_bytes = int64_t{256} << 20;

  // Page size of a new store, in bytes (SQLite allows 512..65536). Large pages
  // keep multi-megabyte chunk blobs in fewer overflow pages. Default: 65536.
  int page_size = 65536;

  // Harden SQLite against a crafted database file (SQLITE_DBCONFIG_DEFENSIVE,
  // no triggers or views run from the file's schema, trusted_schema off).
  // Default: true.
  bool defensive = true;
};

}  // namespace colikv

#endif  // COLIKV_OPTIONS_H
