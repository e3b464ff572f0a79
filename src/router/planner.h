// The P:D planner: how many prefill and decode units keep both pools equally busy for a mix of requests,
// from the same step-cost model the router places with (placement.h, engine/cost_model.h).
//
// For each request of the mix, on that model:
//   prefill seconds  its uncached prompt in chunks of chunk_tokens on a prefill-only unit, each chunk one
//                    step (intercept, tokens, one logits row on the last chunk, the attended context);
//   decode seconds   its output tokens after the first, each costing its share of a decode step of B
//                    sequences: c0 / B + c1 + c2 + c4 + c3 × its context. B is the largest batch (at most
//                    max_num_seqs) whose step at the mix's mean context (prompt + output / 2, as Dynamo's
//                    SLA planner takes it) stays within the TBT SLO, or 1 when even one sequence exceeds it.
// Dividing each sum by the mix's duration gives the units each pool keeps busy (its load); the
// recommendation for N units splits them in proportion to the two loads, at least one unit each.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/status.h"
#include "router/router_sim_trace.h"
#include "router/unit_lease.h"

namespace deepinfer::router {

struct MixRequest {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // of the prompt, already in the store
  int64_t output_tokens = 0;
};

struct PlannerOptions {
  std::array<double, kStepCostTerms> step_cost{};
  int64_t chunk_tokens = 512;
  int64_t max_num_seqs = 64;
  double tbt_slo_s = 0.2;
  int64_t total_units = 0;  // 0: report the loads only (the split is sized to the loads, rounded up)
};

struct PdPlan {
  double prefill_seconds = 0;  // Σ over the mix
  double decode_seconds = 0;
  int64_t decode_batch = 1;    // B above
  bool tbt_feasible = true;    // false: a single sequence's decode step already exceeds the TBT SLO
  double prefill_load = 0;     // busy units needed: prefill_seconds / duration
  double decode_load = 0;
  int64_t prefill_units = 0;   // the recommendation
  int64_t decode_units = 0;
};

// InvalidArgument on an empty mix, a non-positive duration, or options out of range (including
// total_units of 1: a split needs two).
Result<PdPlan> PlanPrefillDecode(const std::vector<MixRequest>& mix, double duration_s, const PlannerOptions& options);

// The mix a trace replays: each prompt's cached part is what earlier prompts computed (what the shared
// store holds for it: OracleHitTokens), over the trace's arrival span (0 when every request arrives at
// once: no rate to plan for).
struct TraceMix {
  std::vector<MixRequest> requests;
  double duration_s = 0;
};
TraceMix MixOfTrace(const Trace& trace);

// Applying a split: which unit switches roles next, one at a time (router --apply-plan). Nothing while a
// unit drains (or has a switch asked and not begun: the caller checks that), while any unit serves both roles
// (no split to apply), or while the units already match the recommendation; otherwise the unit of the
// over-provisioned pool with the fewest requests in flight.
struct UnitRoleState {
  UnitRole role = UnitRole::kBoth;
  bool draining = false;
  int64_t in_flight = 0;
};
struct RoleSwitch {
  size_t unit = 0;  // index into the units given
  UnitRole to = UnitRole::kBoth;
};
std::optional<RoleSwitch> NextRoleSwitch(const std::vector<UnitRoleState>& units, const PdPlan& plan);

// The step cost to plan with for a set of units: the mean of the calibrated ones' coefficients, or
// placement.h's kDefaultStepCost when none is calibrated. `calibrated` (optional) receives their count.
std::array<double, kStepCostTerms> PlanningStepCost(const std::vector<UnitLease>& units, int64_t* calibrated);

}  // namespace deepinfer::router
