// colikv/options.h: how a store is opened. Every field documents its default;
// those marked "SQLite only" are ignored by a PostgreSQL store.
#ifndef COLIKV_OPTIONS_H
#define COLIKV_OPTIONS_H

#include <cstdint>
#include <optional>
#include <string>

namespace colikv {

enum class Synchronous {
  // Default. Every committed turn is synced to the device before the call
  // returns: it survives a process crash and a power loss.
  kFull,
  // The WAL is synced only at checkpoints: a committed turn survives a process
  // crash; a power loss may lose the last turns but never corrupts the store.
  kNormal,
};

// How a conversation's KV values are stored; recorded per conversation
// (conversations.precision) and per chunk (chunks.precision).
enum class Precision {
  // Default. float32 exactly as given: a load returns the same bits.
  kF32,
  // Lossy, only when asked for by name: each float32 is rounded to bfloat16
  // (round to nearest, ties to even) and stored in 2 bytes; a load widens it
  // back to float32. bfloat16 keeps 8 significant bits, so for a normal value
  // x within bfloat16's range the loaded value y has
  // |y - x| <= 2^-8 * |x| (half a unit in the last place: relative error at
  // most 2^-8 ~ 0.39%; docs/benchmarks.md has the measured error); zeros,
  // infinities and bfloat16-representable values stay exact, NaN stays NaN
  // (quiet), a subnormal keeps an absolute error <= 2^-134, and a finite value
  // of magnitude >= 0x1.ff8p127 (~3.39e38) becomes infinity. Values that came
  // from bf16 (widened to float32) are stored exactly.
  kBf16,
};

struct Options {
  // Create the file (and its schema) when it does not exist. Default: true.
  // When false, opening a missing file fails with kNotFound. A store that
  // must appear whole, or not replace a file created meanwhile, is made with
  // create_staged instead.
  bool create_if_missing = true;

  // Open read-only: every write fails with kReadOnly, and no migration is
  // applied (a store that needs one fails to open with kVersion). When this
  // process could write the file and its folder, the connection is opened
  // read-write with SQLite's query_only on, so that closing the store's last
  // connection checkpoints the WAL and removes the -wal and -shm files as a
  // writer's close does, instead of leaving them behind. Default: false.
  bool read_only = false;

  // Durability of each commit (on PostgreSQL: synchronous_commit on for kFull,
  // off for kNormal). Default: Synchronous::kFull.
  Synchronous synchronous = Synchronous::kFull;

  // How long a call waits for another connection's lock before failing with
  // kBusy, in milliseconds (on PostgreSQL: its lock_timeout). Default: 5000.
  int busy_timeout_ms = 5000;

  // zstd level of chunk payloads. Each byte plane of a chunk is its own zstd
  // frame, compressed only when a trial on its first 128 KiB saves at least
  // 1/64 (else stored as a raw frame). Level 1 uses parameters tuned for the
  // sign/exponent bytes of float32 activations (fast strategy, hashLog 8,
  // minMatch 7, targetLength 512, Huffman literals forced on), which encode
  // a chunk about twice as fast as stock level 1 for a few bytes more
  // (docs/benchmarks.md has the figures). Any other level is stock zstd at
  // that level, per plane. Default: 1 (on full-precision activations, higher
  // levels gain little size for several times the time).
  int zstd_level = 1;

  // Precision of a conversation this Store creates (append to a new id,
  // create, import); an existing conversation keeps the precision it was
  // created with, and a fork inherits its source's. Default: Precision::kF32
  // (lossless). kBf16 halves the stored size of full-precision activations at
  // the error bound documented on Precision::kBf16; ConversationInfo::precision
  // and the sqlite3 shell (conversations.precision) say which one holds.
  Precision new_conversation_precision = Precision::kF32;

  // Target raw size of a chunk in bytes; a new model's chunk size in tokens is
  // the largest power of two whose chunk stays within it (at least 1 token,
  // at most 1024 tokens). Fixed per model when its row is first written.
  // At most 16 MiB: a larger value counts as 16 MiB (a model whose one
  // record exceeds that is not stored). Default: 4 MiB.
  int64_t chunk_target_bytes = int64_t{4} << 20;

  // Threads that shuffle, compress, checksum and decompress chunks; 0 means
  // one per hardware core. Default: 0.
  int threads = 0;

  // How far, in raw (decoded) bytes, chunk encoding may run ahead of the
  // writer. An append starts encoding on the worker threads, then takes the
  // write lock and writes each chunk as soon as it is encoded, while later
  // ones are still being encoded; at most this many raw bytes (and at least
  // two chunks per thread) are encoded and not yet written. Imports use at
  // most 16 MiB. Default: 256 MiB.
  int64_t max_staged_bytes = int64_t{256} << 20;

  // Bound on the memory of turns queued by Store::append_async and not yet
  // committed: the raw bytes of their staged rows. An append_async that would
  // pass it blocks until the background writer frees enough (a turn larger
  // than the bound alone is queued once the queue is empty). The writer keeps
  // up to two staging buffers, within the same bound, so that turns' copies do
  // not page-fault: recycled ones, and with prefault_async_staging the first.
  // Default: 1 GiB (about eleven 512-token turns of a 78-layer, 576-float model).
  int64_t max_queued_bytes = int64_t{1} << 30;

  // For an engine that appends with append_async: when the Store opens
  // (writable), its writer thread allocates and faults in the first staging
  // buffer (128 MiB, within max_queued_bytes) in the background, so that the
  // first turn's copy does not page-fault on the engine's thread, whether or
  // not the engine restored a conversation first. That memory and the thread
  // are held while the Store is open, turns queued or not, which is why it is
  // asked for, not done for every Store. C API: COLIKV_PREFAULT_STAGING.
  // Default: false.
  bool prefault_async_staging = false;

  // SQLite only. Page size of a new store, in bytes (SQLite allows 512..65536); an
  // existing store keeps the page size it was created with (a WAL database
  // cannot change it). Every table and index of the schema takes at least one
  // page, and an append rewrites each page it touches whole, so the page size
  // sets the size of an empty store (about 15 pages) and the bytes a small
  // append writes; large pages keep multi-megabyte chunk blobs in fewer
  // overflow pages. Default: 16384 (stores created before it have 65536).
  int page_size = 16384;

  // SQLite only. WAL size, in bytes, past which a commit starts a background checkpoint
  // (a commit waits for one at 4 times this), and to which a WAL that grew
  // past it is cut back when next restarted (PRAGMA journal_size_limit). In
  // bytes, not pages, so that a smaller page size does not checkpoint large
  // turns more often. Default: 64 MiB.
  int64_t wal_checkpoint_bytes = int64_t{64} << 20;

  // SQLite only. Harden SQLite against a crafted database file (SQLITE_DBCONFIG_DEFENSIVE,
  // no triggers or views run from the file's schema, trusted_schema off).
  // Default: true.
  bool defensive = true;

  // Byte budget of the store's KV data: the chunk payload bytes that
  // stats().total.stored_bytes reports (the file also holds token ids, indexes
  // and free pages). When an append leaves the store above it, the same
  // transaction evicts the KV data of the least recently used conversations
  // (never the one just written) until it fits, keeping their rows, metadata
  // and token ids; chunks still used by a kept conversation stay. See
  // Store::gc. It counts every tenant's conversations and evicts across them;
  // a tenant's own quota, kept in the store, is TenantLimits (store.h). 0
  // means unlimited. Default: 0.
  int64_t max_store_bytes = 0;

  // Permission bits of a store file this Store creates (masked by the umask,
  // as open(2) does). SQLite gives the -wal and -shm files it creates beside a
  // store the store file's mode, so they get it too. An existing store keeps
  // its mode. The stored KV and token ids are the conversations' content, so
  // only the owner may read them unless this says otherwise (0640 lets the
  // owner's group read the store too). Bits outside 0777 fail with
  // kInvalidArgument. Ignored by a store on a server. Default: 0600.
  int file_mode = 0600;

  // The tenant (sharing domain) this Store sees and writes. A conversation
  // belongs to one tenant and its id is unique within it; every call of the
  // Store (load, list, count, info, match, stats, verify, gc, copy, fork,
  // rename, delete, export, ...) sees only this tenant's conversations, and
  // chunks are shared, deduplicated and matched only within it (docs/design.md,
  // "Tenants"). "" is the default tenant, which holds every conversation of a
  // store made before tenants. A tenant the store does not hold yet is created
  // by a writable open with create_tenant_if_missing; a read-only open, or
  // one without it, fails with kNotFound ("no such tenant 'X'"). A name
  // holding a control character (below 0x20, or 0x7f) or longer than 255
  // bytes fails with kInvalidArgument. Default: "".
  std::string tenant;

  // Whether a writable open creates the tenant named by `tenant` when the
  // store does not hold it (a read-only open never does). Default: true.
  bool create_tenant_if_missing = true;

  // SQLite only. Name of a registered SQLite VFS to open the file with (sqlite3_vfs_find);
  // "" means SQLite's default. Tests use it to inject I/O faults and power
  // loss. Default: "".
  std::string vfs_name;

  // SQLite only, and refused (not ignored) for a store on a server, so that
  // a caller counting on it is never misled. Create a new store that appears
  // whole or not at all, and never in place of another file. The Store
  // builds it under a temporary name, ".colikv-import-XXXXXX" in the
  // directory of the location's file (a `file:` URI is decoded to its path,
  // its query not read; symbolic links are followed to the name they end
  // at), with file_mode; nothing has the location's name until
  // Store::publish() succeeds, which links the closed file to it. A Store
  // destroyed without publish() removes its temporary files, and so does a
  // publish() that fails; those of a process killed midway are removed by
  // the next staged creation in that directory (each holds an flock on its
  // file while it lives). create_if_missing is not read. The Store's
  // constructor then throws kConflict when a file of that name exists (it is
  // not touched), kInvalidArgument with read_only, for a postgresql://
  // location (a server's store is created by its first transaction: there is
  // no file to build aside) or for a `file:` URI that names another host or
  // no file, kNotFound for a missing directory, and kIO or kReadOnly when no
  // file can be made there. Default: false.
  bool create_staged = false;
};

// A tenant's own limits, kept in the store with the tenant (so every process
// writing for it applies the same ones): Store::set_tenant_limits.
struct TenantLimits {
  // The tenant's byte budget: after an append into the tenant (append, write,
  // import, copy), its least recently used conversations other than the one
  // written are evicted, as gc evicts, until the payloads of the chunks its
  // conversations link take at most this many bytes. Another tenant's
  // conversations are never evicted by it. none: no quota (the store-wide
  // Options::max_store_bytes still applies).
  std::optional<int64_t> max_bytes;
  // Retention, in milliseconds: the same appends first delete, whole, every
  // conversation of the tenant not used (ConversationInfo::last_used_ms) for
  // longer than this: its row, chunk list, token ids and the chunks no other
  // conversation links, erased from the files as remove() erases. none: kept
  // however long idle.
  //
  // What counts as a use (sets last_used_ms): an append, a fork from it, a
  // load (load, load_range) through a writable Store. A match or an
  // adoption does not count (load what you keep), nor does anything done
  // through a read-only Store, which never writes. A load's use that could
  // not be written at once, because another connection held the write lock,
  // is kept by its Store and written by that Store's next write transaction,
  // before anything else in it, or at its close. So retention and expire()
  // run through the Store that loaded never take a conversation whose load
  // returned before them. Through another Store or process (SQLite), a
  // use still pending in the loading Store is not seen until written; on
  // PostgreSQL a load's use is written unless the row is locked by a writer
  // at that instant.
  std::optional<int64_t> max_idle_ms;
  bool operator==(const TenantLimits& o) const { return max_bytes == o.max_bytes && max_idle_ms == o.max_idle_ms; }
};

// Which fields of TenantLimits a Store::set_tenant_limits call replaces; the
// others keep their stored values (read in the same write transaction, so
// two hosts setting different limits at once both keep theirs).
enum TenantLimitFields : unsigned {
  kTenantMaxBytes = 1u,
  kTenantMaxIdle = 2u,
  kAllTenantLimits = kTenantMaxBytes | kTenantMaxIdle,
};

}  // namespace colikv

#endif  // COLIKV_OPTIONS_H
