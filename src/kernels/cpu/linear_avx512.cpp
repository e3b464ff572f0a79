// Linear on AVX-512: one zmm holds the 16 lanes of the canonical order.
#include "kernels/cpu/avx512_ops.h"
#include "kernels/cpu/linear_vector_impl.h"

namespace deepinfer::kernels::cpu {

void LinearRangeAvx512(const LinearTask& task, int64_t n_begin, int64_t n_end) {
  if (LinearGemvAvx512(task, n_begin, n_end, LinearRangeVector)) return;
  LinearRangeVector(task, n_begin, n_end);
}

}  // namespace deepinfer::kernels::cpu
