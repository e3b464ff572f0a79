// DeepSeek-V3 / R1 / V3.1 (model_type "deepseek_v3") and V3.2 (model_type "deepseek_v32", the same with a
// lightning indexer choosing the positions MLA attends, v32_indexer.h): the whole forward pass over batched sequence chunks, in
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
// a restore point. Token-exact continuation (ExportState) carries the position and its floors, and with
// drafting the hidden states below; a snapshot's copy of its partial block holds the rest.
//
// V3.2 adds a group "index" (kIndexerKeys, ratio 1, kPrefix, FP8 E4M3): per layer 128 indexer keys of
// v32::IndexKeyBytes (FP8 codes and their fp32 scales, v32_indexer.h). Its selection reads nothing else, so a
// prefix of both groups resumes exactly as V3's one does. V3.2's MTP layer has an indexer of its own, over the
// MTP layer's positions: with drafting its keys go to one more group, "mtp_index" (as "index", one layer), in
// the slots of the "mtp" group's entries.
//
// Drafting adds the MTP layer (model.layers.{num_hidden_layers}) and a second group, "mtp" (kCompressed,
// ratio 1, kPrefix): its one layer's entries, the entry of position p (made from the main model's last
// hidden state at p and the token at p + 1) in slot p + 1, so that a Forward over [s, e) writes exactly the
// slots of [s, e) and a draft step consuming the token at position q writes slot q (≥ num_tokens); and at
// each block's end the main model's last hidden state of the block's last position (fp32), from which
// RestoreAt takes the hidden state that the next Forward's first MTP entry needs. The state keeps the last
// kV3DraftRollback + 1 hidden states (Truncate with drafting reaches that far back) and the draft's own.
#pragma once

#include <limits>
#include <memory>
#include <string>

#include "model/causal_lm.h"
#include "model/common/deepseek_model.h"
#include "model/deepseek_v3/v3_config.h"
#include "model/deepseek_v3/v3_weights.h"

namespace deepinfer::model {
namespace v3 {
struct Step;
struct CacheRef;
}

// How far Truncate reaches back when drafting (the hidden states the state keeps).
inline constexpr int64_t kV3DraftRollback = 16;

class V3SequenceState : public SequenceState {
 public:
  V3SequenceState(const void* owner, size_t num_groups) : SequenceState(owner, num_groups) {}
  V3SequenceState(const V3SequenceState&) = default;  // Fork

  int64_t window_floor = 0;    // (no window: kept for the shared batch checks)
  int64_t rollback_floor = 0;  // Truncate goes no lower (where the state was restored)
  int64_t high_water = 0;      // the most positions held since made or restored
  // Drafting: the main model's last hidden state of position p in hidden[p % (kV3DraftRollback + 1)], the
  // last draft step's output, and the draft steps since the last Forward / Truncate / RestoreAt.
  std::vector<float> hidden;
  std::vector<float> draft_hidden;
  int64_t draft_steps = 0;
  void SetPosition(int64_t n) { num_tokens_ = n; }
};

class V3Model : public DeepSeekModel<V3Config, V3Weights> {
 public:
  static Result<std::unique_ptr<V3Model>> Load(const std::string& dir, const LoadOptions& options = {});

  std::unique_ptr<SequenceState> NewSequence() const override;
  Status Forward(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) override;
  // Without drafting the state holds nothing but its position: any position back to a restore point.
  int64_t max_rollback() const override {
    return drafting_ ? kV3DraftRollback : std::numeric_limits<int32_t>::max();
  }
  Status Truncate(SequenceState& state, int64_t n) override;
  Result<std::unique_ptr<SequenceState>> Fork(const SequenceState& state) override;
  Status RestoreAt(SequenceState& state, int64_t position, RestoreFrom from, const kvcache::KvPools& pools) override;
  Result<std::vector<uint8_t>> ExportState(const SequenceState& state) const override;  // v3_state_bytes.cpp
  Status ImportState(SequenceState& state, std::span<const uint8_t> bytes) override;
  Status Draft(std::span<const DraftChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) override;
  Result<StepCost> EstimateStepCost(std::span<const ChunkShape> chunks) const override;

  // Bytes of one layer's entries in a block (the layer's offset is layer × this).
  int64_t layer_block_bytes() const { return layer_block_bytes_; }

 private:
  V3Model() = default;
  void BuildCacheSpec();
  void ComputeWeightBytes();
  // Drafting: the MTP entries of the positions whose next token the step holds, the block-end hidden
  // states and the state's recent hidden states, from the step's last hidden states.
  void KeepDraftPace(const v3::Step& step, const float* hidden);
  // Where the MTP layer's entries (and V3.2: its indexer keys) live.
  v3::CacheRef DraftCacheRef() const;

  static constexpr size_t kDraftGroup = 1;
  bool kv_bf16_ = false;
  bool drafting_ = false;
  // Weight bytes a step reads (EstimateStepCost): every weight but the routed experts and the embedding
  // (the absorbed kv_b factors as the fp32 copies the step reads), one routed expert of every MoE layer, one
  // embedding row.
  double dense_weight_bytes_ = 0, expert_weight_bytes_ = 0, embed_row_bytes_ = 0;
  int64_t layer_block_bytes_ = 0;
  size_t index_group_ = 0;               // V3.2
  size_t draft_index_group_ = 0;         // V3.2 with drafting (0: none)
  int64_t index_layer_block_bytes_ = 0;  // V3.2: one layer's indexer keys in a block
  std::vector<float> inv_freq_;
};

}  // namespace deepinfer::model
