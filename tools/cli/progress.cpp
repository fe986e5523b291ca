#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace colikv_cli {
namespace {

// Files (or stores) above this size show progress on a terminal by default.
constexpr int64_t kProgressThresholdBytes = int64_t{64} << 20;

}  // namespace

Progress::Progress(std::string label, int64_t total_bytes, ProgressMode mode)
    : label_(std::move(label)), total_bytes_(total_bytes), start_(Clock::now()) {
  enabled_ = mode == ProgressMode::kOn ||
             (mode == ProgressMode::kAuto && isatty(STDERR_FILENO) && total_bytes > kProgressThresholdBytes);
}

Progress::Progress(std::string label, int64_t total_bytes, ProgressMode mode, std::string unit)
    : Progress(std::move(label), total_bytes, mode) {
  unit_ = std::move(unit);
}

void Progress::update(int64_t done, int64_t total) {
  if (!enabled_) return;
  done_ = done;
  total_ = total;
  auto now = Clock::now();
  bool final_update = total > 0 && done >= total;
  if (shown_ && !final_update && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  double fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0.0;
  std::string text = line(std::min(1.0, std::max(0.0, fraction)), now);
  // Padded to the longest line shown, so that none leaves characters behind.
  size_t visible = text.size() - 1;
  if (visible < width_) text.append(width_ - visible, ' ');
  width_ = std::max(width_, visible);
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  shown_ = true;
}

// "\rLABEL:  42.0%  1.0/2.0 MB  3.0 MB/s"
std::string Progress::line(double fraction, Clock::time_point now) const {
  if (!unit_.empty()) {
    // "\rgc: evicting:  42.0%  1200/3000 bytes"
    char buf[256];
    int n = std::snprintf(buf, sizeof buf, "\r%s: %5.1f%%  %lld/%lld %s", label_.c_str(), fraction * 100.0,
                          static_cast<long long>(done_), static_cast<long long>(total_), unit_.c_str());
    return std::string(buf, static_cast<size_t>(std::max(0, std::min(n, static_cast<int>(sizeof buf) - 1))));
  }
  double mb_done = fraction * static_cast<double>(total_bytes_) / 1e6;
  double secs = std::chrono::duration<double>(now - start_).count();
  double rate = secs > 0 ? mb_done / secs : 0.0;
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, "\r%s: %5.1f%%  %.1f/%.1f MB  %.1f MB/s", label_.c_str(), fraction * 100.0,
                        mb_done, static_cast<double>(total_bytes_) / 1e6, rate);
  return std::string(buf, static_cast<size_t>(std::max(0, std::min(n, static_cast<int>(sizeof buf) - 1))));
}

colikv::ProgressFn Progress::fn() {
  if (!enabled_) return colikv::ProgressFn();
  return [this](int64_t done, int64_t total) { update(done, total); };
}

void Progress::end() {
  if (shown_) {
    std::fputc('\n', stderr);
    std::fflush(stderr);
    shown_ = false;
  }
}

}  // namespace colikv_cli
