#include "model/common/row_parallel.h"

namespace deepinfer::model {

void RunLinearTasks(const std::vector<LinearTask>& tasks, const kernels::LinearOptions& options, ThreadPool& pool) {
  // Every product is cut into slices of whole weight rows (FP8: whole scale blocks) of about equal work,
  // and the pool's threads take slices until none are left: one hand-off for the whole list, threads
  // balanced however unequal the products are, and each slice streams one contiguous run of weight rows.
  // A row's result depends only on that row (kernels::Linear is batch and split invariant), so slicing
  // never changes a bit.
  struct Slice {
    const LinearTask* task;
    kernels::WeightView weights;
    int64_t first_row;
  };
  auto row_work = [](const LinearTask& t) { return t.w->in_features * (t.m + 4); };
  int64_t total = 0;
  for (const LinearTask& t : tasks) total += row_work(t) * t.w->out_features;
  // About eight slices per thread, none so small that the hand-off dominates (~64 Ki multiply-adds).
  const int64_t target = std::max<int64_t>(int64_t{1} << 16, total / (8 * pool.size()));
  std::vector<Slice> slices;
  for (const LinearTask& t : tasks) {
    const kernels::WeightView& w = *t.w;
    const int64_t granule = w.format == kernels::WeightFormat::kFP8Block ? w.block_out : 8;
    int64_t rows = std::max<int64_t>(1, target / std::max<int64_t>(1, row_work(t)));
    rows = (rows + granule - 1) / granule * granule;
    if (rows >= w.out_features || pool.size() == 1) {
      slices.push_back({&t, w, 0});
      continue;
    }
    const size_t first_slice = slices.size();
    for (int64_t begin = 0; begin < w.out_features; begin += rows) {
      auto view = kernels::SliceRows(w, begin, std::min(rows, w.out_features - begin));
      if (!view.ok()) {  // not expected (begin is a multiple of the granule): the product stays whole
        slices.resize(first_slice);
        slices.push_back({&t, w, 0});
        break;
      }
      slices.push_back({&t, *view, begin});
    }
  }
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Slice& s = slices[i];
      const LinearTask& t = *s.task;
      kernels::Linear(t.x, t.m, t.x_stride, s.weights, t.y + s.first_row, t.y_stride, options, nullptr);
    }
  };
  if (slices.size() == 1) {
    const LinearTask& t = *slices[0].task;
    kernels::Linear(t.x, t.m, t.x_stride, *t.w, t.y, t.y_stride, options, &pool);  // splits across the pool itself
  } else {
    pool.ParallelFor(static_cast<int64_t>(slices.size()), run, 1);
  }
}

}  // namespace deepinfer::model
