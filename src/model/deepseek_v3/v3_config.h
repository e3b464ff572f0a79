// DeepSeek-V3 / R1 / V3.1 config (model_type "deepseek_v3", DeepseekV3ForCausalLM) as config.json spells it
// in the released checkpoints and transformers' DeepseekV3Config reads it: multi-head latent attention
// (MLA) with an optional low-rank query, YaRN RoPE on the interleaved rope channels with the mscale folded
// into the softmax scale, dense first layers, then MoE layers with grouped sigmoid routing.
//
// DeepSeek-V3.2 (model_type "deepseek_v32", DeepseekV32ForCausalLM) is the same plus the lightning indexer
// in every layer (DeepSeekConfig's index_n_heads, index_head_dim, index_topk): it needs the low-rank query
// (the indexer reads its latent), an index_head_dim that is a power of two (the Hadamard transform) holding
// the rope channels, and index_topk ≥ 1.
//
// Every size is bounded (hidden ≤ 65536, layers ≤ 1024, heads ≤ 1024, kv_lora_rank ≤ 4096, q_lora_rank ≤ 16384,
// per-head dims ≤ 1024, experts ≤ 4096, vocabulary ≤ 2^24); impossible MLA or routing shapes (an odd rope
// dim, qk_rope_head_dim above head_dim, topk_group above n_group, experts not divisible by n_group, more
// experts per token than the kept groups hold) are one error naming the key.
#pragma once

#include "core/hf_config.h"
#include "core/status.h"
#include "model/common/config.h"

namespace deepinfer::model {

struct V3Config : DeepSeekConfig {
  // DeepSeekConfig's head_dim is the query/key head (qk_nope_head_dim + qk_rope_head_dim), rope_dim the
  // rotated part, q_lora_rank 0 when config.json has null (a direct q_proj), hc_mult 1 (one residual
  // stream), scoring_func "sigmoid".
  int64_t qk_nope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t kv_lora_rank = 0;
  int64_t intermediate_size = 0;  // the dense layers' SwiGLU
  int64_t n_shared_experts = 0;
  int64_t first_k_dense_replace = 0;  // layers [0, first_k_dense_replace) are dense, the rest MoE
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = true;
  bool tie_word_embeddings = false;
  int64_t num_mtp_layers = 0;  // num_nextn_predict_layers: MTP layers after the main ones (the first drafts)
  RopeParams rope;
  float rope_attention_factor = 1.0f;  // multiplies RoPE's cos and sin (YaRN's attention factor)
  float softmax_scale = 0;             // head_dim^-0.5, times mscale² under YaRN with mscale_all_dim
  // V3.2's indexer keys and queries: power-of-two FP8 scales (quantization_config.scale_fmt "ue8m0") or
  // fp32 ones (amax / 448).
  bool index_pow2_scales = false;

  bool has_indexer() const { return index_topk > 0; }

  // The latent cache entry of one position and layer: the normalised latent, then the rotated rope key.
  int64_t latent_width() const { return kv_lora_rank + rope_dim; }
  bool is_moe_layer(int64_t layer) const { return layer >= first_k_dense_replace; }

  static Result<V3Config> FromHf(const HfConfig& hf);
};

}  // namespace deepinfer::model
