#include "kernels/cpu/linear_kernels.h"

namespace deepinfer::kernels::cpu {

void LinearRangeAvx512(const LinearTask& task, int64_t n_begin, int64_t n_end) {
  LinearRangeScalar(task, n_begin, n_end);
}

}  // namespace deepinfer::kernels::cpu
