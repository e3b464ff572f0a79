// DeepSeek-V3 and V3.2 weights bound in place from a Hugging Face checkpoint under transformers' names
// (model.embed_tokens, model.layers.N.self_attn.*, model.layers.N.mlp.*, model.norm, lm_head), F32, BF16 or
// FP8 E4M3 blocks with `weight_scale_inv`. kv_b_proj is also split per head into the absorbed form's two
// factors (see v3_model.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/safetensors.h"
#include "core/status.h"
#include "kernels/linear.h"
#include "model/common/moe.h"
#include "model/deepseek_v3/v3_config.h"

namespace deepinfer::model {

// V3.2's lightning indexer (self_attn.indexer.*): its query from the attention's query latent, one key
// per position from the layer input, and per-head weights.
struct V32IndexerWeights {
  kernels::WeightView wq_b;          // [index_n_heads · index_head_dim, q_lora_rank]
  kernels::WeightView wk;            // [index_head_dim, hidden]
  std::vector<float> k_norm, k_norm_bias;  // LayerNorm [index_head_dim]
  kernels::WeightView weights_proj;  // [index_n_heads, hidden]
};

struct V3AttentionWeights {
  kernels::WeightView q_proj;  // [heads · head_dim, hidden] when q_lora_rank is 0
  kernels::WeightView q_a, q_b;  // [q_lora_rank, hidden], [heads · head_dim, q_lora_rank]
  std::vector<float> q_a_norm;
  kernels::WeightView kv_a;  // [kv_lora_rank + rope_dim, hidden]
  std::vector<float> kv_a_norm;
  // kv_b_proj [heads · (nope + v), kv_lora_rank] as the absorbed form uses it, per head:
  //   uk_t: [kv_lora_rank, nope] (W_UKᵀ: the latent-space query is q_nope · W_UK), a transposed copy (BF16
  //         for a BF16 checkpoint, else fp32)
  //   uv:   [v, kv_lora_rank] (W_UV: the head's output from its latent-space output), rows of the stored
  //         matrix (an fp32 copy only where FP8 blocks do not start on a head's rows)
  std::vector<float> uk_t_values, uv_values;
  std::vector<uint16_t> uk_t_bf16;
  std::vector<kernels::WeightView> uk_t, uv;
  kernels::WeightView o_proj;  // [hidden, heads · v]
  std::unique_ptr<V32IndexerWeights> indexer;  // V3.2
};

struct V3LayerWeights {
  std::vector<float> input_norm, post_attention_norm;
  V3AttentionWeights attention;
  bool moe = false;
  ExpertWeights dense;           // dense layers: the SwiGLU MLP (w1 gate, w3 up, w2 down)
  ExpertSetWeights experts;      // MoE layers: router gate, routed experts, shared experts
  std::vector<float> gate_bias;  // e_score_correction_bias [n_routed_experts]
};

// The multi-token prediction layer (model.layers.{num_hidden_layers}.*): x = eh_proj([enorm(embedding of
// the next token); hnorm(main model's last hidden state)]), one decoder layer, then shared_head.norm and
// the main model's head.
struct V3MtpWeights {
  std::vector<float> enorm, hnorm, head_norm;
  kernels::WeightView eh_proj;  // [hidden, 2 · hidden]
  V3LayerWeights layer;
};

struct V3Weights {
  const TensorInfo* embed = nullptr;  // [vocab, hidden]
  std::vector<V3LayerWeights> layers;
  std::vector<V3MtpWeights> mtp;  // the first MTP layer when loaded for drafting
  std::vector<float> norm;
  kernels::WeightView head;  // [vocab, hidden] (the embedding when tied)
};

// FP8 block shape from quantization_config.weight_block_size (128×128 when absent).
// With `mtp`, also the first MTP layer (an error when the config or the checkpoint has none).
Result<std::unique_ptr<V3Weights>> LoadV3Weights(const Checkpoint& checkpoint, const V3Config& c, int64_t fp8_block_out,
                                                 int64_t fp8_block_in, bool mtp, ThreadPool& pool);

}  // namespace deepinfer::model
