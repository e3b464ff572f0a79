// Compiled by the ctest `thread_safety_detects_violations` with clang's -Wthread-safety: each function
// below breaks one rule of core/mutex.h's annotations, and the test expects clang to report every one.
#include "core/mutex.h"

namespace {

class Counter {
 public:
  // Writes a guarded member without its mutex.
  void IncrementUnlocked() { ++value_; }
  // Calls a function that requires the mutex without holding it.
  void CallsLockedWithoutLock() { ResetLocked(); }
  // Waits on a condition variable without holding the mutex it names.
  void WaitsUnlocked() { changed_.Wait(&mu_); }
  // The correct form: no report.
  void Increment() {
    deepinfer::MutexLock lock(&mu_);
    ++value_;
    changed_.SignalAll();
  }

 private:
  void ResetLocked() REQUIRES(mu_) { value_ = 0; }

  deepinfer::Mutex mu_;
  deepinfer::CondVar changed_;
  int value_ GUARDED_BY(mu_) = 0;
};

}  // namespace

void UseCounter() {
  Counter c;
  c.Increment();
  c.IncrementUnlocked();
  c.CallsLockedWithoutLock();
  c.WaitsUnlocked();
}
