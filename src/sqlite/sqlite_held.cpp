// Objects first on SQLite (catalog.h, "Objects first"; docs/design.md): the
// chunks a writer stored or found before its link, held in held_chunks under
// its writers row, and the reclaim of those of writers certainly dead.
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
#include "metrics.h"
#include "store_location.h"

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
// boot; -1 when there is no such process (or no /proc). The command name
// (field 2) may hold spaces and parentheses: the fields after it are counted
// from the last ')'.
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

struct Identity {
  std::string boot_id;  // empty: unknown (no /proc): then no writer is ever certainly dead
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

// Whether the writer recorded as `w` certainly no longer runs, as seen from
// this process: the machine booted since (another boot id), or, in our own
// pid namespace, no process has its pid with its start time. A writer of
// another pid namespace may run still: never certainly dead (until a boot).
bool certainly_dead(const Identity& w, const Identity& me) {
  if (me.boot_id.empty() || w.boot_id.empty()) return false;
  if (w.boot_id != me.boot_id) return true;
  if (me.pid_ns.empty() || w.pid_ns != me.pid_ns) return false;
  if (w.pid == me.pid) return w.start != me.start;  // this process is alive: its own rows are live
  return start_ticks(std::to_string(w.pid)) != w.start;
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
      txn.commit();
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

void SqliteCatalog::hold_chunk(int64_t chunk_id) try {
  auto q = statements_.use("INSERT OR IGNORE INTO held_chunks (chunk_id, writer_id) VALUES (?, ?)");
  q->bind(1, chunk_id);
  q->bind(2, writer_id_);
  q->exec();
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

void SqliteCatalog::index_chunk(int64_t chunk_id, const ChunkRecord& c) try {
  auto q = statements_.use(
      "INSERT OR IGNORE INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes, "
      "chain_hash, digest) SELECT ?1, ?2, ?3, ?4, ?5, coalesce(length(payload), 0), ?6, ?7 FROM chunks "
      "WHERE chunk_id = ?1");
  q->bind(1, chunk_id);
  q->bind(2, c.model_id);
  q->bind(3, c.precision);
  bind_prev(*q, 4, c.index_first == 0 ? nullptr : &c.index_prev, anchor_);
  q->bind(5, c.index_tokens_json);
  q->bind(6, c.chain.data(), static_cast<int>(c.chain.size()));
  q->bind(7, c.digest.data(), static_cast<int>(c.digest.size()));
  q->exec();
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

void SqliteCatalog::release_held(const std::vector<int64_t>& chunk_ids) try {
  auto q = statements_.use("DELETE FROM held_chunks WHERE chunk_id = ? AND writer_id = ?");
  for (int64_t id : chunk_ids) {
    q->bind(1, id);
    q->bind(2, writer_id_);
    q->exec();
    q->reset();
  }
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
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
    txn.commit();
    writer_id_ = 0;
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
      if (id != writer_id_ && certainly_dead(who, me)) dead.push_back(id);
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
    if (StoreCounters* counters = current_counters())
      StoreCounters::add(counters->reclaimed_held_chunks, static_cast<uint64_t>(deleted));
    erase_deleted(what);
  }
  return deleted > 0;
}

void SqliteCatalog::free_queued_chunks() {
  if (!options_.read_only) reclaim_dead_writers("store " + shown_location(path_));
}

std::vector<int64_t> SqliteCatalog::claim_chunks(const std::vector<int64_t>& chunk_ids) try {
  // A chunk a writer holds is about to be linked: an eviction keeps it.
  auto q = statements_.use("SELECT 1 FROM held_chunks WHERE chunk_id = ? LIMIT 1");
  std::vector<int64_t> out;
  for (int64_t id : chunk_ids) {
    q->bind(1, id);
    const bool held = q->executeStep();
    q->reset();
    if (!held) out.push_back(id);
  }
  return out;
} catch (const SQLite::Exception& e) {
  throw sqlite_error(e);
}

}  // namespace detail
}  // namespace colikv
