// Sync points for tests, as RocksDB's TEST_SYNC_POINT: a named place in the
// library's code where a test may run a callback of its own (hold a turn
// open mid-way, stop a server, throw). They compile to nothing unless the
// build defines COLIKV_TEST_SYNC_POINTS (CMake's option of that name, on
// when the tests are built, off for an installed library or the wheel).
// Not installed.
#ifndef COLIKV_SRC_TEST_SYNC_POINT_H
#define COLIKV_SRC_TEST_SYNC_POINT_H

#include <cstdint>
#include <string>

#ifdef COLIKV_TEST_SYNC_POINTS
#include <functional>

namespace colikv {
namespace detail {

using SyncPointFn = std::function<void(const void* arg)>;

// Runs the callback set for `name`, if any, with the address of arg.
void run_test_sync_point(const char* name, const void* arg);
template <class T>
void test_sync_point(const char* name, const T& arg) {
  run_test_sync_point(name, &arg);
}
// Sets the callback of `name` for the whole process (any Store, any
// thread), or with an empty fn clears it; clearing waits for the calls of it
// in progress, so that the test may then free what its callback uses.
void set_test_sync_point(const std::string& name, SyncPointFn fn);
// Whether a callback is set for `name`.
bool test_sync_point_set(const std::string& name);

}  // namespace detail
}  // namespace colikv

// arg: an expression (a braced temporary too) passed by address.
#define COLIKV_TEST_SYNC_POINT(name, ...) ::colikv::detail::test_sync_point(name, __VA_ARGS__)
#else
#define COLIKV_TEST_SYNC_POINT(name, ...) ((void)0)
#endif

namespace colikv {
namespace detail {

// The argument of "append:chunk": an append reaches it after storing and
// linking each chunk, inside its write transaction, with the conversation's
// id and the entry's seq (a test holds a turn open there, mid-turn provably,
// or stops the server). Objects first, after each chunk's own transaction
// has committed (the chunk held, not linked, the write lock free).
struct AppendChunkPoint {
  const std::string& id;
  int64_t seq;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_TEST_SYNC_POINT_H
