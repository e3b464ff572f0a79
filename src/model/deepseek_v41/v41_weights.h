// DeepSeek-V4.1 weights, bound in place to a memory-mapped checkpoint under the released tensor names
// (`layers.{i}.attn.compressor.wkv.weight`, `layers.{i}.engram.embed.weight`, ...). Matrices stay in their
// stored format: F32, BF16, FP8 E4M3 with UE8M0 block scales (32×32 in the release; the block shape comes
// from quantization_config or the scale tensor's shape), packed FP4 E2M1 experts with a UE8M0 scale per 32
// inputs. Engram tables (about 98 GB each in the release) are only ever addressed row by row in the
// mapping. Small fp32 parameters (norms, mHC, sinks, gate biases) are copied into vectors.
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
#include "model/deepseek_v41/v41_config.h"

namespace deepinfer::model {

using kernels::WeightView;

struct V41CompressorWeights {
  int64_t ratio = 0;
  WeightView wkv;              // [head_dim, hidden]
  WeightView wgate;            // [head_dim, hidden], ratio > 1 only (pooling gate)
  std::vector<float> norm;     // [head_dim]
};

struct V41IndexerWeights {
  WeightView wq_b;            // [index_heads · index_head_dim, q_lora_rank]
  WeightView weights_proj;    // [index_heads, hidden]
  WeightView wk;              // [index_head_dim, head_dim], KV sources only (keys from the latent)
  std::vector<float> k_norm;  // [index_head_dim], KV sources only
};

struct V41AttentionWeights : AttentionProjections {
  std::unique_ptr<V41CompressorWeights> compressor;  // KV sources
  std::unique_ptr<V41IndexerWeights> indexer;        // index sources
};

struct V41MoeWeights : ExpertSetWeights {
  std::vector<float> bias;       // selection bias [experts]
  std::vector<float> bias_vl;    // selection bias of image-span tokens (unused by the text model)
};

// An Engram hash table: rows of head_dim values, F32/BF16, or FP8 E4M3 with one UE8M0 scale per 32.
struct V41EngramTable {
  const TensorInfo* weight = nullptr;
  const TensorInfo* scale = nullptr;  // FP8 only: [rows, head_dim / 32]
  int64_t rows = 0, head_dim = 0;
  // The row as fp32 (exact: E4M3 · 2^k, or the BF16 value).
  void Row(int64_t row, float* out) const;
  // Bytes one row lookup reads.
  int64_t row_bytes() const;
};

struct V41EngramWeights {
  V41EngramTable table;
  WeightView wkv;              // [(hc + 1) · hidden, columns · head_dim]
  std::vector<float> weight;   // [hc, hidden]: q_weight · k_weight (only ever used as the product)
};

struct V41BlockWeights : BlockSiteWeights {
  V41AttentionWeights attention;
  V41MoeWeights moe;
  std::unique_ptr<V41EngramWeights> engram;
};

// DSpark draft layers (`mtp.*`; the reference does not implement them, so the layout follows models.md §3.7
// and §4): the context projection of the target layers' attention inputs, window-only MoE blocks with mHC,
// the final norm (the target's embedding and head are shared), the Markov head and the confidence head.
struct V41DsparkWeights {
  WeightView main_proj;              // [hidden, targets · hidden]
  std::vector<float> main_norm;      // [hidden]
  std::vector<V41BlockWeights> layers;
  std::vector<float> norm;           // [hidden]
  const TensorInfo* markov_embed = nullptr;  // [vocab, markov_rank]: W1, an embedding
  WeightView markov_head;                    // [vocab, markov_rank]: W2ᵀ
  std::vector<float> confidence;             // [hidden + markov_rank]
};

struct V41Weights {
  const TensorInfo* embed = nullptr;  // [vocab, hidden], F32 or BF16
  WeightView head;                    // [vocab, hidden]
  std::vector<float> norm;
  std::vector<V41BlockWeights> layers;
  std::unique_ptr<V41DsparkWeights> dspark;  // loaded only with LoadOptions::drafting
};

// Binds every tensor the config calls for; a missing, mis-typed or mis-shaped tensor is an error naming it.
// `checkpoint` must outlive the result.
Result<std::unique_ptr<V41Weights>> LoadV41Weights(const Checkpoint& checkpoint, const V41Config& config,
                                                   bool dspark = false);

}  // namespace deepinfer::model
