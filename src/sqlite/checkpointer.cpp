// The background WAL checkpointer (see checkpointer.h).
#include "sqlite/checkpointer.h"

#include <algorithm>
#include <utility>

namespace colikv {
namespace detail {

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
  cv_.wait(lock, [this] { return stop_ || (!pending_ && !busy_); });
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
