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

// Names the calling thread for `top -H`, `perf sched` and debuggers (Linux keeps the first 15 bytes).
// Best effort: elsewhere, or if the kernel refuses, the thread keeps its name.
void SetCurrentThreadName(const char* name);

}  // namespace deepinfer
