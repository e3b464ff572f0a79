// How the model code spreads per-row work and batches of matrix products over a thread pool without
// changing a bit of the result.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/linear.h"

namespace deepinfer::model {

// Runs fn(begin, end) over the rows [0, n), in ranges shared among the pool's threads when there are
// several rows. For work where each row's result depends only on that row, so threading changes nothing.
template <class Fn>
void ForRowRanges(ThreadPool& pool, int64_t n, const Fn& fn) {
  if (n < 4) return fn(int64_t{0}, n);
  pool.ParallelFor(n, fn, std::max<int64_t>(1, n / (4 * pool.size())));
}
template <class Fn>
void ForRows(ThreadPool& pool, int64_t n, const Fn& fn) {
  ForRowRanges(pool, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(i);
  });
}

// Independent matrix products y = x·Wᵀ, cut into row slices of about equal work that the pool's threads
// share in one hand-off. Results are bit-identical to running each product alone (kernels::Linear's rows
// do not depend on how the rows are split or threaded).
struct LinearTask {
  const float* x;
  int64_t m, x_stride;
  const kernels::WeightView* w;
  float* y;
  int64_t y_stride;
};
void RunLinearTasks(const std::vector<LinearTask>& tasks, const kernels::LinearOptions& options, ThreadPool& pool);

}  // namespace deepinfer::model
