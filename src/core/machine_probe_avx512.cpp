// Compiled with AVX-512 flags (cmake/Isa.cmake); reached only when the CPU has them.
#include <immintrin.h>

#include "core/machine_probe.h"

namespace deepinfer::probe_detail {

double FmaLoopAvx512(long iterations) {
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_set1_ps(1.0f);
  const __m512 m = _mm512_set1_ps(0.9999f), add = _mm512_set1_ps(0.0001f);
  for (long i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm512_fmadd_ps(a, m, add);
  __m512 sum = acc[0];
  for (int k = 1; k < 12; ++k) sum = _mm512_add_ps(sum, acc[k]);
  // Stored rather than _mm512_reduce_add_ps, which trips GCC 12's -Wuninitialized.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  volatile float sink = lanes[0] + lanes[15];
  (void)sink;
  return 2.0 * 16 * 12 * static_cast<double>(iterations);
}

}  // namespace deepinfer::probe_detail
