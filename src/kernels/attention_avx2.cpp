// AVX2 attention kernels: the 16 lanes of a dot product in two 8-lane accumulators (kernels/attention.h order).
#include <immintrin.h>

#include "kernels/attention_kernels.h"

namespace deepinfer::kernels::attention_impl {
namespace {

inline __m256i TailMask(int64_t count) {  // the first `count` (0..8) lanes set
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), index);
}

// 8 key elements as fp32 (bf16 widened exactly); the masked forms read only the first `count` (0..8).
inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
inline __m256 Load8(const float* p, int64_t count) { return _mm256_maskload_ps(p, TailMask(count)); }
inline __m256 Load8(const uint16_t* p, int64_t count) {
  alignas(16) uint16_t buf[8] = {};
  for (int64_t i = 0; i < count; ++i) buf[i] = p[i];
  return Load8(buf);
}

template <class K>
inline float DotLanes(const float* a, const K* b, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();  // lanes 0..7 and 8..15
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), Load8(b + k), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), Load8(b + k + 8), hi);
  }
  if (k < n) {
    const int64_t rest = n - k, nlo = rest < 8 ? rest : 8, nhi = rest > 8 ? rest - 8 : 0;
    lo = _mm256_fmadd_ps(_mm256_maskload_ps(a + k, TailMask(nlo)), Load8(b + k, nlo), lo);
    hi = _mm256_fmadd_ps(_mm256_maskload_ps(a + k + 8, TailMask(nhi)), Load8(b + k + 8, nhi), hi);
  }
  // Lanes j + j+8, then j + j+4, j + j+2, j + j+1: the halving order of the scalar reference.
  alignas(32) float lane[8];
  _mm256_store_ps(lane, _mm256_add_ps(lo, hi));
  for (int width = 4; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lane[j] = lane[j] + lane[j + width];
  return lane[0];
}

template <class K>
void QueryKeyDotsAvx2T(const float* q, int64_t heads, int64_t dim, const K* const* keys, int64_t num_keys,
                       float scale, float* out) {
  for (int64_t t = 0; t < num_keys; ++t)
    for (int64_t h = 0; h < heads; ++h) out[h * num_keys + t] = DotLanes(q + h * dim, keys[t], dim) * scale;
}

template <class K>
void WeightedKeySumAvx2T(const float* p, int64_t heads, const K* const* keys, int64_t num_keys, int64_t dim,
                         float* out) {
  // Keys outermost, so each key is read once for all heads; the accumulators (heads × dim) stay in L1.
  for (int64_t i = 0; i < heads * dim; ++i) out[i] = 0.0f;
  const int64_t full = dim / 8 * 8;
  const __m256i tail = TailMask(dim - full);
  for (int64_t t = 0; t < num_keys; ++t) {
    const K* k = keys[t];
    for (int64_t h = 0; h < heads; ++h) {
      const __m256 w = _mm256_set1_ps(p[h * num_keys + t]);
      float* o = out + h * dim;
      for (int64_t e = 0; e < full; e += 8)
        _mm256_storeu_ps(o + e, _mm256_fmadd_ps(w, Load8(k + e), _mm256_loadu_ps(o + e)));
      if (full < dim)
        _mm256_maskstore_ps(o + full, tail, _mm256_fmadd_ps(w, Load8(k + full, dim - full),
                                                            _mm256_maskload_ps(o + full, tail)));
    }
  }
}

}  // namespace

float DotAvx2(const float* a, const float* b, int64_t n) { return DotLanes(a, b, n); }

void QueryKeyDotsAvx2(const float* q, int64_t heads, int64_t dim, const float* const* keys, int64_t num_keys,
                      float scale, float* out) {
  QueryKeyDotsAvx2T(q, heads, dim, keys, num_keys, scale, out);
}
void QueryKeyDotsBf16Avx2(const float* q, int64_t heads, int64_t dim, const uint16_t* const* keys, int64_t num_keys,
                          float scale, float* out) {
  QueryKeyDotsAvx2T(q, heads, dim, keys, num_keys, scale, out);
}
void WeightedKeySumAvx2(const float* p, int64_t heads, const float* const* keys, int64_t num_keys, int64_t dim,
                        float* out) {
  WeightedKeySumAvx2T(p, heads, keys, num_keys, dim, out);
}
void WeightedKeySumBf16Avx2(const float* p, int64_t heads, const uint16_t* const* keys, int64_t num_keys,
                            int64_t dim, float* out) {
  WeightedKeySumAvx2T(p, heads, keys, num_keys, dim, out);
}

}  // namespace deepinfer::kernels::attention_impl
