// DeepSeek-V4 (model_type "deepseek_v4"): the whole forward pass over batched sequence chunks, in fp32 over
// weights in their stored formats. Numerics follow transformers' deepseek_v4 model.
//
// Cache groups (see kv_cache_spec.h), in this order, each present when some layer uses it:
//   "csa_kv"    kCompressed, the CSA ratio (4): per CSA layer 128/4 entries of head_dim
//   "hca_kv"    kCompressed, the HCA ratio (128): per HCA layer 1 entry of head_dim
//   "csa_index" kIndexerKeys, the CSA ratio: per CSA layer 128/4 keys of index_head_dim
//   "window"    kSlidingWindow (window = sliding_window): per layer 128 K=V vectors of head_dim, then the
//               overlapping compressors' state at the block's end: per CSA layer the first series of the raw
//               kv and gate of the last `ratio` positions, for its compressor and its indexer's
//
// With drafting the window group also holds the MTP layer's K=V vectors (the entry of position p, made from
// the final hidden state at p and the token at p + 1, in the slot of p + 1) and, at the end, the final
// hidden state (hc_mult · hidden_size) of the block's last position.
//
// Per sequence (sequence_state_bytes): each compressor's raw kv and gate for kV4MaxRollback + coff · ratio
// positions; with drafting also kV4MaxRollback + 2 hidden states of hc_mult · hidden_size. V4-Flash in fp32:
// 21 CSA layers × 24 positions × (2·1024 + 2·256) + 20 HCA layers × 144 × 2·512 floats = 16.96 MB, of which
// the HCA layers' open 128-position windows are 11.8 MB; drafting adds 18 × 16384 floats = 1.18 MB.
// (A config with several CSA or HCA ratios gets one group per distinct ratio, named with it.)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "model/causal_lm.h"
#include "model/common/deepseek_model.h"
#include "model/deepseek_v4/v4_config.h"
#include "model/deepseek_v4/v4_state.h"
#include "model/deepseek_v4/v4_weights.h"

namespace deepinfer::model::v4 {
struct Step;
}

namespace deepinfer::model {

// Where each layer's entries sit in the cache groups' blocks (offsets in bytes from a block's start).
struct V4CacheLayout {
  struct Layer {
    int kv_group = -1;  // compressed entries (CSA and HCA layers)
    int64_t kv_offset = 0;
    int index_group = -1;  // indexer keys (CSA layers)
    int64_t index_offset = 0;
    int64_t window_offset = 0;  // K=V vectors in the window group
    // Overlapping compressors' boundary state in the window group (-1: none).
    int64_t kv_boundary_offset = -1;
    int64_t index_boundary_offset = -1;
  };
  std::vector<Layer> layers;
  Layer mtp;                     // drafting: the MTP layer's K=V vectors in the window group (no compressor)
  int64_t hidden_offset = -1;    // drafting: the final hidden state of each window block's last position
  int window_group = -1;
};

class V4Model : public DeepSeekModel<V4Config, V4Weights> {
 public:
  static Result<std::unique_ptr<V4Model>> Load(const std::string& dir, const LoadOptions& options = {});

  std::unique_ptr<SequenceState> NewSequence() const override;
  Status Forward(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) override;
  int64_t max_rollback() const override { return kV4MaxRollback; }
  Status Truncate(SequenceState& state, int64_t n) override;
  Result<std::unique_ptr<SequenceState>> Fork(const SequenceState& state) override;
  Status RestoreAt(SequenceState& state, int64_t position, RestoreFrom from, const kvcache::KvPools& pools) override;
  Status Draft(std::span<const DraftChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) override;
  Result<StepCost> EstimateStepCost(std::span<const ChunkShape> chunks) const override;
  Result<std::vector<uint8_t>> ExportState(const SequenceState& state) const override;  // v4_state_bytes.cpp
  Status ImportState(SequenceState& state, std::span<const uint8_t> bytes) override;

  const V4CacheLayout& cache_layout() const { return layout_; }
  bool has_mtp() const { return !weights_->mtp.empty(); }

 private:
  V4Model() = default;
  Status BuildCacheSpec();
  void ComputeCostFigures();
  // The MTP layer over `step`'s rows (token: the one after the row's position) given the final hidden
  // streams of those positions; returns its output streams [rows, hc, d].
  std::vector<float> RunMtp(const v4::Step& step, const float* hidden) const;
  // The head (hc_head, norm, lm_head) over streams [m, hc, d], into logits [m, vocab].
  void Head(const v4::Step& step, const HyperConnectionWeights& hc_head, const std::vector<float>& norm,
            const float* streams, int64_t m, std::vector<float>* logits) const;
  v4::Step NewStep(kvcache::KvPools& pools) const;

  V4CacheLayout layout_;
  bool drafting_ = false;
  bool kv_bf16_ = false;
  // Per-token and per-step constants of EstimateStepCost (v4_cost.cpp).
  struct CostFigures {
    double token_macs = 0;       // matrix products of one token (k + 1 experts), no attention, no logits
    double dense_bytes = 0;      // every weight but the routed experts and the embedding, head included
    double expert_bytes = 0;     // one routed expert of every layer
    double embed_row_bytes = 0;  // one embedding row
  };
  CostFigures cost_;
};

}  // namespace deepinfer::model
