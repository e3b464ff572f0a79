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
  for (int64_t h = 0; h < heads; ++h) {
    float* o = out + h * dim;
    int64_t e = 0;
    for (; e + 16 <= dim; e += 16) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t t = 0; t < num_keys; ++t)
        acc = _mm512_fmadd_ps(_mm512_set1_ps(p[h * num_keys + t]), _mm512_loadu_ps(keys[t] + e), acc);
      _mm512_storeu_ps(o + e, acc);
    }
    if (e < dim) {
      const __mmask16 m = static_cast<__mmask16>((1u << (dim - e)) - 1);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t t = 0; t < num_keys; ++t)
        acc = _mm512_fmadd_ps(_mm512_set1_ps(p[h * num_keys + t]), _mm512_maskz_loadu_ps(m, keys[t] + e), acc);
      _mm512_mask_storeu_ps(o + e, m, acc);
    }
  }
}

}  // namespace deepinfer::kernels::attention_impl
