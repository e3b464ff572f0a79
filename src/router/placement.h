// Where a request goes: one cost model for every unit. Each unit publishes its calibrated step-cost
// coefficients and its load (unit_lease.h); from them the router predicts, for a new request of P prompt
// tokens, the time to its first token (the queued prefill ahead of it and its own, in chunks that share
// steps with the running decodes) and the time between its tokens (one decode step with it in the batch).
// The request goes where the predicted TTFT is least among the units whose predicted TBT is within the
// budget; when no unit can meet the SLO, it is refused early with the time after which one may.
//
// The router adds what it placed itself and has not yet seen answered (its prompt tokens and streams) to
// the unit's published load, so a burst arriving between two lease renewals spreads out.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "router/unit_lease.h"

namespace deepinfer::router {

struct PlacementLoad {
  UnitLoad published;
  int64_t placed_prefill_tokens = 0;  // prompt tokens the router sent that have no first token yet
  int64_t placed_streams = 0;         // requests the router sent that are still generating
  bool usable = true;                 // healthy and alive
};

struct PlacementSlo {
  double ttft_s = 0;  // 0: no bound
  double tbt_s = 0;
};

struct Prediction {
  double ttft_s = 0;
  double tbt_s = 0;
};

// The step cost a unit without a calibrated model is assumed to have (seconds per step and per token):
// the order of a small CPU model's, so an uncalibrated unit is neither free nor unusable.
inline constexpr std::array<double, kStepCostTerms> kDefaultStepCost = {2e-3, 2e-4, 1e-4, 1e-9, 1e-4};
// Prefill tokens per step a unit is assumed to run beside its decodes.
inline constexpr int64_t kPrefillChunkTokens = 512;

Prediction Predict(const PlacementLoad& unit, int64_t prompt_tokens);

struct PlacementDecision {
  // Units to try, best first (the first one is the placement; the rest are the retry order). Empty:
  // refused.
  std::vector<int> order;
  double retry_after_s = 0;  // refused: when the least loaded unit is predicted to meet the SLO
  Prediction best;           // the prediction of order[0] (or of the least-TTFT unit when refused)
};

PlacementDecision Place(std::span<const PlacementLoad> units, int64_t prompt_tokens, const PlacementSlo& slo);

}  // namespace deepinfer::router
