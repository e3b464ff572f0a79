// The config fields both DeepSeek families read the same way and mean the same thing: sizes, routing
// constants, mHC constants, RoPE tables and special tokens. Each family's config extends this with its own
// layer plan and parses config.json its own way (V4 flat, V4.1 under text_config).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/hf_config.h"
#include "model/common/rotary.h"

namespace deepinfer::model {

struct DeepSeekConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;  // trailing channels of every head (and indexer head) that are rotated
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  int64_t sliding_window = 0;
  int64_t max_position_embeddings = 0;  // 0 when config.json does not say (V4)

  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;

  int64_t n_routed_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  std::string scoring_func;  // "sqrtsoftplus" or "sigmoid"
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0;  // <= 0: no clamp

  int64_t hc_mult = 0;
  int64_t hc_sinkhorn_iters = 0;
  double hc_eps = 0;
  double rms_norm_eps = 0;

  RopeParams main_rope;      // window-only layers
  RopeParams compress_rope;  // layers with a compressed branch, their compressors and indexers

  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;                  // the first of eos_token_ids
  std::vector<int64_t> eos_token_ids = {1};  // config.json's eos_token_id, a number or a list
};

// config.json's rope_parameters when it nests the two tables as {"main", "compress"} (transformers'
// spelling), else null (the flat rope_theta / compress_rope_theta / rope_scaling keys apply).
const nlohmann::json* NestedRopeParameters(const HfConfig& hf);

}  // namespace deepinfer::model
