// Per-ISA entry points of Linear, for tests and benchmarks that compare instruction sets directly.
// Everything else calls kernels::Linear, which picks BestIsa().
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/linear.h"

namespace deepinfer::kernels {

// As Linear, on the given ISA. The caller must check IsaSupported(isa) first.
void LinearWithIsa(Isa isa, const float* x, int64_t m, int64_t x_stride, const WeightView& w, float* y,
                   int64_t y_stride, const LinearOptions& options, ThreadPool* pool);

}  // namespace deepinfer::kernels
