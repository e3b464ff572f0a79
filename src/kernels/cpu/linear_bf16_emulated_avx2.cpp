// The vdpbf16ps emulation of linear_bf16_emulated.cpp in AVX2 (also the one AVX-512 CPUs without
// AVX512_BF16 run): the 16 lanes of an output's accumulator are two 8-lane registers, each 32-bit word of
// a 64-byte chunk holds lane j's bf16 pair (element 2j low, 2j + 1 high), so the odd element widened is the
// word with its low half cleared and the even one the word shifted left by 16.
#include <immintrin.h>

#include "kernels/cpu/linear_kernels.h"

namespace deepinfer::kernels::cpu {
namespace {

inline __m256 Ftz(__m256 r) {
  const __m256i bits = _mm256_castps_si256(r);
  const __m256i tiny = _mm256_cmpeq_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7F800000)), _mm256_setzero_si256());
  const __m256 sign = _mm256_castsi256_ps(_mm256_and_si256(bits, _mm256_set1_epi32(static_cast<int>(0x80000000u))));
  return _mm256_blendv_ps(r, sign, _mm256_castsi256_ps(tiny));
}

inline __m256 Step(__m256 acc, __m256i x, __m256i w) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m256 x_odd = _mm256_castsi256_ps(_mm256_and_si256(x, high));
  const __m256 w_odd = _mm256_castsi256_ps(_mm256_and_si256(w, high));
  const __m256 x_even = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
  const __m256 w_even = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  acc = Ftz(_mm256_fmadd_ps(x_odd, w_odd, acc));
  return Ftz(_mm256_fmadd_ps(x_even, w_even, acc));
}

float EmulatedDot(const uint16_t* x, const uint16_t* w, int64_t padded) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();  // lanes 0..7 and 8..15
  for (int64_t k = 0; k < padded; k += 32) {
    lo = Step(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + k)),
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k)));
    hi = Step(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + k + 16)),
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k + 16)));
  }
  // Lanes j + j+8, then j + j+4, j + j+2, j + j+1: the halving order of V::Reduce.
  alignas(32) float lane[8];
  _mm256_store_ps(lane, _mm256_add_ps(lo, hi));
  for (int width = 4; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lane[j] = lane[j] + lane[j + width];
  return lane[0];
}

}  // namespace

void LinearRangeBf16EmulatedAvx2(const LinearTask& task, int64_t n_begin, int64_t n_end) {
  RunBf16Emulated(task, n_begin, n_end, EmulatedDot);
}

}  // namespace deepinfer::kernels::cpu
