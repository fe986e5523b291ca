// This host's wall clock, as the rows' timestamps are written by it, and the
// tests' way to set it off as another host's may be.
#ifndef COLIKV_SRC_CORE_WALL_CLOCK_H
#define COLIKV_SRC_CORE_WALL_CLOCK_H

#include <atomic>
#include <cstdint>

namespace colikv {
namespace detail {

// Milliseconds since the epoch: the rows' timestamps (store_impl.cpp).
int64_t now_ms();
// Added to now_ms(): tests make this process a host whose clock is off.
// Trivially destructible, so a Store closed at exit may still read it.
std::atomic<int64_t>& wall_clock_skew_ms();

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_WALL_CLOCK_H
