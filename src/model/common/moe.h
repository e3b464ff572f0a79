// The mixture-of-experts pieces both DeepSeek families share: router scores, routing weights, and the
// expert dispatch. Each family picks its experts (hash tables, biased top-k, probes) and then calls
// DispatchExperts, the one place where routed tokens meet the experts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/linear.h"
#include "model/step_profile.h"

namespace deepinfer::model {

struct ExpertWeights {
  kernels::WeightView w1, w2, w3;  // gate [inter, d], down [d, inter], up [inter, d]
};

// The router's gate and the experts (the routing's extra tensors are the family's).
struct ExpertSetWeights {
  kernels::WeightView gate;  // [experts, hidden]
  std::vector<ExpertWeights> experts;
  ExpertWeights shared;  // runs over every row
};

// A router score from a gate logit: "sigmoid", else sqrt(softplus) as torch computes softplus (linear
// above 20).
float RouterScore(const std::string& scoring_func, float logit);

// Row weights of the k chosen experts `chosen` from their scores: divided by their sum when `normalise`,
// then times `scale`.
void RoutingWeights(const float* scores, const int32_t* chosen, int64_t k, bool normalise, float scale,
                    float* weights);

// Where a routed expert's weight enters: V4 scales the expert's output as it sums the routed outputs, V4.1
// scales the activation before the down projection.
enum class RoutingWeightAt { kCombine, kActivation };

// How the experts run.
struct ExpertDispatch {
  float swiglu_limit = 0;
  RoutingWeightAt weight_at = RoutingWeightAt::kCombine;
  kernels::LinearOptions linear;
};

// The expert-parallel seam. Routed tokens → rows grouped per expert → expert FFN (clamped SwiGLU) →
// weighted combine, plus the shared expert over all rows: out[n, d] = shared(x) + Σ routed in increasing
// expert order. `chosen` and `weights` are [n, k]. Every gate and up product runs in one balanced hand-off
// of the pool, every down product in another. Expert parallelism replaces this function with an
// all-to-all that sends each expert's rows to the rank holding it and the outputs back; the routing
// before it and the model around it stay as they are. `phase` is switched to the experts and the combine.
void DispatchExperts(const ExpertSetWeights& w, const ExpertDispatch& dispatch, const float* x, int64_t n, int64_t d,
                     const int32_t* chosen, const float* weights, int64_t k, ThreadPool& pool, ScopedPhase& phase,
                     float* out);

}  // namespace deepinfer::model
