// DeepSeek-V4 weights, bound in place to a memory-mapped checkpoint under DeepSeek's released tensor names
// (`layers.{i}.attn.wq_a.weight`, `layers.{i}.ffn.experts.{e}.w1.weight`, `mtp.0.e_proj.weight`, ...).
// Matrices stay in their stored format (F32, BF16, FP8 with block scales, MXFP4); the small fp32
// parameters (norms, mHC, sinks, gate bias, ape) are copied into fp32 vectors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "core/status.h"
#include "kernels/linear.h"
#include "model/common/block_weights.h"
#include "model/common/checkpoint_binder.h"
#include "model/common/hyper_connection.h"
#include "model/common/moe.h"
#include "model/deepseek_v4/v4_config.h"

namespace deepinfer::model {

using kernels::WeightView;

struct V4CompressorWeights {
  int64_t ratio = 0;
  int64_t head_dim = 0;
  bool overlapping = false;   // CSA: two series of head_dim (coff = 2)
  WeightView wkv, wgate;      // [coff · head_dim, hidden]
  std::vector<float> ape;     // [ratio, coff · head_dim]
  std::vector<float> norm;    // [head_dim]
};

struct V4IndexerWeights {
  WeightView wq_b;          // [index_heads · index_head_dim, q_lora_rank]
  WeightView weights_proj;  // [index_heads, hidden]
  V4CompressorWeights compressor;
};

struct V4AttentionWeights : AttentionProjections {
  std::unique_ptr<V4CompressorWeights> compressor;  // CSA and HCA
  std::unique_ptr<V4IndexerWeights> indexer;        // CSA
};

struct V4MoeWeights : ExpertSetWeights {
  std::vector<float> gate_bias;     // score routing: selection bias [experts]
  std::vector<int32_t> tid2eid;     // hash routing: [vocab, experts_per_tok]
};

struct V4BlockWeights : BlockSiteWeights {
  V4AttentionWeights attention;
  V4MoeWeights moe;
};

struct V4MtpWeights {
  V4BlockWeights block;
  WeightView e_proj, h_proj;
  std::vector<float> enorm, hnorm, norm;
  HyperConnectionWeights hc_head;
};

struct V4Weights {
  const TensorInfo* embed = nullptr;  // [vocab, hidden], F32 or BF16
  WeightView head;                    // [vocab, hidden]
  std::vector<float> norm;
  HyperConnectionWeights hc_head;
  std::vector<V4BlockWeights> layers;
  std::vector<V4MtpWeights> mtp;  // num_nextn_predict_layers entries (when present in the checkpoint)
};

// Binds every tensor the config calls for; a missing, mis-typed or mis-shaped tensor is an error naming it.
// `checkpoint` must outlive the result.
Result<std::unique_ptr<V4Weights>> LoadV4Weights(const Checkpoint& checkpoint, const V4Config& config);

}  // namespace deepinfer::model
