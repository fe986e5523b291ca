// A file descriptor closed on scope exit.
#ifndef COLIKV_SRC_CORE_FD_H
#define COLIKV_SRC_CORE_FD_H

#include <unistd.h>

namespace colikv {
namespace detail {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_FD_H
