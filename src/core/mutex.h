// A mutex and its scoped lock that clang's thread-safety analysis understands (-Wthread-safety), and the
// annotations that say which lock guards what.
//
// libstdc++'s std::mutex carries no capability attributes, so a member marked GUARDED_BY(a std::mutex)
// is not checked. Mutex wraps one and is the capability; MutexLock holds it for a scope; CondVar waits
// under it. Under gcc the annotations expand to nothing and the wrappers cost nothing.
//
//   class Queue {
//     Mutex mu_;
//     std::deque<int> items_ GUARDED_BY(mu_);   // read or written only while mu_ is held
//     void PopLocked() REQUIRES(mu_);           // callers hold mu_
//   };
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define DEEPINFER_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define DEEPINFER_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) DEEPINFER_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY DEEPINFER_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) DEEPINFER_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) DEEPINFER_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) DEEPINFER_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) DEEPINFER_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) DEEPINFER_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) DEEPINFER_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) DEEPINFER_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) DEEPINFER_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) DEEPINFER_THREAD_ANNOTATION(lock_returned(x))
// For the rare function whose locking the analysis cannot follow; say why beside it.
#define NO_THREAD_SAFETY_ANALYSIS DEEPINFER_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace deepinfer {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds this mutex where it cannot see it (a callback run under it).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable; each wait names the Mutex it waits under (held by the caller, released while
// waiting, held again on return), so the analysis checks that the caller holds it.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // False when the deadline passed first (it may also return true spuriously: callers re-check).
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woke = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woke;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace deepinfer
