// A fixed set of worker threads for chunk encoding and decoding, and an
// ordered window over it: results are consumed in submission order while at
// most `window` jobs are in flight, which bounds memory whatever the length.
#ifndef COLIKV_SRC_CORE_THREAD_POOL_H
#define COLIKV_SRC_CORE_THREAD_POOL_H

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace colikv {
namespace detail {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads <= 0: one per hardware core
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size(); }

  template <class F>
  auto submit(F&& f) -> std::future<decltype(f())> {
    using R = decltype(f());
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(f));
    std::future<R> result = task->get_future();
    enqueue([task] { (*task)(); });
    return result;
  }

 private:
  void enqueue(std::function<void()> job);
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Runs produce(i) for i in [0, n) on the pool, at most `window` at a time,
// starting at construction; next() hands the results back on the calling
// thread in order of i, each as soon as it is ready. The caller can thus let
// jobs run ahead while it does something else (take a lock, write the
// previous result). An exception thrown by produce(i) is rethrown by the
// next() that returns i. The destructor waits for the jobs in flight (they may
// point into the caller's buffers).
//
// kInline runs every produce(i) at construction on the calling thread
// instead (an exception still comes out of the next() that returns i): for
// work of a few kilobytes, or one job alone, handing it to a worker and
// waiting for it costs more than doing it.
template <class R>
class OrderedJobs {
 public:
  enum class Run { kOnPool, kInline };
  OrderedJobs(ThreadPool& pool, size_t n, size_t window, std::function<R(size_t)> produce, Run run = Run::kOnPool)
      : pool_(pool), n_(n), window_(window == 0 ? 1 : window), produce_(std::move(produce)),
        inline_(run == Run::kInline) {
    refill();
  }
  ~OrderedJobs() {
    for (auto& f : inflight_)
      if (f.valid()) f.wait();
  }
  OrderedJobs(const OrderedJobs&) = delete;
  OrderedJobs& operator=(const OrderedJobs&) = delete;

  bool done() const { return taken_ == n_; }
  // Requires !done(). Waits for result i (i = 0, 1, ... on successive calls).
  size_t next(R& out) {
    if (inline_) {
      Produced p = std::move(produced_.front());
      produced_.pop_front();
      if (p.error) std::rethrow_exception(p.error);
      out = std::move(*p.value);
      return taken_++;
    }
    std::future<R> f = std::move(inflight_.front());
    inflight_.pop_front();
    const size_t i = taken_++;
    try {
      refill();  // keep the window full while this result is consumed
    } catch (...) {
      f.wait();  // job i uses produce_: it must end before this object can
      throw;
    }
    out = f.get();
    return i;
  }

 private:
  void refill() {
    // Inline results are kept as they are, not in a std::promise: setting one
    // costs a futex wake (call_once) per job, and no thread waits on them.
    while (inline_ && submitted_ < n_) {
      Produced p;
      try {
        p.value.emplace(produce_(submitted_));
      } catch (...) {
        p.error = std::current_exception();
      }
      ++submitted_;
      produced_.push_back(std::move(p));
    }
    while (submitted_ < n_ && inflight_.size() < window_) {
      const size_t i = submitted_++;
      inflight_.push_back(pool_.submit([this, i] { return produce_(i); }));
    }
  }

  ThreadPool& pool_;
  const size_t n_, window_;
  const std::function<R(size_t)> produce_;
  const bool inline_;
  struct Produced {  // an inline job's result or what it threw
    std::optional<R> value;
    std::exception_ptr error;
  };
  std::deque<std::future<R>> inflight_;
  std::deque<Produced> produced_;
  size_t submitted_ = 0, taken_ = 0;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_THREAD_POOL_H
