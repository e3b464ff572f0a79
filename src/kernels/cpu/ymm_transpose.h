// Internal: 16 x 16 float transposes by 8 x 8 blocks of ymm registers, for the lane-major panels of the Linear
// kernels (cpu/linear_vector_impl.h) on AVX2 and AVX-512. Internal linkage: include only from files compiled
// with AVX2 (or later) flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace deepinfer::kernels::cpu {
namespace {

// r[c] lane j becomes r[j] lane c, for an 8 x 8 block of floats.
inline void Transpose8(__m256* r) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// The 16 x 16 block at `in` (rows `in_stride` floats apart) transposed into `out` (rows `out_stride` floats
// apart): out[j][c] = in[c][j].
inline void Transpose16(const float* in, int64_t in_stride, float* out, int64_t out_stride) {
  for (int cb = 0; cb < 16; cb += 8) {
    for (int jb = 0; jb < 16; jb += 8) {
      __m256 r[8];
      for (int c = 0; c < 8; ++c) r[c] = _mm256_loadu_ps(in + (cb + c) * in_stride + jb);
      Transpose8(r);
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + (jb + j) * out_stride + cb, r[j]);
    }
  }
}

// 8 bf16 -> fp32.
inline __m256 Bf16x8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// As Transpose16 over 16 bf16 rows (rows[c] + k), widened to fp32 on the way.
inline void Transpose16Bf16(const uint16_t* const* rows, int64_t k, float* out, int64_t out_stride) {
  for (int cb = 0; cb < 16; cb += 8) {
    for (int jb = 0; jb < 16; jb += 8) {
      __m256 r[8];
      for (int c = 0; c < 8; ++c) r[c] = Bf16x8(rows[cb + c] + k + jb);
      Transpose8(r);
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + (jb + j) * out_stride + cb, r[j]);
    }
  }
}

}  // namespace
}  // namespace deepinfer::kernels::cpu
