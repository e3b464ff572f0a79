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

// Keys are taken kKeyBlock at a time, so that the slice of them a block of output dims reads stays in L1
// while every block of queries goes by; between key blocks the accumulators rest in `out`, which changes no
// bits (a stored fp32 is the register's value).
constexpr int64_t kKeyBlock = 64;
constexpr int kQueryBlock = 4;  // queries × kDimVectors vectors of 8 dims: 12 accumulators
constexpr int kDimVectors = 3;

// Q queries × E vectors of 8 output dims from e on (with Tail, the last vector holds only `rest` dims), over
// keys [t0, t1): each accumulator stays in a register while the keys go by, each key vector is loaded once
// for all Q queries and each p value broadcast once for all E vectors; per output element the operations are
// those of the one-query sum, FMA over increasing t, from +0 or (from_out) from out.
template <int Q, int E, bool Tail, class K>
inline void WeightedBlock(const float* p, int64_t p_stride, const K* const* keys, int64_t t0, int64_t t1, int64_t e,
                          int64_t rest, float* out, int64_t out_stride, bool from_out) {
  const __m256i tail = TailMask(rest);
  __m256 acc[Q][E];
  for (int q = 0; q < Q; ++q) {
    for (int j = 0; j < E; ++j) {
      const float* o = out + q * out_stride + e + 8 * j;
      if (!from_out) acc[q][j] = _mm256_setzero_ps();
      else acc[q][j] = Tail && j == E - 1 ? _mm256_maskload_ps(o, tail) : _mm256_loadu_ps(o);
    }
  }
  for (int64_t t = t0; t < t1; ++t) {
    const K* k = keys[t] + e;
    __m256 kv[E];
    for (int j = 0; j < E; ++j) kv[j] = Tail && j == E - 1 ? Load8(k + 8 * j, rest) : Load8(k + 8 * j);
    for (int q = 0; q < Q; ++q) {
      const __m256 pv = _mm256_broadcast_ss(p + q * p_stride + t);
      for (int j = 0; j < E; ++j) acc[q][j] = _mm256_fmadd_ps(pv, kv[j], acc[q][j]);
    }
  }
  for (int q = 0; q < Q; ++q) {
    for (int j = 0; j < E; ++j) {
      float* o = out + q * out_stride + e + 8 * j;
      if (Tail && j == E - 1) _mm256_maskstore_ps(o, tail, acc[q][j]);
      else _mm256_storeu_ps(o, acc[q][j]);
    }
  }
}

template <int E, bool Tail, class K>
inline void QueryBlocks(const float* p, int64_t p_stride, int64_t queries, const K* const* keys, int64_t t0,
                        int64_t t1, int64_t e, int64_t rest, float* out, int64_t out_stride, bool from_out) {
  int64_t q = 0;
  for (; q + kQueryBlock <= queries; q += kQueryBlock)
    WeightedBlock<kQueryBlock, E, Tail>(p + q * p_stride, p_stride, keys, t0, t1, e, rest, out + q * out_stride,
                                        out_stride, from_out);
  for (; q < queries; ++q)
    WeightedBlock<1, E, Tail>(p + q * p_stride, p_stride, keys, t0, t1, e, rest, out + q * out_stride, out_stride,
                              from_out);
}

template <class K>
void WeightedKeySumAvx2T(const float* p, int64_t p_stride, int64_t queries, const K* const* keys, int64_t num_keys,
                         int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  if (num_keys == 0) {
    if (!accumulate)
      for (int64_t q = 0; q < queries; ++q)
        for (int64_t e = 0; e < dim; ++e) out[q * out_stride + e] = 0.0f;
    return;
  }
  for (int64_t t0 = 0; t0 < num_keys; t0 += kKeyBlock) {
    const int64_t t1 = t0 + kKeyBlock < num_keys ? t0 + kKeyBlock : num_keys;
    const bool from_out = accumulate || t0 > 0;
    int64_t e = 0;
    for (; e + 8 * kDimVectors <= dim; e += 8 * kDimVectors)
      QueryBlocks<kDimVectors, false>(p, p_stride, queries, keys, t0, t1, e, 8, out, out_stride, from_out);
    for (; e + 8 <= dim; e += 8) QueryBlocks<1, false>(p, p_stride, queries, keys, t0, t1, e, 8, out, out_stride, from_out);
    if (e < dim) QueryBlocks<1, true>(p, p_stride, queries, keys, t0, t1, e, dim - e, out, out_stride, from_out);
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
void WeightedKeySumAvx2(const float* p, int64_t p_stride, int64_t queries, const float* const* keys,
                        int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  WeightedKeySumAvx2T(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
}
void WeightedKeySumBf16Avx2(const float* p, int64_t p_stride, int64_t queries, const uint16_t* const* keys,
                            int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  WeightedKeySumAvx2T(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
}

}  // namespace deepinfer::kernels::attention_impl
