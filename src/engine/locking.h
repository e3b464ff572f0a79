// Waiting on a core CondVar with clang's thread-safety analysis on. CondVar::Wait requires the CondVar's
// own mutex, which the analysis cannot tie to the Mutex a caller holds; these name that Mutex instead, so
// the analysis still checks that the caller holds it. `held` must be the mutex the CondVar was made with.
#pragma once

#include <chrono>

#include "core/mutex.h"

namespace deepinfer::engine {

inline void WaitOn(CondVar& cv, [[maybe_unused]] Mutex& held) REQUIRES(held) NO_THREAD_SAFETY_ANALYSIS { cv.Wait(); }

template <class Rep, class Period>
void WaitOnFor(CondVar& cv, [[maybe_unused]] Mutex& held, const std::chrono::duration<Rep, Period>& timeout)
    REQUIRES(held) NO_THREAD_SAFETY_ANALYSIS {
  cv.WaitFor(timeout);
}

}  // namespace deepinfer::engine
