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

// Lanes 0..7 (Half 0) or 8..15 (Half 1) of the 16-lane dots of Q queries with T keys: lane j takes the
// elements k ≡ j (mod 16) in increasing k with FMA from +0, exactly as DotLanes' `lo` or `hi`. The two halves are
// independent chains, so running them one after the other instead of side by side changes no bits, and it
// halves the accumulators a tile needs: Q·T of them, each key vector loaded once for the Q queries and each
// query vector once for the T keys.
template <int Half, int Q, int T, class K>
inline void HalfDots(const float* const* q, const K* const* key, int64_t dim, __m256 (&acc)[Q][T]) {
  for (int i = 0; i < Q; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
  int64_t k = 8 * Half;
  for (; k - 8 * Half + 16 <= dim; k += 16) {  // while the 16-element chunk at k - 8·Half is whole
    __m256 kv[T];
    for (int t = 0; t < T; ++t) kv[t] = Load8(key[t] + k);
    for (int i = 0; i < Q; ++i) {
      const __m256 qv = _mm256_loadu_ps(q[i] + k);
      for (int t = 0; t < T; ++t) acc[i][t] = _mm256_fmadd_ps(qv, kv[t], acc[i][t]);
    }
  }
  // The last, partial chunk (DotLanes' masked step): this half's lanes that fall before dim, none past it.
  const int64_t chunk = k - 8 * Half;
  if (chunk < dim) {
    const int64_t rest = dim - chunk, n = Half == 0 ? (rest < 8 ? rest : 8) : (rest > 8 ? rest - 8 : 0);
    const __m256i mask = TailMask(n);
    __m256 kv[T];
    for (int t = 0; t < T; ++t) kv[t] = Load8(key[t] + k, n);
    for (int i = 0; i < Q; ++i) {
      const __m256 qv = _mm256_maskload_ps(q[i] + k, mask);
      for (int t = 0; t < T; ++t) acc[i][t] = _mm256_fmadd_ps(qv, kv[t], acc[i][t]);
    }
  }
}

// The last two halvings of four dots at once: given each dot's lanes j + j+8 + … already folded to four
// (lane j + lane j+4), lane i of the result is (a_i0 + a_i2) + (a_i1 + a_i3), the order of DotLanes.
inline __m128 FinishFour(__m128 a, __m128 b, __m128 c, __m128 d) {
  _MM_TRANSPOSE4_PS(a, b, c, d);
  return _mm_add_ps(_mm_add_ps(a, c), _mm_add_ps(b, d));
}

inline __m128 FoldToFour(__m256 lo, __m256 hi) {  // lane j + j+8, then j + j+4
  const __m256 s = _mm256_add_ps(lo, hi);
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// A tile of Q ≤ 4 queries × T keys: out[i · out_stride + t] = dot · scale.
template <int Q, int T, class K>
inline void DotsTile(const float* const* q, const K* const* key, int64_t dim, float scale, float* out,
                     int64_t out_stride) {
  __m256 lo[Q][T], hi[Q][T];
  HalfDots<0, Q, T>(q, key, dim, lo);
  HalfDots<1, Q, T>(q, key, dim, hi);
  const __m128 zero = _mm_setzero_ps(), s = _mm_set1_ps(scale);
  for (int t = 0; t < T; ++t) {
    __m128 four[4];
    for (int i = 0; i < 4; ++i) four[i] = i < Q ? FoldToFour(lo[i][t], hi[i][t]) : zero;
    alignas(16) float dots[4];
    _mm_store_ps(dots, _mm_mul_ps(FinishFour(four[0], four[1], four[2], four[3]), s));
    for (int i = 0; i < Q; ++i) out[i * out_stride + t] = dots[i];
  }
}

// Keys [t0, t1) for one block of Q queries: three keys a tile, then the one or two left.
template <int Q, class K>
inline void KeyTiles(const float* const* rows, const K* const* keys, int64_t t0, int64_t t1, int64_t dim,
                     float scale, float* out, int64_t out_stride) {
  int64_t t = t0;
  for (; t + 3 <= t1; t += 3) DotsTile<Q, 3>(rows, keys + t, dim, scale, out + t, out_stride);
  if (t1 - t == 2) DotsTile<Q, 2>(rows, keys + t, dim, scale, out + t, out_stride);
  else if (t1 - t == 1) DotsTile<Q, 1>(rows, keys + t, dim, scale, out + t, out_stride);
}

// Keys a chunk of about 16 KiB at a time, outermost: the chunk stays in L1 while every block of four queries
// goes by, and each block of queries is read from L2 once per chunk rather than once per tile of keys.
// 4 queries × 3 keys is 12 accumulators, 3 key vectors and a query vector: all sixteen registers, 12 FMAs for
// 7 loads.
template <class K>
void QueryKeyDotsAvx2T(const float* q, int64_t q_stride, int64_t queries, const K* const* keys, int64_t num_keys,
                       int64_t dim, float scale, float* out, int64_t out_stride) {
  const int64_t key_bytes = (dim > 0 ? dim : 1) * static_cast<int64_t>(sizeof(K));
  const int64_t per_chunk = int64_t{16} * 1024 / key_bytes / 3 * 3;
  const int64_t chunk = per_chunk > 3 ? per_chunk : 3;
  for (int64_t t0 = 0; t0 < num_keys; t0 += chunk) {
    const int64_t t1 = t0 + chunk < num_keys ? t0 + chunk : num_keys;
    for (int64_t i = 0; i < queries; i += 4) {
      const float* rows[4];
      const int64_t block = queries - i < 4 ? queries - i : 4;
      for (int r = 0; r < block; ++r) rows[r] = q + (i + r) * q_stride;
      float* o = out + i * out_stride;
      switch (block) {
        case 4: KeyTiles<4>(rows, keys, t0, t1, dim, scale, o, out_stride); break;
        case 3: KeyTiles<3>(rows, keys, t0, t1, dim, scale, o, out_stride); break;
        case 2: KeyTiles<2>(rows, keys, t0, t1, dim, scale, o, out_stride); break;
        default: KeyTiles<1>(rows, keys, t0, t1, dim, scale, o, out_stride); break;
      }
    }
  }
}

// Keys are taken kKeyBlock at a time, so that the slice of them a block of output dims reads stays in L1
// while every block of queries goes by; between key blocks the accumulators rest in `out`, which changes no
// bits (a stored fp32 is the register's value).
constexpr int64_t kKeyBlock = 64;
constexpr int kQueryBlock = 4;  // queries × kDimVectors vectors of 8 dims: 12 accumulators
constexpr int kDimVectors = 3;

// Q queries × E vectors of 8 output dims from e on (with Tail, the last vector holds only `rest` dims), over
// keys [t0, t1), t1 > t0: each accumulator stays in a register while the keys go by, each key vector is loaded once
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
  // A do-while (the caller gives at least one key): with a loop that might not run, GCC keeps every
  // accumulator's home on the stack and stores all of them on each key.
  int64_t t = t0;
  do {
    const K* k = keys[t] + e;
    __m256 kv[E];
    for (int j = 0; j < E; ++j) kv[j] = Tail && j == E - 1 ? Load8(k + 8 * j, rest) : Load8(k + 8 * j);
    for (int q = 0; q < Q; ++q) {
      const __m256 pv = _mm256_broadcast_ss(p + q * p_stride + t);
      for (int j = 0; j < E; ++j) acc[q][j] = _mm256_fmadd_ps(pv, kv[j], acc[q][j]);
    }
  } while (++t < t1);
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

void QueryKeyDotsAvx2(const float* q, int64_t q_stride, int64_t queries, const float* const* keys, int64_t num_keys,
                      int64_t dim, float scale, float* out, int64_t out_stride) {
  QueryKeyDotsAvx2T(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
}
void QueryKeyDotsBf16Avx2(const float* q, int64_t q_stride, int64_t queries, const uint16_t* const* keys,
                          int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride) {
  QueryKeyDotsAvx2T(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
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
