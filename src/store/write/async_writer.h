// Store::append_async and Store::wait: a background writer per Store that
// commits queued turns in order, per conversation, while the engine keeps
// generating. The engine's thread only validates the turn and copies its new
// rows into a staging buffer; encoding and the SQLite transaction happen here.
#ifndef COLIKV_SRC_ASYNC_WRITER_H
#define COLIKV_SRC_ASYNC_WRITER_H

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "colikv/store.h"
#include "core/thread_pool.h"
#include "core/thread_annotations.h"

namespace colikv {
namespace detail {

// Raw float memory for staged rows, allocated once and recycled: a fresh
// allocation would page-fault on every byte the engine's thread copies.
class StagingBuffer {
 public:
  StagingBuffer() = default;
  // Faulted in before it returns. between_pages(bytes faulted so far), when
  // given, is called after each huge page; once it returns false the buffer
  // gives up and is empty.
  using Progress = std::function<bool(size_t faulted)>;
  explicit StagingBuffer(size_t floats, const Progress& between_pages = nullptr);
  size_t capacity() const { return capacity_; }
  float* data() const { return data_.get(); }
  size_t bytes() const { return capacity_ * sizeof(float); }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> data_;
  size_t capacity_ = 0;
};

// One queued turn: positions [from, len) of a conversation, its rows staged
// plane after plane (packed_planes layout).
struct QueuedAppend {
  std::string id;
  ModelSignature model;
  std::vector<int32_t> tokens;  // all len token ids
  int64_t from = 0;             // the committed count it expects to extend
  int64_t len = 0;
  // Rows are staged from here: the start of the chunk `from` falls in, or of
  // the first chunk whose stored values were evicted when that is earlier, so
  // that the writer saves evicted values again from the engine's rows, as a
  // synchronous append does. (Chunks evicted after the turn was queued stay
  // evicted; the next turn saves them.)
  int64_t staged_from = 0;
  StagingBuffer rows;
  int64_t bytes = 0;  // staged bytes counted against the bound
  std::chrono::steady_clock::time_point queued_at;  // when enqueue queued it: the time until durable

  // The staged rows as the engine's buffers of positions [staged_from, len) (row r is position staged_from + r).
  struct Source {
    std::vector<const float*> lc, rc, ic;
    KvSource kv;
  };
  Source source() const;
};

// What a conversation holds once its queued appends are committed, as far as
// this Store knows: what append_async validates a new turn against.
struct ExpectedState {
  bool exists = false;
  ModelSignature model;
  std::vector<int32_t> tokens;
  int64_t chunk_tokens = 0;  // the conversation's chunk size (a new one's: its model's in this store)
  // The first position of the first stored chunk whose values were evicted;
  // -1 when none was (or a queued turn re-saves them).
  int64_t evicted_from = -1;
};

class AsyncWriter {
 public:
  // commit(job) runs on the writer thread and throws colikv::Error on failure.
  // read_state(id, model) reads what is stored of id, to be extended with
  // model's rows (on the caller's thread). reserve_bytes: the staging buffer
  // prepare() has the writer thread fault in (whole huge pages, within max_bytes).
  using CommitFn = std::function<void(const QueuedAppend&)>;
  using ReadStateFn = std::function<ExpectedState(const std::string& id, const ModelSignature& model)>;
  AsyncWriter(int64_t max_bytes, int64_t reserve_bytes, ThreadPool& pool, CommitFn commit, ReadStateFn read_state);
  // Commits everything still queued, then stops the thread.
  ~AsyncWriter();
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  // Starts a thread that allocates and faults in the reserved staging buffer
  // as a spare one, so that the next turn's copy does not page-fault on the
  // caller's thread; once per writer, returns at once. Not the writer thread:
  // turns queued meanwhile are committed meanwhile.
  void prepare();

  // Validates the turn against what is stored or queued (throws without
  // queueing), copies positions [committed, len) out of kv, and queues them.
  // Blocks while the queued bytes would exceed the bound (unless the queue is empty).
  // Returns the turns queued or committing, this one included (0: nothing to queue).
  size_t enqueue(const std::string& id, const ModelSignature& model, const int32_t* tokens, int64_t len,
               const KvSource& kv, const std::string& where);

  // Waits until id's queued appends (all of them when id is null) are
  // committed or dropped, then throws the first error one of them met since
  // the last wait, clearing it.
  void wait(const std::string* id);
  // Waits like wait() without reporting errors: other Store calls read their
  // writes. Forgets what it knew of the conversation(s), which the call may change.
  void drain(const std::string* id);

  // Test hooks: while paused the writer thread takes no new job; how many
  // calls are blocked in enqueue (on the bound) and in wait or drain.
  void pause(bool paused);
  int64_t queued_bytes() const;
  size_t queued_jobs() const;
  int blocked_enqueues() const;
  int blocked_waits() const;
  size_t spare_buffers() const;
  // Waits until the buffer prepare() reserves is in place (or
  // dropped), then names the spare buffers' memory and their sizes in bytes.
  std::vector<std::pair<const float*, size_t>> spare_memory();
  // While held, the reservation stops after its next huge page (a slow one);
  // reserve_stopped() says it is stopped there.
  void hold_reserve(bool held);
  bool reserve_stopped() const { return reserve_stopped_; }
  // The staging memory of id's first turn still queued (null when none).
  const float* queued_rows_of(const std::string& id) const;

 private:
  struct Conversation {
    size_t pending = 0;           // being copied, queued or being committed
    bool copying = false;         // an enqueue is under way (claim): the next one of this conversation waits
    std::optional<Error> error;   // the first failure since the last wait
    uint64_t error_order = 0;     // when it failed, to report the earliest of several conversations
    std::optional<ExpectedState> expected;  // unknown until read or queued
  };

  Conversation& claim(const std::string& id, const ModelSignature& model) REQUIRES(mu_);
  int64_t validate(const ExpectedState& expected, const ModelSignature& model, const int32_t* tokens, int64_t len,
                   const std::string& where) const;
  ExpectedState& expected_for(const std::string& id, const ModelSignature& model) REQUIRES(mu_);
  void reserve(int64_t bytes) REQUIRES(mu_);
  StagingBuffer take_buffer(size_t floats) REQUIRES(mu_);
  void copy_rows(const ModelSignature& m, const KvSource& kv, int64_t from, int64_t n, float* dst);
  void start_thread() REQUIRES(mu_);
  void reserve_spare();
  void run();
  void finish(QueuedAppend& job, const std::optional<Error>& error) REQUIRES(mu_);
  bool idle(const std::string* id) const REQUIRES(mu_);
  void wait_idle(const std::string* id) REQUIRES(mu_);

  const int64_t max_bytes_;
  const size_t reserve_floats_;  // of the buffer the writer thread faults in first
  ThreadPool& pool_;
  const CommitFn commit_;
  const ReadStateFn read_state_;

  mutable Mutex mu_;
  // Waits on mu_ itself (a condition_variable_any): the analysis then sees
  // the lock the waits let go and take again.
  std::condition_variable_any changed_;  // a job finished, space freed, a job was queued, pause changed
  std::deque<QueuedAppend> queue_ GUARDED_BY(mu_);
  bool busy_ GUARDED_BY(mu_) = false;  // the writer thread is committing a job taken off queue_
  int64_t queued_bytes_ GUARDED_BY(mu_) = 0;  // of queue_ and the job being committed
  std::map<std::string, Conversation> conversations_ GUARDED_BY(mu_);
  std::vector<StagingBuffer> spare_ GUARDED_BY(mu_);  // recycled, already faulted in
  bool paused_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool prepared_ GUARDED_BY(mu_) = false;   // prepare() was called
  bool reserving_ GUARDED_BY(mu_) = false;  // the reserving thread is faulting in the reserved buffer
  std::atomic<size_t> reserve_faulted_{0};   // bytes of it faulted in so far
  std::atomic<bool> cancel_reserve_{false};  // closing: the reservation stops between huge pages
  std::atomic<bool> reserve_held_{false};    // hold_reserve
  std::atomic<bool> reserve_stopped_{false};
  int blocked_enqueues_ GUARDED_BY(mu_) = 0, blocked_waits_ GUARDED_BY(mu_) = 0;
  uint64_t failures_ GUARDED_BY(mu_) = 0;  // failed commits so far, numbering Conversation::error_order
  std::thread thread_;    // the writer: started by the first enqueue
  std::thread reserver_;  // faults in the reserved buffer: started by prepare()
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_ASYNC_WRITER_H
