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

// A tile of Q queries × T keys: Q·T accumulators, each with exactly the operations of DotLanes (the masked
// tail included, which leaves lanes past dim untouched rather than adding zero products: that keeps a -0
// partial sum's sign), then Reduce's halving four dots at a time (V::Reduce4: the same additions) and the
// scale. Per 16 dims each key vector is loaded once for the Q queries and each query vector once for the
// T keys. Keys from `valid_t` on are stand-ins (the caller repeats a real key) and are not stored.
template <int Q, int T, class K>
inline void DotsTile(const float* const* q, const K* const* key, int64_t dim, float scale, float* out,
                     int64_t out_stride, int valid_t) {
  static_assert(T % 4 == 0, "the dots are reduced and stored four keys at a time");
  __m512 acc[Q][T];
  for (int i = 0; i < Q; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= dim; k += 16) {
    __m512 kv[T];
    for (int t = 0; t < T; ++t) kv[t] = Load16(key[t] + k);
    for (int i = 0; i < Q; ++i) {
      const __m512 qv = _mm512_loadu_ps(q[i] + k);
      for (int t = 0; t < T; ++t) acc[i][t] = _mm512_fmadd_ps(qv, kv[t], acc[i][t]);
    }
  }
  if (k < dim) {
    const __mmask16 m = static_cast<__mmask16>((1u << (dim - k)) - 1);
    __m512 kv[T];
    for (int t = 0; t < T; ++t) kv[t] = Load16(m, key[t] + k);
    for (int i = 0; i < Q; ++i) {
      const __m512 qv = _mm512_maskz_loadu_ps(m, q[i] + k);
      for (int t = 0; t < T; ++t) acc[i][t] = _mm512_mask3_fmadd_ps(qv, kv[t], acc[i][t], m);
    }
  }
  const __m128 s = _mm_set1_ps(scale);
  for (int i = 0; i < Q; ++i) {
    for (int t = 0; t < T && t < valid_t; t += 4) {
      const __m128 dots =
          _mm_mul_ps(cpu::V::Reduce4(acc[i][t], acc[i][t + 1], acc[i][t + 2], acc[i][t + 3]), s);
      const int n = valid_t - t < 4 ? valid_t - t : 4;
      _mm_mask_storeu_ps(out + i * out_stride + t, static_cast<__mmask8>((1u << n) - 1), dots);
    }
  }
}

// Query tiles of kDotQueries × kDotKeys (16 accumulators, the keys' 8 vectors and a query vector). Keys are
// taken a chunk of about kDotChunkBytes at a time, outermost: the chunk stays in L1 while every block of
// queries goes by, and each query vector read from L2 serves kDotKeys dots.
constexpr int kDotQueries = 2;
constexpr int kDotKeys = 8;
constexpr int64_t kDotChunkBytes = int64_t{24} * 1024;

template <int Q, class K>
inline void KeyTiles(const float* const* rows, const K* const* keys, int64_t t0, int64_t t1, int64_t dim,
                     float scale, float* out, int64_t out_stride) {
  for (int64_t t = t0; t < t1; t += kDotKeys) {
    const int valid = static_cast<int>(t1 - t < kDotKeys ? t1 - t : kDotKeys);
    const K* tile[kDotKeys];
    for (int j = 0; j < kDotKeys; ++j) tile[j] = keys[t + (j < valid ? j : valid - 1)];
    DotsTile<Q, kDotKeys>(rows, tile, dim, scale, out + t, out_stride, valid);
  }
}

template <class K>
void QueryKeyDotsAvx512T(const float* q, int64_t q_stride, int64_t queries, const K* const* keys, int64_t num_keys,
                         int64_t dim, float scale, float* out, int64_t out_stride) {
  const int64_t key_bytes = (dim > 0 ? dim : 1) * static_cast<int64_t>(sizeof(K));
  const int64_t per_chunk = kDotChunkBytes / key_bytes / kDotKeys * kDotKeys;
  const int64_t chunk = per_chunk > kDotKeys ? per_chunk : kDotKeys;
  for (int64_t t0 = 0; t0 < num_keys; t0 += chunk) {
    const int64_t t1 = t0 + chunk < num_keys ? t0 + chunk : num_keys;
    int64_t i = 0;
    for (; i + kDotQueries <= queries; i += kDotQueries) {
      const float* rows[kDotQueries];
      for (int r = 0; r < kDotQueries; ++r) rows[r] = q + (i + r) * q_stride;
      KeyTiles<kDotQueries>(rows, keys, t0, t1, dim, scale, out + i * out_stride, out_stride);
    }
    for (; i < queries; ++i) {
      const float* row = q + i * q_stride;
      KeyTiles<1>(&row, keys, t0, t1, dim, scale, out + i * out_stride, out_stride);
    }
  }
}

// Up to kHeadBlock queries' accumulators of the weighted sums below stay in registers together.
constexpr int kHeadBlock = 8;

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
