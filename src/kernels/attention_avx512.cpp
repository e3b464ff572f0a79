// AVX-512 attention kernels: one 16-lane accumulator per dot product (kernels/attention.h order).
#include <immintrin.h>

#include "kernels/attention_kernels.h"

namespace deepinfer::kernels::attention_impl {
namespace {

inline float Reduce16(__m512 acc) {
  // Lanes j + j+8, then j + j+4, j + j+2, j + j+1: the halving order of the scalar reference.
  alignas(64) float lane[16];
  _mm512_store_ps(lane, acc);
  for (int width = 8; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lane[j] = lane[j] + lane[j + width];
  return lane[0];
}

inline __m512 DotLanes(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), acc);
  if (k < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
    acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, a + k), _mm512_maskz_loadu_ps(m, b + k), acc, m);
  }
  return acc;
}

}  // namespace

float DotAvx512(const float* a, const float* b, int64_t n) { return Reduce16(DotLanes(a, b, n)); }

void QueryKeyDotsAvx512(const float* q, int64_t heads, int64_t dim, const float* const* keys, int64_t num_keys,
                        float scale, float* out) {
  for (int64_t t = 0; t < num_keys; ++t)
    for (int64_t h = 0; h < heads; ++h) out[h * num_keys + t] = Reduce16(DotLanes(q + h * dim, keys[t], dim)) * scale;
}

void WeightedKeySumAvx512(const float* p, int64_t heads, const float* const* keys, int64_t num_keys, int64_t dim,
                          float* out) {
  // Keys outermost, so each key is read once for all heads; the accumulators (heads × dim) stay in L1.
  for (int64_t i = 0; i < heads * dim; ++i) out[i] = 0.0f;
  const int64_t full = dim / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (dim - full)) - 1);
  for (int64_t t = 0; t < num_keys; ++t) {
    const float* k = keys[t];
    for (int64_t h = 0; h < heads; ++h) {
      const __m512 w = _mm512_set1_ps(p[h * num_keys + t]);
      float* o = out + h * dim;
      for (int64_t e = 0; e < full; e += 16)
        _mm512_storeu_ps(o + e, _mm512_fmadd_ps(w, _mm512_loadu_ps(k + e), _mm512_loadu_ps(o + e)));
      if (full < dim)
        _mm512_mask_storeu_ps(o + full, tail, _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(tail, k + full),
                                                              _mm512_maskz_loadu_ps(tail, o + full)));
    }
  }
}

}  // namespace deepinfer::kernels::attention_impl
