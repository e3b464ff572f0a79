// DeepSeek-V4 (model_type "deepseek_v4"): the whole forward pass over batched sequence chunks, in fp32 over
// weights in their stored formats. Numerics follow transformers' deepseek_v4 model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "model/causal_lm.h"
#include "model/v4_config.h"
#include "model/v4_state.h"
#include "model/v4_weights.h"

namespace deepinfer::model {

// Where a compressed layer's entries (and a CSA layer's indexer keys) sit inside a KV block.
struct V4BlockLayout {
  std::vector<int64_t> kv_offset;     // per layer, -1 for sliding-window layers
  std::vector<int64_t> index_offset;  // per layer, -1 unless CSA
  int64_t block_floats = 0;
};

class V4Model : public CausalLM {
 public:
  static Result<std::unique_ptr<V4Model>> Load(const std::string& dir, const LoadOptions& options = {});

  std::string architecture() const override { return "DeepseekV4ForCausalLM"; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t kv_block_floats() const override { return layout_.block_floats; }
  std::unique_ptr<SequenceState> NewSequence() const override;
  Status Forward(std::span<const SequenceChunk> batch, KvBlockPool& pool, ForwardOutput* out) override;

  // Multi-token prediction: like Forward, but also returns, for every position p of every chunk, the MTP
  // layer's logits for token p + 2 given the main model's streams at p and `next_tokens` (the token at
  // p + 1 for each position; same length as the chunk's tokens). `mtp_logits` rows follow the chunks'
  // tokens. Requires MTP weights; the MTP layer keeps its own window ring in the state.
  Status ForwardWithMtp(std::span<const SequenceChunk> batch, std::span<const std::span<const int32_t>> next_tokens,
                        KvBlockPool& pool, ForwardOutput* out, std::vector<float>* mtp_logits);

  const V4Config& config() const { return config_; }
  const V4Weights& weights() const { return *weights_; }
  bool has_mtp() const { return !weights_->mtp.empty(); }
  ComputePrecision precision() const { return precision_; }

 private:
  V4Model() = default;
  Status Run(std::span<const SequenceChunk> batch, std::span<const std::span<const int32_t>> next_tokens,
             KvBlockPool& pool, ForwardOutput* out, std::vector<float>* mtp_logits);

  V4Config config_;
  Checkpoint checkpoint_;
  std::unique_ptr<V4Weights> weights_;
  V4BlockLayout layout_;
  ComputePrecision precision_ = ComputePrecision::kExact;
  std::vector<float> main_inv_freq_, compress_inv_freq_;
};

}  // namespace deepinfer::model
