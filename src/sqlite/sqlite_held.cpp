// Objects first on SQLite (sqlite_turn.cpp; docs/design.md, "Objects first"):
// the chunks a writer stored or found before its link, held in held_chunks
// under its writers row, and the reclaim of those of writers certainly dead.
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "sqlite/sqlite_catalog.h"
#include "sqlite/sqlite_prefix_index.h"
#include "sqlite/sqlite_util.h"
#include "metrics/metrics.h"
#include "sqlite/sqlite_writer_lock.h"
#include "catalog/location.h"

namespace colikv {
namespace detail {

namespace {

// How long a writer between two of its chunk transactions leaves the write
// lock to others: a few of their busy handler's retries (wait_when_busy).
constexpr std::chrono::microseconds kWriterOpening{300};
// How often it does so while it sees no other writer commit: a writer that
// waits has not committed yet, so it is let in at least this often.
constexpr std::chrono::milliseconds kOpeningEvery{20};

std::string first_line(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string link_text(const char* path) {
  char buf[256];
  const ssize_t n = ::readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Field 22 of /proc/PID/stat, the process start time in clock ticks since
// boot; -1 when unknown. Recorded for a person reading the writers table:
// no decision is taken on it (see certainly_dead).
int64_t start_ticks(const std::string& pid) {
  const std::string stat = first_line("/proc/" + pid + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(rest >> field)) return -1;
  try {
    return std::stoll(field);
  } catch (const std::exception&) {
    return -1;
  }
}

// The pid_ns of a writer that holds its byte in the lock file
// (sqlite_writer_lock.h) starts with this: no /proc link text does, so a
// library before the lock file, which compared pid_ns with its own to
// decide, takes such a writer for one of another pid namespace: never dead.
constexpr char kLockedMark[] = "locked ";

struct Identity {
  std::string boot_id;  // empty: unknown
  std::string pid_ns;
  int64_t pid = 0;
  int64_t start = -1;
};

Identity self_identity() {
  Identity me;
  me.boot_id = simulated_boot_id().empty() ? first_line("/proc/sys/kernel/random/boot_id") : simulated_boot_id();
  me.pid_ns = link_text("/proc/self/ns/pid");
  me.pid = static_cast<int64_t>(::getpid());
  me.start = start_ticks("self");
  return me;
}

// Whether the writer `id` recorded as `w` certainly no longer runs. What
// /proc shows is no proof: a process of another pid namespace may have its
// pid, and a /proc mounted with hidepid or of another namespace hides it
// (both took a live writer's chunks before). A writer holding its lock
// byte: gone when the kernel says nobody holds it; "cannot tell" is alive.
// A writer of a library before the lock file (no mark): only when the
// machine booted since (another boot id), which /proc tells of no process.
bool certainly_dead(const std::string& store, int64_t id, const Identity& w, const Identity& me) {
  if (w.pid_ns.compare(0, sizeof kLockedMark - 1, kLockedMark) == 0)
    return writer_liveness(store, id) == WriterLiveness::kGone;
  return !me.boot_id.empty() && !w.boot_id.empty() && w.boot_id != me.boot_id;
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string& simulated_boot_id() {
  static std::string id;
  return id;
}

bool SqliteCatalog::can_hold_chunks() {
  return !options_.read_only && sqlite3_get_autocommit(db_.getHandle()) != 0;
}

void SqliteCatalog::begin_chunk_phase(const std::string& what) {
  // A reclaim that took this writer for dead between two turns took its row
  // (it held nothing then): it registers again.
  if (writer_id_ != 0 && !sqlite_context(what, [&] { return registered(); })) {
    writer_id_ = 0;
    writer_lock_.release();
  }
  if (writer_id_ == 0) {
    const Identity me = self_identity();
    writer_id_ = sqlite_context(what + ": recording this writer", [&] {
      SqlTransaction txn(db_, what, SqlTransaction::kWrite, &statements_);
      SQLite::Statement ins(db_,
                            "INSERT INTO writers (boot_id, pid_ns, pid, start_ticks, created_ms) VALUES (?, ?, ?, ?, ?)");
      ins.bind(1, me.boot_id);
      ins.bind(2, me.pid_ns);
      ins.bind(3, me.pid);
      ins.bind(4, me.start);
      ins.bind(5, wall_ms());
      ins.exec();
      const int64_t id = db_.getLastInsertRowid();
      // The lock before the row is visible: a reclaim never sees this
      // writer's row without its lock held. Without the lock (a file system
      // without such locks, an unwritable lock file) the row is unmarked,
      // and no other process takes this writer for dead before a reboot.
      if (writer_lock_.acquire(path_, id)) {
        SQLite::Statement mark(db_, "UPDATE writers SET pid_ns = ? || pid_ns WHERE writer_id = ?");
        mark.bind(1, kLockedMark);
        mark.bind(2, id);
        mark.exec();
      }
      try {
        txn.commit();
      } catch (...) {
        writer_lock_.release();
        throw;
      }
      return id;
    });
  }
  // The chunk transactions need no device flush of their own: the link
  // commits at the store's level, and in WAL mode its flush covers every
  // frame before it. A turn whose link never commits is reclaimed anyway.
  if (options_.synchronous == Synchronous::kFull) {
    sqlite_context(what, [&] { statements_.use("PRAGMA synchronous=NORMAL")->exec(); });
    chunk_phase_relaxed_ = true;
    // The WAL exists while a connection is open, this one too; SQLite locks
    // the -shm file, never the WAL, so closing this descriptor releases none
    // of its locks. When it cannot be opened: no flush ahead, the link's
    // flush does it all.
    wal_fd_ = ::open((path_ + "-wal").c_str(), O_RDONLY | O_CLOEXEC);
  }
  last_opening_ = std::chrono::steady_clock::now();
  seen_data_version_ = data_version();
}

int64_t SqliteCatalog::data_version() noexcept {
  try {
    auto q = statements_.use("PRAGMA data_version");
    return q->executeStep() ? q->getColumn(0).getInt64() : -1;
  } catch (const SQLite::Exception&) {
    return -1;
  }
}

void SqliteCatalog::chunk_committed() noexcept {
  // Starting the device write does not wait for it; a later fdatasync waits
  // only for what is still under way. Every page of the file that is dirty
  // now is the chunks' (or another writer's, written before them).
  if (wal_fd_ >= 0) ::sync_file_range(wal_fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
  // The opening: another writer's busy handler retries every 100 us
  // (wait_when_busy); without a pause, this writer's next BEGIN IMMEDIATE
  // follows its COMMIT within microseconds and takes the lock back. After
  // every chunk while others commit (PRAGMA data_version moved), else now
  // and then. It yields instead of sleeping: on a busy machine a sleeping
  // thread waits for a core when it wakes, which cost a lone writer's large
  // turns a tenth of their speed (docs/benchmarks.md).
  using Clock = std::chrono::steady_clock;
  const int64_t version = data_version();
  const bool others_commit = version != seen_data_version_;
  seen_data_version_ = version;
  const Clock::time_point now = Clock::now();
  if (!others_commit && now - last_opening_ < kOpeningEvery) return;
  while (Clock::now() < now + kWriterOpening) std::this_thread::yield();
  last_opening_ = Clock::now();
}

void SqliteCatalog::end_chunk_phase() noexcept {
  if (wal_fd_ >= 0) {
    // Errors are the link's to report: its own flush covers the same frames.
    ::fdatasync(wal_fd_);
    ::close(wal_fd_);
    wal_fd_ = -1;
  }
  if (!chunk_phase_relaxed_) return;
  chunk_phase_relaxed_ = false;
  sqlite3_exec(db_.getHandle(), "PRAGMA synchronous=FULL", nullptr, nullptr, nullptr);
}

namespace {

Error chunks_taken(const std::string& what) {
  return Error(ErrorCode::kConflict,
               what + ": this turn's chunks were taken while it ran: another process took this writer for dead "
                      "and reclaimed the chunks it held (docs/design.md, \"Objects first\"); nothing of the turn "
                      "was linked, the conversation is as it was; retry the append");
}

}  // namespace

bool SqliteCatalog::registered() {
  auto q = statements_.use("SELECT 1 FROM writers WHERE writer_id = ?");
  q->bind(1, writer_id_);
  const bool found = q->executeStep();
  q->reset();
  return found;
}

void SqliteCatalog::check_held(const std::vector<int64_t>& chunk_ids, const std::vector<ChunkRecord>& records,
                               const std::string& what) {
  // In the link's write transaction: every chunk the turn names is still
  // held by this writer and is the content it stored or found, never a
  // chunk id freed by a reclaim and given to another writer's chunk since.
  const bool intact = sqlite_context(what, [&] {
    auto q = statements_.use(
        "SELECT ch.model_id = ?3 AND ch.hash = ?4 AND EXISTS (SELECT 1 FROM held_chunks h WHERE h.chunk_id = "
        "ch.chunk_id AND h.writer_id = ?2) FROM chunks ch WHERE ch.chunk_id = ?1");
    for (size_t i = 0; i < chunk_ids.size(); ++i) {
      q->bind(1, chunk_ids[i]);
      q->bind(2, writer_id_);
      q->bind(3, records[i].model_id);
      q->bind(4, records[i].key.data(), static_cast<int>(records[i].key.size()));
      const bool ok = q->executeStep() && q->getColumn(0).getInt() == 1;
      q->reset();
      if (!ok) return false;
    }
    return true;
  });
  if (!intact) throw chunks_taken(what);
}

void SqliteCatalog::hold_chunk(int64_t chunk_id) {
  // Mid-turn, in the chunk's write transaction: a writer taken for dead has
  // lost the chunks it held before this one.
  if (!sqlite_named(errors(), [&] { return registered(); })) throw chunks_taken("store " + shown_location(path_));
  auto q = cached("INSERT OR IGNORE INTO held_chunks (chunk_id, writer_id) VALUES (?, ?)");
  q.bind(1, chunk_id);
  q.bind(2, writer_id_);
  q.exec();
}

void SqliteCatalog::index_chunk(int64_t chunk_id, const ChunkRecord& c) {
  auto q = cached(
      "INSERT OR IGNORE INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, "
      "chain_hash, digest) SELECT ?1, ?2, ?3, ?4, ?5, coalesce(length(payload), 0), ?6, ?7 FROM chunks "
      "WHERE chunk_id = ?1");
  q.bind(1, chunk_id);
  q.bind(2, c.model_id);
  q.bind(3, c.precision);
  bind_prev(q, 4, c.index_first == 0 ? nullptr : &c.index_prev, anchor_);
  q.bind(5, c.index_tokens_json);
  q.bind(6, c.chain.data(), static_cast<int>(c.chain.size()));
  q.bind(7, c.digest.data(), static_cast<int>(c.digest.size()));
  q.exec();
}

void SqliteCatalog::release_held(const std::vector<int64_t>& chunk_ids) {
  auto q = cached("DELETE FROM held_chunks WHERE chunk_id = ? AND writer_id = ?");
  for (int64_t id : chunk_ids) {
    q.bind(1, id);
    q.bind(2, writer_id_);
    q.exec();
    q.reset();
  }
}

// In the caller's write transaction: ends the holds of `writer`, then deletes
// the chunks it held that no chunk list names and no other writer holds.
// Returns how many chunks it deleted.
int64_t SqliteCatalog::drop_writer_holds(int64_t writer) {
  std::vector<int64_t> ids;
  {
    SQLite::Statement q(db_, "SELECT chunk_id FROM held_chunks WHERE writer_id = ?");
    q.bind(1, writer);
    while (q.executeStep()) ids.push_back(q.getColumn(0).getInt64());
  }
  SQLite::Statement del(db_, "DELETE FROM held_chunks WHERE writer_id = ?");
  del.bind(1, writer);
  del.exec();
  const int64_t before = db_.getTotalChanges();
  free_unused_chunks(ids);
  return db_.getTotalChanges() - before;
}

void SqliteCatalog::drop_held() noexcept {
  if (writer_id_ == 0) return;
  end_chunk_phase();
  try {
    SqlTransaction txn(db_, "dropping a failed turn's chunks", SqlTransaction::kWrite, &statements_);
    const int64_t deleted = drop_writer_holds(writer_id_);
    txn.commit();
    if (deleted > 0) erase_deleted("dropping a failed turn's chunks");
  } catch (...) {  // best effort: the close, or a reclaim once this process is gone, does it
  }
}

void SqliteCatalog::close_writer() noexcept {
  if (writer_id_ == 0 || options_.read_only) return;
  try {
    SqlTransaction txn(db_, "closing", SqlTransaction::kWrite, &statements_);
    const int64_t deleted = drop_writer_holds(writer_id_);
    SQLite::Statement del(db_, "DELETE FROM writers WHERE writer_id = ?");
    del.bind(1, writer_id_);
    del.exec();
    // The last writer goes: the lock file goes too, under the write lock,
    // which every writer holds while it takes its byte and every reclaim
    // while it decides, so no live writer's lock is in the file removed.
    if (db_.execAndGet("SELECT count(*) FROM writers").getInt64() == 0 && writer_lock_.held())
      ::unlink(writer_lock_file(path_).c_str());
    txn.commit();
    writer_id_ = 0;
    writer_lock_.release();
    if (deleted > 0) erase_pending_ = true;  // erased by the destructor, which calls this first
  } catch (...) {  // its rows stay for a reclaim once this process is gone
  }
}

bool SqliteCatalog::reclaim_dead_writers(const std::string& what) {
  auto dead_writers = [&] {
    std::vector<int64_t> dead;
    const Identity me = self_identity();
    SQLite::Statement q(db_, "SELECT writer_id, boot_id, pid_ns, pid, start_ticks FROM writers");
    while (q.executeStep()) {
      const int64_t id = q.getColumn(0).getInt64();
      const Identity who{q.getColumn(1).getString(), q.getColumn(2).getString(), q.getColumn(3).getInt64(),
                         q.getColumn(4).getInt64()};
      if (id != writer_id_ && certainly_dead(path_, id, who, me)) dead.push_back(id);
    }
    return dead;
  };
  // Read first, without the write lock: nearly always nothing to do.
  if (sqlite_context(what, dead_writers).empty()) return false;
  const int64_t deleted = sqlite_context(what + ": reclaiming the chunks of writers that died mid-turn", [&] {
    SqlTransaction txn(db_, what, SqlTransaction::kWrite, &statements_);
    int64_t n = 0;
    for (int64_t w : dead_writers()) {
      n += drop_writer_holds(w);
      SQLite::Statement del(db_, "DELETE FROM writers WHERE writer_id = ?");
      del.bind(1, w);
      del.exec();
    }
    txn.commit();
    return n;
  });
  if (deleted > 0) {
    if (busy_.counters) StoreCounters::add(busy_.counters->reclaimed_held_chunks, static_cast<uint64_t>(deleted));
    erase_deleted(what);
  }
  return deleted > 0;
}

void SqliteCatalog::free_queued_chunks() {
  if (!options_.read_only) reclaim_dead_writers("store " + shown_location(path_));
}

}  // namespace detail
}  // namespace colikv
