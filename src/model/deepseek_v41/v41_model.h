// DeepSeek-V4.1 (model_type "deepseek_v41"): the text model's whole forward pass over batched sequence chunks,
// in fp32 over weights in their stored formats, with the model's own quantizers as real storage. Numerics
// follow transformers' deepseek_v41 (commit 0a2080b, its cache path), against which the fixtures in
// tests/model/data were computed.
//
// Cache groups (see kv_cache_spec.h), in this order:
//   "latent_r{r}"  kSharedLatent, one group per KV-source ratio r (released: 2, then 1): per KV source of
//                  that ratio 128/r latents of head_dim, FP4 E2M1 with an E4M3 scale per 16 (288 bytes at
//                  head_dim 512)
//   "index_r{r}"   kIndexerKeys, per ratio: per KV source 128/r indexer keys of index_head_dim, FP4 E2M1
//                  with a power-of-two scale per 32 (68 bytes at 128)
//   "window"       kSlidingWindow (window = sliding_window ≤ 128), kWindow retention: per layer 128 window
//                  K=V vectors of head_dim, FP8 E4M3 with a power-of-two scale per 32 (528 bytes at 512),
//                  then the 128 positions' Engram compressed ids (int32): the boundary state RestoreAt
//                  needs (the compressors hold no open group at a block boundary: ratios divide 128).
// A vector whose length is not a multiple of its format's block is stored fp32 (the reference skips it).
//
// Per sequence (sequence_state_bytes): for each KV source of ratio r > 1, the raw kv and gate rows
// (2 · head_dim floats) of its last max_rollback + r − 1 positions; the Engram ids of the last
// max_rollback + max_ngram_size − 1 positions. Released: 3 · 17 · 4 KiB + 19 · 4 B ≈ 204 KiB. With drafting
// (DSpark), per draft layer the FP8 window K=V of the context features of the last window + max_rollback
// positions, and the open draft block's hidden rows (released: 3 · 144 · 528 B + 5 · 20 KiB ≈ 330 KiB).
//
// Drafting (LoadOptions::drafting, info().draft_kind "dspark"): Forward also records the context features
// (v41_dspark.cpp); Draft step k = 0 runs the draft block (the anchor token, then dspark_noise_token_id) through
// the draft layers once, and every step k returns that block's base logits at row k plus the Markov head's
// bias of the token it consumes. A block drafts at most dspark_block_size tokens; Forward, Truncate and
// RestoreAt start a new one. DSpark has no hidden input or output here (DraftChunk::hidden must be null).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "model/causal_lm.h"
#include "model/common/deepseek_model.h"
#include "model/deepseek_v41/v41_config.h"
#include "model/deepseek_v41/v41_engram.h"
#include "model/deepseek_v41/v41_internal.h"
#include "model/deepseek_v41/v41_probe.h"
#include "model/deepseek_v41/v41_state.h"
#include "model/deepseek_v41/v41_weights.h"

namespace deepinfer::model {

// The collapsed sublayer inputs of a step (the inputs of attn_norm, ffn_norm and the final norm), for tests
// against the reference's intermediate values: [layers, rows, hidden] each, rows of the whole step.
struct V41Trace {
  std::vector<float> attn_in, ffn_in, final_norm_in;
};

class V41Model : public DeepSeekModel<V41Config, V41Weights> {
 public:
  static Result<std::unique_ptr<V41Model>> Load(const std::string& dir, const LoadOptions& options = {});

  std::unique_ptr<SequenceState> NewSequence() const override;
  Status Forward(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) override;
  int64_t max_rollback() const override { return kMaxRollback; }
  Status Truncate(SequenceState& state, int64_t n) override;
  Result<std::unique_ptr<SequenceState>> Fork(const SequenceState& state) override;
  Status RestoreAt(SequenceState& state, int64_t position, RestoreFrom from, const kvcache::KvPools& pools) override;
  Status Draft(std::span<const DraftChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) override;
  Result<StepCost> EstimateStepCost(std::span<const ChunkShape> chunks) const override;
  Result<std::vector<uint8_t>> ExportState(const SequenceState& state) const override;  // v41_state_bytes.cpp
  Status ImportState(SequenceState& state, std::span<const uint8_t> bytes) override;

  // Forward with test instrumentation: records the collapsed sublayer inputs (trace) and the decisions near
  // their boundary, and flips chosen ones (probe). Either may be null.
  Status ForwardProbed(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out,
                       V41Trace* trace, V41Probe* probe);

  static constexpr int64_t kMaxRollback = 16;

  const V41CacheLayout& cache_layout() const { return layout_; }
  const V41EngramHashing* engram_hashing() const { return hashing_.get(); }

 private:
  V41Model() = default;
  Status BuildCacheSpec();
  Status Run(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out, V41Trace* trace,
             V41Probe* probe);
  v41::Step NewStep(kvcache::KvPools& pools) const;

  std::unique_ptr<V41EngramHashing> hashing_;
  V41CacheLayout layout_;
};

}  // namespace deepinfer::model
