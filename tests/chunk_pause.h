// A test holds an append at one of its chunks: the append of conversation
// `id` stops at the sync point "append:chunk" after its chunk list entry `seq` (the
// first time it gets there) until released. Without objects first that is
// inside the turn's write transaction, its chunks so far stored, nothing
// committed; objects first, after that chunk's own transaction committed,
// the chunk held, nothing linked. Installed for the object's lifetime.
#ifndef COLIKV_TESTS_CHUNK_PAUSE_H
#define COLIKV_TESTS_CHUNK_PAUSE_H

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include "append_hook.h"

namespace colikv_test {

class ChunkPause {
 public:
  ChunkPause(std::string id, int64_t seq)
      : id_(std::move(id)), seq_(seq), hook_([this](const std::string& conv, int64_t at) {
          if (conv != id_ || at != seq_) return;
          std::unique_lock<std::mutex> lock(mu_);
          if (reached_) return;  // only the first turn
          reached_ = true;
          cv_.notify_all();
          cv_.wait(lock, [&] { return released_; });
        }) {}
  ~ChunkPause() { release(); }  // then hook_, the last member, is cleared first
  ChunkPause(const ChunkPause&) = delete;
  ChunkPause& operator=(const ChunkPause&) = delete;
  // Returns once the append has stopped there.
  void wait_reached() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return reached_; });
  }
  // Lets it go on.
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::string id_;
  int64_t seq_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool reached_ = false, released_ = false;
  AppendHook hook_;  // last: set once the members it uses exist, cleared before they go
};

}  // namespace colikv_test

#endif  // COLIKV_TESTS_CHUNK_PAUSE_H
