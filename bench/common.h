// What several `deepinfer bench` targets share: timing loops (wall and CPU time), peak resident memory,
// ratio cells, and finding files of the repository the binary was built from.
#pragma once

#include <functional>
#include <string>

namespace deepinfer::bench {

// The best (smallest) wall time of `runs` calls of fn, in seconds.
double BestWall(int runs, const std::function<void()>& fn);

// The best process CPU time of `runs` calls. Single-thread figures use it: other work on a shared machine
// then does not count against either side (a pool's workers idle meanwhile add nothing).
double BestCpu(int runs, const std::function<void()>& fn);
double ProcessCpuSeconds();

// The process's peak resident set (VmHWM) since the last ResetPeakRss, in MiB; getrusage's lifetime peak
// where /proc is missing.
double PeakRssMiB();
// Starts a new peak for VmHWM (writing 5 to /proc/self/clear_refs).
void ResetPeakRss();

// "2.5x", or "n/a" when theirs is not positive.
std::string Ratio(double ours, double theirs);

// `relative` under the nearest ancestor directory of the running executable that has it, or "".
std::string FindUp(const std::string& relative);

}  // namespace deepinfer::bench
