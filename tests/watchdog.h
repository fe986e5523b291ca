// Ends the test process, failed, when the test has not called done() within
// `limit`: threads stuck on each other's locks cannot be joined, and a
// hanging test would only be stopped by CTest's timeout, without saying why.
#ifndef COLIKV_TESTS_WATCHDOG_H
#define COLIKV_TESTS_WATCHDOG_H

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace colikv_test {

class Watchdog {
 public:
  Watchdog(std::chrono::seconds limit, std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this, limit] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, limit, [&] { return done_; })) {
        std::fprintf(stderr, "watchdog: %s did not finish within %lld s (a deadlock?)\n", what_.c_str(),
                     static_cast<long long>(limit.count()));
        std::fflush(stderr);
        std::_Exit(1);
      }
    });
  }
  void done() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
  }
  ~Watchdog() {
    done();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace colikv_test

#endif  // COLIKV_TESTS_WATCHDOG_H
