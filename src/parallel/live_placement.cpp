#include "parallel/live_placement.h"

#include <algorithm>

namespace deepinfer::parallel {

std::string EplbSettings(const EplbOptions& o) {
  return std::to_string(o.enabled || o.redundant_experts > 0) + "/" + std::to_string(o.redundant_experts) + "/" +
         std::to_string(o.window_steps) + "/" + std::to_string(o.step_interval);
}

void AssignPairsToRanks(const ExpertPlacement& placement, int64_t layer, int sender,
                        std::span<const int32_t> expert_ids, std::span<int32_t> ranks) {
  std::vector<int64_t> seen(static_cast<size_t>(placement.experts), 0);
  const int64_t* copies = placement.log2phy.data() + layer * placement.experts * placement.max_count;
  for (size_t p = 0; p < expert_ids.size(); ++p) {
    const int64_t expert = expert_ids[p];
    const int64_t count = placement.Count(layer, expert);
    const int64_t copy = (seen[static_cast<size_t>(expert)]++ + sender) % count;
    ranks[p] = static_cast<int32_t>(placement.RankOfPhysical(copies[expert * placement.max_count + copy]));
  }
}

double WindowImbalance(const ExpertPlacement& placement, const ExpertLoads& loads) {
  double most = 0, mean = 0;
  for (int64_t l = 0; l < std::min(placement.layers, loads.layers); ++l) {
    const std::vector<double> ranks = RankLoads(placement, l, loads.row(l));
    double sum = 0, max = 0;
    for (double v : ranks) {
      sum += v;
      max = std::max(max, v);
    }
    most += max;
    mean += sum / static_cast<double>(ranks.size());
  }
  return mean > 0 ? most / mean : 1.0;
}

bool PlacementWorthSwapping(const ExpertPlacement& current, const ExpertPlacement& next, const ExpertLoads& loads,
                            double min_improvement) {
  return WindowImbalance(next, loads) <= WindowImbalance(current, loads) * (1 - min_improvement);
}

std::vector<uint8_t> ExpertsOnRank(const ExpertPlacement& placement, int64_t layer, int rank) {
  std::vector<uint8_t> on(static_cast<size_t>(placement.experts), 0);
  const int64_t per = placement.experts_per_rank();
  for (int64_t slot = rank * per; slot < (rank + 1) * per; ++slot)
    on[static_cast<size_t>(placement.Physical(layer, slot))] = 1;
  return on;
}

}  // namespace deepinfer::parallel
