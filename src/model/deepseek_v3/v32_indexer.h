// DeepSeek-V3.2's lightning indexer (DSA): per layer, a cheap score of every earlier position for each query,
// of which MLA attends only the index_topk best.
//
//   q = wq_b(query latent) → index_n_heads heads of index_head_dim, split rope channels first, then the rest;
//   k = LayerNorm(wk(x)) (eps 1e-6), split the same way; RoPE on the rope channels of both in the half-split
//   layout (MLA's own rope is interleaved), with MLA's YaRN table and attention factor;
//   q and k go through the Hadamard transform (orthogonal, scale index_head_dim^-0.5), then FP8 E4M3 with one
//   scale per block of min(128, index_head_dim) values: s = max(amax, 1e-4) · fl(1/448), rounded up to a power of
//   two with scale_fmt "ue8m0", codes = E4M3(x / s) rounded to nearest even and saturated at ±448;
//   w_h = weights_proj(x)_h · index_n_heads^-0.5 · index_head_dim^-0.5;
//   score(t) = Σ_h relu(q_h · k_t) · w_h over t ≤ the query's position, and the top min(index_topk, pos + 1).
//
// The keys are what the cache keeps (a per-layer entry of FP8 codes and fp32 scales, the "index" group); the
// queries are quantized and dequantized on the spot. This is DeepSeek's released inference; transformers'
// deepseek_v32 leaves out the Hadamard transform and the FP8 rounding (the transform alone changes nothing but
// rounding: Hq · Hk = q · k), so the fixtures' reference adds the same rounding (tools/model/gen_v3_fixtures.py).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/linear.h"
#include "model/deepseek_v3/v3_config.h"
#include "model/deepseek_v3/v3_weights.h"

namespace deepinfer::model::v32 {

// Values per FP8 scale.
int64_t IndexQuantBlock(const V3Config& c);
// Bytes of one position's cached key: index_head_dim codes, then one fp32 scale per block.
int64_t IndexKeyBytes(const V3Config& c);

// x[0..n) ← H x · n^-0.5 with H the Sylvester (natural order) Hadamard matrix; n a power of two.
void HadamardRotate(float* x, int64_t n);

// One vector of n values in blocks of `block` to codes [n] and scales [n / block], and back.
void QuantizeFp8(const float* x, int64_t n, int64_t block, bool pow2_scales, uint8_t* codes, float* scales);
void DequantizeFp8(const uint8_t* codes, const float* scales, int64_t n, int64_t block, float* out);

// The indexer's projections for n rows: x [n, hidden] (the attention input), q_latent [n, q_lora_rank] (after
// q_a_layernorm), cos / sin [n, rope_dim / 2] (each row's angles, attention factor included).
struct IndexerRows {
  std::vector<float> queries;  // [n, heads, dim], dequantized
  std::vector<uint8_t> keys;   // [n, IndexKeyBytes]: the cache entries
  std::vector<float> weights;  // [n, heads]: w_h
};
void ProjectIndexer(const V3Config& c, const V32IndexerWeights& w, const float* x, const float* q_latent, int64_t n,
                    const float* cos, const float* sin, const kernels::LinearOptions* linear, ThreadPool* pool,
                    IndexerRows* out);

// Position t's cached key as fp32 (codes × their block's scale) into out[0..index_head_dim).
void DequantizeKey(const V3Config& c, const uint8_t* entry, float* out);

// The positions (ascending) one query at `pos` attends: every one up to pos while there are at most index_topk,
// else the index_topk best scores (kernels::TopK: ties to the earlier position). keys: the dequantized keys of
// positions [0, pos] ([pos + 1, index_head_dim]). The scores are one kernels::Linear of the query's heads over
// exactly those keys, so a row's selection does not depend on how its sequence was chunked.
struct SelectScratch {
  std::vector<float> dots, scores;
  std::vector<int32_t> top;
};
void SelectPositions(const V3Config& c, const float* query, const float* weights, int64_t pos, const float* keys,
                     SelectScratch& s, std::vector<int64_t>* selected);

}  // namespace deepinfer::model::v32
