// The typed DeepSeek-V4 configuration (model_type "deepseek_v4"), read from a Hugging Face config.json in
// either spelling: the released one (compress_ratios, num_hash_layers, qk_rope_head_dim, rope_scaling) or
// the one transformers writes (layer_types, mlp_layer_types, partial_rotary_factor, rope_parameters).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/hf_config.h"
#include "core/status.h"
#include "model/common/rotary.h"

namespace deepinfer::model {

enum class V4AttentionType {
  kSliding,  // window only (compress ratio 0)
  kCsa,      // window + overlapping compressor + lightning indexer top-k
  kHca,      // window + non-overlapping compressor, every entry visible
};

enum class V4RouterType { kHash, kScore };

struct V4Config {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;  // trailing channels of every head (and indexer head) that are rotated
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;

  int64_t n_routed_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  std::string scoring_func;  // "sqrtsoftplus" or "sigmoid"
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0;  // <= 0: no clamp

  int64_t sliding_window = 0;
  std::vector<V4AttentionType> attention_types;  // per layer
  std::vector<int64_t> compress_ratios;          // per layer: 0, the CSA rate or the HCA rate
  std::vector<V4RouterType> router_types;        // per layer
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;

  int64_t hc_mult = 0;
  int64_t hc_sinkhorn_iters = 0;
  double hc_eps = 0;
  double rms_norm_eps = 0;

  RopeParams main_rope;      // sliding-window layers
  RopeParams compress_rope;  // CSA/HCA layers, their compressors and indexers

  int64_t num_mtp_layers = 0;
  V4AttentionType mtp_attention_type = V4AttentionType::kSliding;
  int64_t mtp_compress_ratio = 0;

  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;                // the first of eos_token_ids
  std::vector<int64_t> eos_token_ids = {1};  // config.json's eos_token_id, a number or a list
  int64_t max_position_embeddings = 0;     // 0 when config.json does not say

  static Result<V4Config> FromHf(const HfConfig& hf);
};

const char* V4AttentionTypeName(V4AttentionType type);

}  // namespace deepinfer::model
