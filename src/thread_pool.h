// A fixed set of worker threads for chunk encoding and decoding, and an
// ordered window over it: results are consumed in submission order while at
// most `window` jobs are in flight, which bounds memory whatever the length.
#ifndef COLIKV_SRC_THREAD_POOL_H
#define COLIKV_SRC_THREAD_POOL_H

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
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
// and consume(i, result) on the calling thread in order of i. If anything
// throws, waits for the jobs in flight (they may point into the caller's
// buffers) and rethrows the first error.
template <class R>
void ordered_map(ThreadPool& pool, size_t n, size_t window, const std::function<R(size_t)>& produce,
                 const std::function<void(size_t, R&)>& consume) {
  if (window == 0) window = 1;
  std::deque<std::pair<size_t, std::future<R>>> inflight;
  struct Drain {
    std::deque<std::pair<size_t, std::future<R>>>& q;
    ~Drain() {
      for (auto& f : q)
        if (f.second.valid()) f.second.wait();
    }
  } drain{inflight};
  size_t next = 0;
  while (next < n || !inflight.empty()) {
    while (next < n && inflight.size() < window) {
      size_t i = next++;
      inflight.emplace_back(i, pool.submit([&produce, i] { return produce(i); }));
    }
    R r = inflight.front().second.get();
    size_t i = inflight.front().first;
    inflight.pop_front();
    consume(i, r);
  }
}

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_THREAD_POOL_H
