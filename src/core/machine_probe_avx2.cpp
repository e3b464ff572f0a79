// Compiled with AVX2+FMA flags (cmake/Isa.cmake); reached only when the CPU has them.
#include <immintrin.h>

#include "core/machine_probe.h"

namespace deepinfer::probe_detail {

double FmaLoopAvx2(long iterations) {
  // Ten independent accumulators cover the FMA latency × throughput product of current cores.
  __m256 acc[10];
  for (auto& a : acc) a = _mm256_set1_ps(1.0f);
  const __m256 m = _mm256_set1_ps(0.9999f), add = _mm256_set1_ps(0.0001f);
  for (long i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm256_fmadd_ps(a, m, add);
  __m256 sum = acc[0];
  for (int k = 1; k < 10; ++k) sum = _mm256_add_ps(sum, acc[k]);
  volatile float sink = _mm256_cvtss_f32(sum);
  (void)sink;
  return 2.0 * 8 * 10 * static_cast<double>(iterations);
}

}  // namespace deepinfer::probe_detail
