// The parts of a transformer block both DeepSeek families bind alike: the mHC sites with their norms, the
// low-rank attention projections with grouped output and sinks, and the routed and shared experts. Each
// family's block weights extend these with what differs (compressors, indexers, routers, Engram).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/linear.h"
#include "model/common/checkpoint_binder.h"
#include "model/common/hyper_connection.h"
#include "model/common/moe.h"

namespace deepinfer::model {

// The attention input and FFN input sites: `prefix`attn_norm, ffn_norm, hc_attn_*, hc_ffn_*.
struct BlockSiteWeights {
  std::vector<float> attn_norm, ffn_norm;
  HyperConnectionWeights attn_hc, ffn_hc;
};

// Low-rank queries, the shared K=V latent projection, the grouped output projection and the sinks.
struct AttentionProjections {
  kernels::WeightView wq_a, wq_b, wkv, wo_b;
  std::vector<kernels::WeightView> wo_a_groups;  // one [o_lora_rank, heads·head_dim / o_groups] view per group
  std::vector<float> q_norm, kv_norm, sink;
};

// The sizes the shared parts are bound with, from a family's config.
struct BlockShape {
  int64_t hidden = 0, hc = 0, heads = 0, head_dim = 0;
  int64_t q_lora_rank = 0, o_groups = 0, o_lora_rank = 0;
  int64_t moe_intermediate = 0;
  template <class Config>
  static BlockShape Of(const Config& c) {
    return {c.hidden_size, c.hc_mult, c.num_heads, c.head_dim, c.q_lora_rank, c.o_groups, c.o_lora_rank,
            c.moe_intermediate_size};
  }
};

// `p` is the block's prefix ("layers.3."); attention under `p`attn., experts under `p`ffn.
Status BindBlockSites(const CheckpointBinder& b, const BlockShape& s, const std::string& p, BlockSiteWeights* out);
Status BindAttentionProjections(const CheckpointBinder& b, const BlockShape& s, const std::string& p,
                                AttentionProjections* out);
Status BindExpertSet(const CheckpointBinder& b, const BlockShape& s, const std::string& p, int64_t experts,
                     ExpertSetWeights* out);

}  // namespace deepinfer::model
