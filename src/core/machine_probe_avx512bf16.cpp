// Compiled with AVX512_BF16 flags (cmake/Isa.cmake); reached only when the CPU has them.
#include <immintrin.h>

#include "core/machine_probe.h"

namespace deepinfer::probe_detail {

double Bf16DotLoopAvx512(long iterations) {
  // Each vdpbf16ps does 32 bf16 multiplies and 32 adds into 16 fp32 lanes: 64 FLOPs.
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80);  // bf16 1.0
  const __m512bh y = (__m512bh)_mm512_set1_epi16(0x3c00);  // bf16 2^-7
  for (long i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, x, y);
  __m512 sum = acc[0];
  for (int k = 1; k < 12; ++k) sum = _mm512_add_ps(sum, acc[k]);
  // Stored rather than _mm512_reduce_add_ps, which trips GCC 12's -Wuninitialized.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  volatile float sink = lanes[0] + lanes[15];
  (void)sink;
  return 64.0 * 12 * static_cast<double>(iterations);
}

}  // namespace deepinfer::probe_detail
