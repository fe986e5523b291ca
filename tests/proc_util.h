// Child processes for the crash and concurrency tests: spawn with pipes,
// read lines, kill, reap. Test-only, POSIX.
#ifndef COLIKV_TESTS_PROC_UTIL_H
#define COLIKV_TESTS_PROC_UTIL_H

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace colikv_test {

class ChildProcess {
 public:
  // Starts argv[0] with stdout (and, with pipe_stdin, stdin) on pipes;
  // stderr goes to stderr_path ("" = inherited).
  ChildProcess(const std::vector<std::string>& argv, bool pipe_stdin = false,
               const std::string& stderr_path = "") {
    int out[2], in[2] = {-1, -1};
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    if (pipe_stdin && ::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      if (pipe_stdin) ::dup2(in[0], 0);
      if (!stderr_path.empty()) {
        int e = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (e >= 0) ::dup2(e, 2);
      }
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = out[0];
    if (pipe_stdin) {
      ::close(in[0]);
      in_ = in[1];
    }
  }
  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    close_stdin();
    if (out_ >= 0) ::close(out_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  void write_stdin(const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
      ssize_t w = ::write(in_, s.data() + done, s.size() - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error("write to child failed");
      }
      done += static_cast<size_t>(w);
    }
  }
  void close_stdin() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }

  // Reads one line from stdout (without the newline); false at end of file.
  bool read_line(std::string& line) {
    line.clear();
    for (;;) {
      if (take_line(line)) return true;
      if (!fill()) {
        line = buf_;
        buf_.clear();
        return !line.empty();
      }
    }
  }
  // As read_line, waiting at most timeout_ms (0: only what has arrived), so
  // that a test can follow several children at once.
  enum class Read { kLine, kNone, kEnd };
  Read read_line_within(std::string& line, int timeout_ms) {
    line.clear();
    for (;;) {
      if (take_line(line)) return Read::kLine;
      pollfd p{out_, POLLIN, 0};
      int r = ::poll(&p, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return Read::kNone;
      if (!fill()) {
        line.swap(buf_);
        return line.empty() ? Read::kEnd : Read::kLine;
      }
      timeout_ms = 0;  // data came: take what is there, wait no longer
    }
  }
  // Everything left on stdout up to end of file.
  std::string read_rest() {
    while (fill()) {
    }
    std::string r;
    r.swap(buf_);
    return r;
  }

  void kill_now() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
  }
  // Waits for the child; returns its wait status.
  int wait() {
    int status = 0;
    if (pid_ > 0) {
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      pid_ = -1;
      status_ = status;
    }
    return status_;
  }

 private:
  // Moves a whole line already read out of the buffer into line; false when none is there yet.
  bool take_line(std::string& line) {
    const size_t nl = buf_.find('\n');
    if (nl == std::string::npos) return false;
    line = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    return true;
  }
  bool fill() {
    char tmp[4096];
    for (;;) {
      ssize_t r = ::read(out_, tmp, sizeof tmp);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      buf_.append(tmp, static_cast<size_t>(r));
      return true;
    }
  }
  pid_t pid_ = -1;
  int out_ = -1;
  int in_ = -1;
  int status_ = 0;
  std::string buf_;
};

inline bool long_tests() {
  const char* v = std::getenv("COLIKV_LONG_TESTS");
  return v && *v && std::string(v) != "0";
}

}  // namespace colikv_test

#endif  // COLIKV_TESTS_PROC_UTIL_H
