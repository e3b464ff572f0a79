// Attention building blocks over gathered fp32 key vectors (K = V, one vector shared by all query heads, as in
// DeepSeek-V4's single-latent MQA), in a fixed reduction order that is the same on every ISA:
//   * a dot product sums in 16 lanes (lane j takes k ≡ j mod 16, increasing k, fused multiply-add from +0),
//     then adds the lanes by halving (j + j+8, then j+4, j+2, j+1) — the order of kernels::Linear;
//   * a weighted sum of keys accumulates each output element over keys in increasing order with FMA from +0.
// So results are bit-identical across AVX-512, AVX2 and scalar, and depend only on the row's own data.
// Keys may also be stored as bfloat16 (KV storage in bf16): each is widened to fp32 exactly, so a bf16
// call gives the bits of the fp32 call on the widened keys.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace deepinfer::kernels {

float DotF32(const float* a, const float* b, int64_t n);

// out[h · num_keys + t] = DotF32(q + h·dim, keys[t], dim) · scale, for h < heads, t < num_keys.
void QueryKeyDots(const float* q, int64_t heads, int64_t dim, const float* const* keys, int64_t num_keys, float scale,
                  float* out);

// The dots for many query vectors at once (e.g. all heads of several rows that share their keys), with strides:
// out[i · out_stride + t] = DotF32(q + i·q_stride, keys[t], dim) · scale for i < queries, t < num_keys, each
// the bits of the one-query dot. The work is register-blocked over queries and keys and reads each key where it
// lies (no copy), so a block of keys is loaded once per block of queries.
void QueryKeyDotsRows(const float* q, int64_t q_stride, int64_t queries, const float* const* keys, int64_t num_keys,
                      int64_t dim, float scale, float* out, int64_t out_stride);

// out[h · dim + e] = Σ_t p[h · num_keys + t] · keys[t][e], t increasing, for h < heads.
void WeightedKeySum(const float* p, int64_t heads, const float* const* keys, int64_t num_keys, int64_t dim,
                    float* out);

// The weighted sum for many query vectors at once (e.g. all heads of several rows that share their keys), with
// strides: out[q · out_stride + e] = Σ_t p[q · p_stride + t] · keys[t][e] for q < queries, in the order above.
// With `accumulate` each element's chain of fused multiply-adds starts from the value already in out instead
// of +0, so summing keys [0, a) and then, accumulating, keys [a, b) gives the bits of one sum over [0, b): a
// causal tile sums the keys all its rows see once for all of them, then each later key for the rows that see
// it, and every row gets the bits of its own single-row sum. The work is register-blocked over queries and
// output dims, so each key is read once per block of queries rather than once per query.
void WeightedKeySumRows(const float* p, int64_t p_stride, int64_t queries, const float* const* keys,
                        int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate);

// The same with bfloat16 keys.
void QueryKeyDots(const float* q, int64_t heads, int64_t dim, const uint16_t* const* keys, int64_t num_keys,
                  float scale, float* out);
void WeightedKeySum(const float* p, int64_t heads, const uint16_t* const* keys, int64_t num_keys, int64_t dim,
                    float* out);
void WeightedKeySumRows(const float* p, int64_t p_stride, int64_t queries, const uint16_t* const* keys,
                        int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate);
void QueryKeyDotsRows(const float* q, int64_t q_stride, int64_t queries, const uint16_t* const* keys,
                      int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride);

// The same on a given ISA (tests compare them); the caller checks IsaSupported(isa).
float DotF32WithIsa(Isa isa, const float* a, const float* b, int64_t n);
void QueryKeyDotsWithIsa(Isa isa, const float* q, int64_t heads, int64_t dim, const float* const* keys,
                         int64_t num_keys, float scale, float* out);
void WeightedKeySumWithIsa(Isa isa, const float* p, int64_t heads, const float* const* keys, int64_t num_keys,
                           int64_t dim, float* out);
void QueryKeyDotsWithIsa(Isa isa, const float* q, int64_t heads, int64_t dim, const uint16_t* const* keys,
                         int64_t num_keys, float scale, float* out);
void WeightedKeySumWithIsa(Isa isa, const float* p, int64_t heads, const uint16_t* const* keys, int64_t num_keys,
                           int64_t dim, float* out);
void WeightedKeySumRowsWithIsa(Isa isa, const float* p, int64_t p_stride, int64_t queries, const float* const* keys,
                               int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate);
void WeightedKeySumRowsWithIsa(Isa isa, const float* p, int64_t p_stride, int64_t queries,
                               const uint16_t* const* keys, int64_t num_keys, int64_t dim, float* out,
                               int64_t out_stride, bool accumulate);
void QueryKeyDotsRowsWithIsa(Isa isa, const float* q, int64_t q_stride, int64_t queries, const float* const* keys,
                             int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride);
void QueryKeyDotsRowsWithIsa(Isa isa, const float* q, int64_t q_stride, int64_t queries, const uint16_t* const* keys,
                             int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride);

}  // namespace deepinfer::kernels
