// AVX-512 attention kernels: one 16-lane accumulator per dot product (kernels/attention.h order).
// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsics headers as uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include "kernels/attention_kernels.h"

namespace deepinfer::kernels::attention_impl {
namespace {

// The same sums as Reduce16 without the round trip through memory.
inline float ReduceHalving(__m512 a) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

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

// Up to kHeadBlock heads of one key at a time, each head's dot in its own accumulator (so the key is
// loaded once per 16 dims for all of them, and the FMA chains run side by side instead of one after the
// other); each accumulator sees exactly the operations of DotLanes, then the halving reduction.
constexpr int kHeadBlock = 8;

template <int H>
inline void KeyDots(const float* q, int64_t dim, const float* key, float scale, float* out, int64_t out_stride) {
  __m512 acc[H];
  for (int h = 0; h < H; ++h) acc[h] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= dim; k += 16) {
    const __m512 kv = _mm512_loadu_ps(key + k);
    for (int h = 0; h < H; ++h) acc[h] = _mm512_fmadd_ps(_mm512_loadu_ps(q + h * dim + k), kv, acc[h]);
  }
  if (k < dim) {
    const __mmask16 m = static_cast<__mmask16>((1u << (dim - k)) - 1);
    const __m512 kv = _mm512_maskz_loadu_ps(m, key + k);
    for (int h = 0; h < H; ++h) acc[h] = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, q + h * dim + k), kv, acc[h], m);
  }
  for (int h = 0; h < H; ++h) out[h * out_stride] = ReduceHalving(acc[h]) * scale;
}

void QueryKeyDotsAvx512(const float* q, int64_t heads, int64_t dim, const float* const* keys, int64_t num_keys,
                        float scale, float* out) {
  for (int64_t t = 0; t < num_keys; ++t) {
    int64_t h = 0;
    for (; h + kHeadBlock <= heads; h += kHeadBlock)
      KeyDots<kHeadBlock>(q + h * dim, dim, keys[t], scale, out + h * num_keys + t, num_keys);
    for (; h < heads; ++h) KeyDots<1>(q + h * dim, dim, keys[t], scale, out + h * num_keys + t, num_keys);
  }
}

// For each block of 16 output dims, the accumulators of up to kHeadBlock heads stay in registers while
// every key goes by; per output element that is Σ_t p·key from +0 in increasing t with FMA, as specified.
template <int H>
inline void WeightedDims(const float* p, int64_t num_keys, const float* const* keys, int64_t e, __mmask16 lanes,
                         int64_t dim, float* out) {
  __m512 acc[H];
  for (int h = 0; h < H; ++h) acc[h] = _mm512_setzero_ps();
  for (int64_t t = 0; t < num_keys; ++t) {
    const __m512 kv = _mm512_maskz_loadu_ps(lanes, keys[t] + e);
    for (int h = 0; h < H; ++h) acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(p[h * num_keys + t]), kv, acc[h]);
  }
  for (int h = 0; h < H; ++h) _mm512_mask_storeu_ps(out + h * dim + e, lanes, acc[h]);
}

void WeightedKeySumAvx512(const float* p, int64_t heads, const float* const* keys, int64_t num_keys, int64_t dim,
                          float* out) {
  for (int64_t e = 0; e < dim; e += 16) {
    const __mmask16 lanes = dim - e >= 16 ? static_cast<__mmask16>(0xFFFF)
                                          : static_cast<__mmask16>((1u << (dim - e)) - 1);
    int64_t h = 0;
    for (; h + kHeadBlock <= heads; h += kHeadBlock)
      WeightedDims<kHeadBlock>(p + h * num_keys, num_keys, keys, e, lanes, dim, out + h * dim);
    for (; h < heads; ++h) WeightedDims<1>(p + h * num_keys, num_keys, keys, e, lanes, dim, out + h * dim);
  }
}

}  // namespace deepinfer::kernels::attention_impl
