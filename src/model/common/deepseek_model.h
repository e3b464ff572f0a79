// What both DeepSeek families' models hold and answer alike: CausalLM's info and cache spec, the config,
// weights and precision accessors, and the load steps they share (options, RoPE tables). Each family's model
// derives from it and implements the rest of CausalLM.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/safetensors.h"
#include "core/thread_pool.h"
#include "model/causal_lm.h"
#include "model/common/rotary.h"

namespace deepinfer::model {

template <class Config, class Weights>
class DeepSeekModel : public CausalLM {
 public:
  const ModelInfo& info() const override { return info_; }
  const kvcache::KvCacheSpec& cache_spec() const override { return spec_; }

  int64_t vocab_size() const { return config_.vocab_size; }
  const Config& config() const { return config_; }
  const Weights& weights() const { return *weights_; }
  ComputePrecision precision() const { return precision_; }

 protected:
  // The options both families honour the same way: the compute precision and the thread pool.
  void TakeOptions(const LoadOptions& options) {
    precision_ = options.precision;
    pool_ = options.pool != nullptr ? options.pool : &ThreadPool::Shared();
  }
  // Once the config is read: the RoPE tables of window-only and compressed layers.
  void BuildRopeTables() {
    main_inv_freq_ = RopeInverseFrequencies(config_.main_rope, config_.rope_dim);
    compress_inv_freq_ = RopeInverseFrequencies(config_.compress_rope, config_.rope_dim);
  }

  Config config_;
  Checkpoint checkpoint_;
  std::unique_ptr<Weights> weights_;
  ModelInfo info_;
  kvcache::KvCacheSpec spec_;
  ComputePrecision precision_ = ComputePrecision::kExact;
  ThreadPool* pool_ = nullptr;  // every forward pass runs here
  std::vector<float> main_inv_freq_, compress_inv_freq_;
};

}  // namespace deepinfer::model
