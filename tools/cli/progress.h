// Progress of a long command on stderr, updated in place.
#ifndef COLIKV_TOOLS_CLI_PROGRESS_H
#define COLIKV_TOOLS_CLI_PROGRESS_H

#include <chrono>
#include <cstdint>
#include <string>

#include "colikv/store.h"

namespace colikv_cli {

// --progress (kOn), --quiet (kOff), or neither (kAuto).
enum class ProgressMode { kAuto, kOn, kOff };

class Progress {
 public:
  // total_bytes: the bytes that 100% stands for; enabled when forced, or in
  // auto mode when stderr is a terminal and total_bytes is large.
  Progress(std::string label, int64_t total_bytes, ProgressMode mode);
  // A step counted in its own unit ("conversations", "bytes"): the line shows
  // update's done/total in it; total_bytes only decides whether auto mode shows it.
  Progress(std::string label, int64_t total_bytes, ProgressMode mode, std::string unit);
  ~Progress() { end(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // done and total in tokens (or any unit), as ProgressFn reports them.
  void update(int64_t done, int64_t total);

  // What to hand the library: empty when progress is not shown.
  colikv::ProgressFn fn();

  // Ends the progress line (a newline after it) if one was shown.
  void end();

 private:
  using Clock = std::chrono::steady_clock;
  std::string line(double fraction, Clock::time_point now) const;

  std::string label_;
  std::string unit_;  // empty: the line shows MB of total_bytes
  int64_t done_ = 0, total_ = 0;
  int64_t total_bytes_;
  bool enabled_ = false;
  bool shown_ = false;
  size_t width_ = 0;
  Clock::time_point start_;
  Clock::time_point last_;
};

}  // namespace colikv_cli

#endif  // COLIKV_TOOLS_CLI_PROGRESS_H
