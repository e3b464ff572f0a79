// AVX2 attention kernels: the 16 lanes of a dot product in two 8-lane accumulators (kernels/attention.h order).
#include <immintrin.h>

#include "kernels/attention_kernels.h"

namespace deepinfer::kernels::attention_impl {
namespace {

inline __m256i TailMask(int64_t count) {  // the first `count` (0..8) lanes set
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), index);
}

inline float DotLanes(const float* a, const float* b, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();  // lanes 0..7 and 8..15
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), hi);
  }
  if (k < n) {
    const int64_t rest = n - k;
    const __m256i mlo = TailMask(rest < 8 ? rest : 8), mhi = TailMask(rest > 8 ? rest - 8 : 0);
    lo = _mm256_fmadd_ps(_mm256_maskload_ps(a + k, mlo), _mm256_maskload_ps(b + k, mlo), lo);
    hi = _mm256_fmadd_ps(_mm256_maskload_ps(a + k + 8, mhi), _mm256_maskload_ps(b + k + 8, mhi), hi);
  }
  // Lanes j + j+8, then j + j+4, j + j+2, j + j+1: the halving order of the scalar reference.
  alignas(32) float lane[8];
  _mm256_store_ps(lane, _mm256_add_ps(lo, hi));
  for (int width = 4; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lane[j] = lane[j] + lane[j + width];
  return lane[0];
}

}  // namespace

float DotAvx2(const float* a, const float* b, int64_t n) { return DotLanes(a, b, n); }

void QueryKeyDotsAvx2(const float* q, int64_t heads, int64_t dim, const float* const* keys, int64_t num_keys,
                      float scale, float* out) {
  for (int64_t t = 0; t < num_keys; ++t)
    for (int64_t h = 0; h < heads; ++h) out[h * num_keys + t] = DotLanes(q + h * dim, keys[t], dim) * scale;
}

void WeightedKeySumAvx2(const float* p, int64_t heads, const float* const* keys, int64_t num_keys, int64_t dim,
                        float* out) {
  // Keys outermost, so each key is read once for all heads; the accumulators (heads × dim) stay in L1.
  for (int64_t i = 0; i < heads * dim; ++i) out[i] = 0.0f;
  const int64_t full = dim / 8 * 8;
  const __m256i tail = TailMask(dim - full);
  for (int64_t t = 0; t < num_keys; ++t) {
    const float* k = keys[t];
    for (int64_t h = 0; h < heads; ++h) {
      const __m256 w = _mm256_set1_ps(p[h * num_keys + t]);
      float* o = out + h * dim;
      for (int64_t e = 0; e < full; e += 8)
        _mm256_storeu_ps(o + e, _mm256_fmadd_ps(w, _mm256_loadu_ps(k + e), _mm256_loadu_ps(o + e)));
      if (full < dim)
        _mm256_maskstore_ps(o + full, tail, _mm256_fmadd_ps(w, _mm256_maskload_ps(k + full, tail),
                                                            _mm256_maskload_ps(o + full, tail)));
    }
  }
}

}  // namespace deepinfer::kernels::attention_impl
