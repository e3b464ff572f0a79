// The typed DeepSeek-V4 configuration (model_type "deepseek_v4"), read from a Hugging Face config.json in
// either spelling: the released one (compress_ratios, num_hash_layers, qk_rope_head_dim, rope_scaling) or
// the one transformers writes (layer_types, mlp_layer_types, partial_rotary_factor, rope_parameters).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/hf_config.h"
#include "core/status.h"
#include "model/common/config.h"
#include "model/common/rotary.h"

namespace deepinfer::model {

enum class V4AttentionType {
  kSliding,  // window only (compress ratio 0)
  kCsa,      // window + overlapping compressor + lightning indexer top-k
  kHca,      // window + non-overlapping compressor, every entry visible
};

enum class V4RouterType { kHash, kScore };

struct V4Config : DeepSeekConfig {
  std::vector<V4AttentionType> attention_types;  // per layer
  std::vector<int64_t> compress_ratios;          // per layer: 0, the CSA rate or the HCA rate
  std::vector<V4RouterType> router_types;        // per layer

  int64_t num_mtp_layers = 0;
  V4AttentionType mtp_attention_type = V4AttentionType::kSliding;
  int64_t mtp_compress_ratio = 0;

  static Result<V4Config> FromHf(const HfConfig& hf);
};

const char* V4AttentionTypeName(V4AttentionType type);

}  // namespace deepinfer::model
