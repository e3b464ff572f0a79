// Telling the kernel's scheduler which threads wait on others' latency. On a machine whose cores are all
// busy with compute threads (the engine's forward pass takes every core it is given), a thread that wakes
// to pass a token on — the engine's output thread, the HTTP event loop — otherwise waits for a running
// thread's time slice to end (about a millisecond under EEVDF's defaults) before it may run.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace deepinfer {

// Asks for a time slice of `slice_us` microseconds for the calling thread (Linux >= 6.12: EEVDF's
// per-task slice, sched_attr.sched_runtime for SCHED_OTHER; the kernel clamps it to 100 us .. 100 ms).
// A thread with a shorter slice than the running one preempts it when it wakes, so a short slice is for
// threads that run briefly after waking and whose wake-up latency matters. Policy and nice value are
// kept. Kernels without per-task slices accept and ignore it; an error means the request was refused.
Status SetThreadLatencySlice(int64_t slice_us);

// Moves the calling thread to the background: SCHED_BATCH at nice 19 with the kernel's default slice. On a
// core that a default thread keeps busy it runs in what that thread leaves (about 1.5% of the core beside a
// nice-0 thread that never sleeps, and every idle moment), and waking it never preempts another thread. For
// work that may wait but must not lengthen a latency-bound thread's turn; an unprivileged thread cannot
// return to a higher priority.
Status SetThreadBackgroundPriority();

// Names the calling thread for `top -H`, `perf sched` and debuggers (Linux keeps the first 15 bytes).
// Best effort: elsewhere, or if the kernel refuses, the thread keeps its name.
void SetCurrentThreadName(const char* name);

}  // namespace deepinfer
