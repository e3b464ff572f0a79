// The mixture-of-experts pieces both DeepSeek families share: router scores, routing weights, and the
// expert dispatch. Each family picks its experts (hash tables, biased top-k, probes) and then calls
// DispatchExperts, the one place where routed tokens meet the experts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/linear.h"
#include "model/common/expert_parallel.h"
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
  // Set under expert parallelism: this process computes only the routed experts of its shard
  // (ExpertShard) and exchanges the others' rows through it; null: every expert runs here.
  ExpertExchange* exchange = nullptr;
};

// Shards the routed experts of every set over `exchange`'s members (null: every expert stays here); refuses
// a member count that does not divide `experts`.
Status ShardExpertSets(ExpertExchange* exchange, int64_t experts, const std::vector<ExpertSetWeights*>& sets);

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
// of the pool, every down product in another; at decode sizes (each routed expert one row) all of them run
// in one hand-off, an expert's down rows as soon as its gate and up rows are done. With `w.exchange` set
// (expert parallelism, expert_parallel.h) each (row, expert) pair goes to the member holding the expert and
// its output comes back for the same fixed-order sum; the routing before it and the model around it stay as
// they are. Under expert parallelism every member calls it for every routed layer of every step, with n = 0
// (x and out null) when it has no rows of its own. There the shared expert over the member's rows runs where
// it would first wait for its peers' rows or outputs (if it waits), so out must not overlap x. `phase` is switched to the experts
// and the combine.
void DispatchExperts(const ExpertSetWeights& w, const ExpertDispatch& dispatch, const float* x, int64_t n, int64_t d,
                     const int32_t* chosen, const float* weights, int64_t k, ThreadPool& pool, ScopedPhase& phase,
                     float* out);

}  // namespace deepinfer::model
