// DeepSeek-V3 / R1 / V3.1 (model_type "deepseek_v3"): the whole forward pass over batched sequence chunks, in
// fp32 over weights in their stored formats. Numerics follow transformers' deepseek_v3 model.
//
// Attention is multi-head latent attention in its absorbed form for every row: the cache holds, per layer
// and position, only the normalised kv_lora_rank latent c and the rotated rope key (latent_width values);
// a head's query is taken into the latent space (q_nope · W_UK, from kv_b_proj), scored against c plus
// q_rope · k_rope, and its softmax-weighted sum of latents is taken back out by W_UV before o_proj. The
// naive form (expanding every cached latent to per-head keys and values) computes the same thing in
// another summation order, with fewer products per key for long prefills; but a row computed one way in a
// prefill chunk and the other way as a decode token would differ in its last bits, and a row's bits must
// not depend on how the sequence was cut into chunks (causal_lm.h: prefix-cache hits, speculative verify
// chunks and preemption replays rely on it), so prefill and decode share the absorbed form. W_UV is read
// from kv_b_proj in place; W_UK is kept transposed (v3_weights.h).
//
// Cache groups (see kv_cache_spec.h): one, "mla" (kCompressed, ratio 1, kPrefix): per layer 128 entries of
// latent_width values in the KV precision. There is no window and no state outside the blocks
// (sequence_state_bytes 0): every cached prefix resumes exactly, and Truncate reaches any position back to
// a restore point.
#pragma once

#include <limits>
#include <memory>
#include <string>

#include "model/causal_lm.h"
#include "model/common/deepseek_model.h"
#include "model/deepseek_v3/v3_config.h"
#include "model/deepseek_v3/v3_weights.h"

namespace deepinfer::model {

class V3SequenceState : public SequenceState {
 public:
  V3SequenceState(const void* owner, size_t num_groups) : SequenceState(owner, num_groups) {}
  V3SequenceState(const V3SequenceState&) = default;  // Fork

  int64_t window_floor = 0;    // (no window: kept for the shared batch checks)
  int64_t rollback_floor = 0;  // Truncate goes no lower (where the state was restored)
  void SetPosition(int64_t n) { num_tokens_ = n; }
};

class V3Model : public DeepSeekModel<V3Config, V3Weights> {
 public:
  static Result<std::unique_ptr<V3Model>> Load(const std::string& dir, const LoadOptions& options = {});

  std::unique_ptr<SequenceState> NewSequence() const override;
  Status Forward(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) override;
  // The state holds nothing but its position: any position back to a restore point.
  int64_t max_rollback() const override { return std::numeric_limits<int32_t>::max(); }
  Status Truncate(SequenceState& state, int64_t n) override;
  Result<std::unique_ptr<SequenceState>> Fork(const SequenceState& state) override;
  Status RestoreAt(SequenceState& state, int64_t position, RestoreFrom from, const kvcache::KvPools& pools) override;
  Status Draft(std::span<const DraftChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) override;
  Result<StepCost> EstimateStepCost(std::span<const ChunkShape> chunks) const override;

  // Bytes of one layer's entries in a block (the layer's offset is layer × this).
  int64_t layer_block_bytes() const { return layer_block_bytes_; }

 private:
  V3Model() = default;
  void BuildCacheSpec();
  void ComputeWeightBytes();

  bool kv_bf16_ = false;
  // Weight bytes a step reads (EstimateStepCost): every weight but the routed experts and the embedding
  // (the absorbed kv_b factors as the fp32 copies the step reads), one routed expert of every MoE layer, one
  // embedding row.
  double dense_weight_bytes_ = 0, expert_weight_bytes_ = 0, embed_row_bytes_ = 0;
  int64_t layer_block_bytes_ = 0;
  std::vector<float> inv_freq_;
};

}  // namespace deepinfer::model
