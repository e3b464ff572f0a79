// `deepinfer bench model` on a DeepSeek-V4.1 checkpoint (bench/targets/model.cpp dispatches here by
// model_type): the V4 rows (prefill and decode against the machine's limits, from the model's own
// EstimateStepCost) plus V4.1's own: KV bytes per token against V4 at the same hidden size, and the Engram
// lookup's share of the decode step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/causal_lm.h"

namespace deepinfer::bench {

struct ModelBenchOptions {
  std::string dir;
  std::vector<int64_t> prompts, batches;
  int64_t context = 256, steps = 8;
  bool breakdown = false;
  model::LoadOptions load;
};

int RunBenchModelV41(const ModelBenchOptions& options);

}  // namespace deepinfer::bench
