// The background WAL checkpointer (see sqlite_checkpointer.h).
#include "sqlite/sqlite_checkpointer.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/path.h"
#include "sqlite/sqlite_util.h"

namespace colikv {
namespace detail {

int64_t wal_checkpoint_bytes_for(int64_t configured, int64_t free_bytes) {
  if (free_bytes < 0) return configured;
  return std::min(configured, std::max<int64_t>(free_bytes / 16, int64_t{64} << 10));
}

int64_t free_bytes_beside(const std::string& file) {
  struct statvfs vfs;
  if (::statvfs(directory_of(file).c_str(), &vfs) != 0) return -1;
  return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
}

int truncate_wal_without_waiting(sqlite3* db, BusyWait& busy) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min(busy.timeout_ms, 1000));
  wait_when_busy(db, nullptr);
  int rc = SQLITE_OK;
  for (;;) {
    int log = -1, done = -1;
    rc = sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_TRUNCATE, &log, &done);
    if (rc != SQLITE_BUSY) break;
    // A frame a reader's snapshot needs, or the write lock taken. PASSIVE copies what no snapshot needs.
    rc = sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) break;
    if (log >= 0 && done == log) {
      rc = SQLITE_OK;  // the database file is cut; only the WAL's own file stays as large
      break;
    }
    rc = SQLITE_BUSY;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  wait_when_busy(db, &busy);
  return rc;
}

Checkpointer::Checkpointer(sqlite3* main, std::string path, int soft_pages)
    : main_(main), path_(std::move(path)), soft_pages_(std::max(soft_pages, 1)), hard_pages_(4 * soft_pages_) {
  thread_ = std::thread([this] { run(); });
  sqlite3_wal_hook(main_, &Checkpointer::on_commit, this);
}

Checkpointer::~Checkpointer() {
  sqlite3_wal_hook(main_, nullptr, nullptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (db_) sqlite3_close(db_);
}

void Checkpointer::wait_before_write() {
  if (wal_pages_.load() < soft_pages_ || failed_) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return write_may_begin(); });
}

void Checkpointer::wait_briefly_before_write(std::chrono::milliseconds at_most) {
  if (wal_pages_.load() < soft_pages_ || failed_) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (write_may_begin()) return;
  const uint64_t now_running = busy_ ? started_ : started_ + 1;  // a pending one gets the next number
  if (briefly_waited_for_ == now_running) return;
  briefly_waited_for_ = now_running;
  cv_.wait_for(lock, at_most, [this] { return write_may_begin(); });
}

int Checkpointer::on_commit(void* arg, sqlite3* h, const char* name, int pages) {
  auto* self = static_cast<Checkpointer*>(arg);
  self->wal_pages_ = pages;
  if (pages >= self->hard_pages_ || (pages >= self->soft_pages_ && self->failed_)) {
    std::unique_lock<std::mutex> lock(self->mu_);
    self->cv_.wait(lock, [self] { return !self->busy_; });
    lock.unlock();
    sqlite3_wal_checkpoint_v2(h, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  } else if (pages >= self->soft_pages_) {
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->pending_ = true;
    }
    self->cv_.notify_all();
  }
  return SQLITE_OK;
}

void Checkpointer::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || pending_; });
    if (stop_) return;
    pending_ = false;
    busy_ = true;
    ++started_;
    lock.unlock();
    if (!db_ && !failed_) {
      if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
        sqlite3_close(db_);
        db_ = nullptr;
        failed_ = true;  // the committing thread checkpoints inline from now on
      } else if (sqlite3_exec(db_, "PRAGMA secure_delete=ON; SELECT count(*) FROM sqlite_schema", nullptr, nullptr,
                              nullptr) != SQLITE_OK) {
        // secure_delete as on every connection of a store (open_store.cpp).
        // A connection learns that the file is in WAL mode from its first
        // read; until then sqlite3_wal_checkpoint_v2 does nothing and says
        // SQLITE_OK. Not readable now (busy): try again next time.
        sqlite3_close(db_);
        db_ = nullptr;
      }
    }
    // Errors (busy, I/O) leave the frames in the WAL, where they are safe;
    // the next commit past soft_pages_ tries again.
    if (db_) sqlite3_wal_checkpoint_v2(db_, "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace detail
}  // namespace colikv
