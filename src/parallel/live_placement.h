// An expert placement in a running unit: which rank computes each routed (row, expert) pair, and the load
// balancer's settings. The ranks swap placements between steps (ExpertGroup); the split of an expert's pairs
// over its copies is a fixed function of the pairs' order, so every rank knows where each pair goes, and
// any split gives the same bits (each copy computes a row as any other does).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "parallel/eplb.h"

namespace deepinfer::parallel {

// The load balancer in a running unit (vLLM's flag names): every step_interval steps with work, the ranks
// pool their expert loads over the last window_steps steps, compute DeepSeek's placement with
// redundant_experts extra copies, read the new experts' weights in the background, and swap at a step
// boundary every rank has agreed on.
struct EplbOptions {
  bool enabled = false;
  int64_t redundant_experts = 0;
  int64_t window_steps = 1000;
  int64_t step_interval = 3000;
  // A new placement is swapped in only when it would cut the window's imbalance (WindowImbalance) by at
  // least this fraction of the current one's: a swap reads experts' weights in and gives others back, which
  // is not worth a rounding-sized gain.
  double min_improvement = 0.01;
  static constexpr int64_t kMaxSteps = int64_t{1} << 20;
};

// The options as text, for the ranks' check that they run with the same flags.
std::string EplbSettings(const EplbOptions& options);

// The rank computing each of a sender's pairs (`expert_ids`, in the sender's order) in `layer`: the j-th
// pair routed to an expert with c copies goes to its copy (j + sender) mod c, copies in physical order, so
// that the copies share the expert's pairs evenly and different senders start on different copies.
void AssignPairsToRanks(const ExpertPlacement& placement, int64_t layer, int sender,
                        std::span<const int32_t> expert_ids, std::span<int32_t> ranks);

// How much longer the slowest rank works than the average one over a window of `loads`, when each layer
// waits for its most loaded rank: Σ_layers max_rank / Σ_layers mean_rank of the pairs each rank computes
// under `placement` (an expert's pairs split evenly over its copies). 1 is even; 1 when nothing was routed.
double WindowImbalance(const ExpertPlacement& placement, const ExpertLoads& loads);

// Whether `next` beats `current` over `loads` by the margin: WindowImbalance(next) ≤ WindowImbalance(current)
// × (1 − min_improvement).
bool PlacementWorthSwapping(const ExpertPlacement& current, const ExpertPlacement& next, const ExpertLoads& loads,
                            double min_improvement);

// Whether `rank` holds a copy of each expert in `layer` (placement.experts flags).
std::vector<uint8_t> ExpertsOnRank(const ExpertPlacement& placement, int64_t layer, int rank);

}  // namespace deepinfer::parallel
