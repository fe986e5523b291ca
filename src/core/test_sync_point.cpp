// The callbacks of the test sync points (test_sync_point.h). Compiled only
// into a build with COLIKV_TEST_SYNC_POINTS.
#include "core/test_sync_point.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

namespace colikv {
namespace detail {

namespace {

struct Point {
  SyncPointFn fn;
  int running = 0;  // calls of fn in progress
};

// Never destroyed: a Store closed from an atexit handler may pass a point.
struct Registry {
  std::mutex mu;
  std::condition_variable finished;
  std::map<std::string, std::shared_ptr<Point>> points;
  std::atomic<size_t> count{0};  // points set: none, and a point costs one load
};
Registry& registry() {
  static Registry& r = *new Registry();
  return r;
}

}  // namespace

void run_test_sync_point(const char* name, const void* arg) {
  Registry& r = registry();
  if (r.count.load(std::memory_order_acquire) == 0) return;
  std::shared_ptr<Point> p;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    const auto it = r.points.find(name);
    if (it == r.points.end()) return;
    p = it->second;
    ++p->running;
  }
  struct Finish {
    Registry& r;
    Point& p;
    ~Finish() {
      std::lock_guard<std::mutex> lock(r.mu);
      --p.running;
      r.finished.notify_all();
    }
  } finish{r, *p};
  p->fn(arg);  // may throw, into the library's code as an error there would
}

void set_test_sync_point(const std::string& name, SyncPointFn fn) {
  Registry& r = registry();
  std::unique_lock<std::mutex> lock(r.mu);
  if (fn) {
    auto p = std::make_shared<Point>();
    p->fn = std::move(fn);
    r.points[name] = std::move(p);  // one in progress keeps its own callback
  } else {
    const auto it = r.points.find(name);
    if (it == r.points.end()) return;
    const std::shared_ptr<Point> p = it->second;
    r.points.erase(it);
    r.finished.wait(lock, [&] { return p->running == 0; });
  }
  r.count.store(r.points.size(), std::memory_order_release);
}

bool test_sync_point_set(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.points.count(name) != 0;
}

}  // namespace detail
}  // namespace colikv
