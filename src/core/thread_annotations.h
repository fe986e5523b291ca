// Clang's thread-safety attributes (-Wthread-safety), as leveldb's
// port/thread_annotations.h spells them: which lock guards a field, which
// lock a function needs or takes. They compile to nothing elsewhere (gcc).
#ifndef COLIKV_SRC_THREAD_ANNOTATIONS_H
#define COLIKV_SRC_THREAD_ANNOTATIONS_H

#include <mutex>
#include <type_traits>
#include <utility>

#if defined(__clang__)
#define COLIKV_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define COLIKV_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) COLIKV_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY COLIKV_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) COLIKV_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) COLIKV_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) COLIKV_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) COLIKV_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) COLIKV_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define EXCLUDES(...) COLIKV_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) COLIKV_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) COLIKV_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS COLIKV_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace colikv {
namespace detail {

// std::mutex and std::recursive_mutex as capabilities the analysis knows
// (libstdc++'s carry no attributes), and their scoped lock.
template <class M>
class CAPABILITY("mutex") AnnotatedMutex {
 public:
  void lock() ACQUIRE() { m_.lock(); }
  void unlock() RELEASE() { m_.unlock(); }
  M& native() { return m_; }

 private:
  M m_;
};
using Mutex = AnnotatedMutex<std::mutex>;
using RecursiveMutex = AnnotatedMutex<std::recursive_mutex>;

template <class M>
class SCOPED_CAPABILITY LockGuard {
 public:
  explicit LockGuard(M& m) ACQUIRE(m) : m_(m) { m_.lock(); }
  ~LockGuard() RELEASE() { m_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  M& m_;
};

// The scoped lock of a condition variable's wait: native() is the
// std::unique_lock it waits with (the lock is held again when it returns).
template <class M>
class SCOPED_CAPABILITY UniqueLock {
 public:
  using Native = std::unique_lock<std::remove_reference_t<decltype(std::declval<M&>().native())>>;
  explicit UniqueLock(M& m) ACQUIRE(m) : lock_(m.native()) {}
  ~UniqueLock() RELEASE() {}
  void lock() ACQUIRE() { lock_.lock(); }
  void unlock() RELEASE() { lock_.unlock(); }
  Native& native() { return lock_; }
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;

 private:
  Native lock_;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_THREAD_ANNOTATIONS_H
