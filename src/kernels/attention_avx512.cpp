// AVX-512 attention kernels: one 16-lane accumulator per dot product (kernels/attention.h order).
#include <immintrin.h>

#include "kernels/attention_kernels.h"
#include "kernels/cpu/avx512_ops.h"  // V::Reduce, the halving reduction

namespace deepinfer::kernels::attention_impl {
namespace {

// 16 keys elements as fp32 (bf16 widened exactly), all or the first lanes of mask m.
inline __m512 Load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 Load16(const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
inline __m512 Load16(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 Load16(__mmask16 m, const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
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

float DotAvx512(const float* a, const float* b, int64_t n) { return cpu::V::Reduce(DotLanes(a, b, n)); }

// Up to kHeadBlock heads of one key at a time, each head's dot in its own accumulator (so the key is
// loaded once per 16 dims for all of them, and the FMA chains run side by side instead of one after the
// other); each accumulator sees exactly the operations of DotLanes, then the halving reduction.
constexpr int kHeadBlock = 8;

template <int H, class K>
inline void KeyDots(const float* q, int64_t q_stride, int64_t dim, const K* key, float scale, float* out,
                    int64_t out_stride) {
  __m512 acc[H];
  for (int h = 0; h < H; ++h) acc[h] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= dim; k += 16) {
    const __m512 kv = Load16(key + k);
    for (int h = 0; h < H; ++h) acc[h] = _mm512_fmadd_ps(_mm512_loadu_ps(q + h * q_stride + k), kv, acc[h]);
  }
  if (k < dim) {
    const __mmask16 m = static_cast<__mmask16>((1u << (dim - k)) - 1);
    const __m512 kv = Load16(m, key + k);
    for (int h = 0; h < H; ++h) acc[h] = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, q + h * q_stride + k), kv, acc[h], m);
  }
  for (int h = 0; h < H; ++h) out[h * out_stride] = cpu::V::Reduce(acc[h]) * scale;
}

// Two keys at a time for kHeadBlock heads: each query chunk is loaded once for both keys (16 accumulators), the
// operations of each accumulator unchanged.
template <class K>
inline void KeyPairDots(const float* q, int64_t q_stride, int64_t dim, const K* key0, const K* key1, float scale,
                        float* out, int64_t out_stride) {
  constexpr int H = kHeadBlock;
  __m512 acc0[H], acc1[H];
  for (int h = 0; h < H; ++h) acc0[h] = acc1[h] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= dim; k += 16) {
    const __m512 kv0 = Load16(key0 + k), kv1 = Load16(key1 + k);
    for (int h = 0; h < H; ++h) {
      const __m512 qv = _mm512_loadu_ps(q + h * q_stride + k);
      acc0[h] = _mm512_fmadd_ps(qv, kv0, acc0[h]);
      acc1[h] = _mm512_fmadd_ps(qv, kv1, acc1[h]);
    }
  }
  if (k < dim) {
    const __mmask16 m = static_cast<__mmask16>((1u << (dim - k)) - 1);
    const __m512 kv0 = Load16(m, key0 + k), kv1 = Load16(m, key1 + k);
    for (int h = 0; h < H; ++h) {
      const __m512 qv = _mm512_maskz_loadu_ps(m, q + h * q_stride + k);
      acc0[h] = _mm512_mask3_fmadd_ps(qv, kv0, acc0[h], m);
      acc1[h] = _mm512_mask3_fmadd_ps(qv, kv1, acc1[h], m);
    }
  }
  for (int h = 0; h < H; ++h) {
    out[h * out_stride] = cpu::V::Reduce(acc0[h]) * scale;
    out[h * out_stride + 1] = cpu::V::Reduce(acc1[h]) * scale;
  }
}

template <class K>
void QueryKeyDotsAvx512T(const float* q, int64_t q_stride, int64_t heads, const K* const* keys, int64_t num_keys,
                         int64_t dim, float scale, float* out, int64_t out_stride) {
  int64_t t = 0;
  const int64_t paired_heads = heads / kHeadBlock * kHeadBlock;
  for (; paired_heads > 0 && t + 2 <= num_keys; t += 2) {
    for (int64_t h = 0; h < paired_heads; h += kHeadBlock)
      KeyPairDots(q + h * q_stride, q_stride, dim, keys[t], keys[t + 1], scale, out + h * out_stride + t, out_stride);
    for (int64_t h = paired_heads; h < heads; ++h) {
      KeyDots<1>(q + h * q_stride, q_stride, dim, keys[t], scale, out + h * out_stride + t, out_stride);
      KeyDots<1>(q + h * q_stride, q_stride, dim, keys[t + 1], scale, out + h * out_stride + t + 1, out_stride);
    }
  }
  for (; t < num_keys; ++t) {
    int64_t h = 0;
    for (; h + kHeadBlock <= heads; h += kHeadBlock)
      KeyDots<kHeadBlock>(q + h * q_stride, q_stride, dim, keys[t], scale, out + h * out_stride + t, out_stride);
    for (; h < heads; ++h)
      KeyDots<1>(q + h * q_stride, q_stride, dim, keys[t], scale, out + h * out_stride + t, out_stride);
  }
}

// For each block of 16 output dims, the accumulators of up to kHeadBlock queries stay in registers while
// every key goes by; per output element that is Σ_t p·key in increasing t with FMA, from +0 or (from_out) from
// the value in out, as specified.
template <int H, class K>
inline void WeightedDims(const float* p, int64_t p_stride, int64_t num_keys, const K* const* keys, int64_t e,
                         __mmask16 lanes, float* out, int64_t out_stride, bool from_out) {
  __m512 acc[H];
  for (int h = 0; h < H; ++h)
    acc[h] = from_out ? _mm512_maskz_loadu_ps(lanes, out + h * out_stride + e) : _mm512_setzero_ps();
  for (int64_t t = 0; t < num_keys; ++t) {
    const __m512 kv = Load16(lanes, keys[t] + e);
    for (int h = 0; h < H; ++h) acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(p[h * p_stride + t]), kv, acc[h]);
  }
  for (int h = 0; h < H; ++h) _mm512_mask_storeu_ps(out + h * out_stride + e, lanes, acc[h]);
}

// Two blocks of 16 output dims at once (16 accumulators for kHeadBlock queries): each p value is broadcast once
// for both, the operations of each output element unchanged.
template <class K>
inline void WeightedDimPairs(const float* p, int64_t p_stride, int64_t num_keys, const K* const* keys, int64_t e,
                             float* out, int64_t out_stride, bool from_out) {
  constexpr int H = kHeadBlock;
  __m512 acc0[H], acc1[H];
  for (int h = 0; h < H; ++h) {
    acc0[h] = from_out ? _mm512_loadu_ps(out + h * out_stride + e) : _mm512_setzero_ps();
    acc1[h] = from_out ? _mm512_loadu_ps(out + h * out_stride + e + 16) : _mm512_setzero_ps();
  }
  for (int64_t t = 0; t < num_keys; ++t) {
    const __m512 kv0 = Load16(keys[t] + e), kv1 = Load16(keys[t] + e + 16);
    for (int h = 0; h < H; ++h) {
      const __m512 pv = _mm512_set1_ps(p[h * p_stride + t]);
      acc0[h] = _mm512_fmadd_ps(pv, kv0, acc0[h]);
      acc1[h] = _mm512_fmadd_ps(pv, kv1, acc1[h]);
    }
  }
  for (int h = 0; h < H; ++h) {
    _mm512_storeu_ps(out + h * out_stride + e, acc0[h]);
    _mm512_storeu_ps(out + h * out_stride + e + 16, acc1[h]);
  }
}

template <class K>
void WeightedKeySumAvx512T(const float* p, int64_t p_stride, int64_t queries, const K* const* keys, int64_t num_keys,
                           int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  const int64_t paired = queries / kHeadBlock * kHeadBlock;
  constexpr __mmask16 kAll = static_cast<__mmask16>(0xFFFF);
  int64_t e = 0;
  for (; paired > 0 && e + 32 <= dim; e += 32) {
    for (int64_t h = 0; h < paired; h += kHeadBlock)
      WeightedDimPairs(p + h * p_stride, p_stride, num_keys, keys, e, out + h * out_stride, out_stride, accumulate);
    for (int64_t h = paired; h < queries; ++h) {
      WeightedDims<1>(p + h * p_stride, p_stride, num_keys, keys, e, kAll, out + h * out_stride, out_stride,
                      accumulate);
      WeightedDims<1>(p + h * p_stride, p_stride, num_keys, keys, e + 16, kAll, out + h * out_stride, out_stride,
                      accumulate);
    }
  }
  for (; e < dim; e += 16) {
    const __mmask16 lanes = dim - e >= 16 ? kAll : static_cast<__mmask16>((1u << (dim - e)) - 1);
    int64_t h = 0;
    for (; h + kHeadBlock <= queries; h += kHeadBlock)
      WeightedDims<kHeadBlock>(p + h * p_stride, p_stride, num_keys, keys, e, lanes, out + h * out_stride, out_stride,
                               accumulate);
    for (; h < queries; ++h)
      WeightedDims<1>(p + h * p_stride, p_stride, num_keys, keys, e, lanes, out + h * out_stride, out_stride,
                      accumulate);
  }
}

void QueryKeyDotsAvx512(const float* q, int64_t q_stride, int64_t queries, const float* const* keys,
                        int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride) {
  QueryKeyDotsAvx512T(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
}
void QueryKeyDotsBf16Avx512(const float* q, int64_t q_stride, int64_t queries, const uint16_t* const* keys,
                            int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride) {
  QueryKeyDotsAvx512T(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
}
void WeightedKeySumAvx512(const float* p, int64_t p_stride, int64_t queries, const float* const* keys,
                          int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  WeightedKeySumAvx512T(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
}
void WeightedKeySumBf16Avx512(const float* p, int64_t p_stride, int64_t queries, const uint16_t* const* keys,
                              int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  WeightedKeySumAvx512T(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
}

}  // namespace deepinfer::kernels::attention_impl
