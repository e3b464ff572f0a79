#include "parallel/live_placement.h"

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

std::vector<uint8_t> ExpertsOnRank(const ExpertPlacement& placement, int64_t layer, int rank) {
  std::vector<uint8_t> on(static_cast<size_t>(placement.experts), 0);
  const int64_t per = placement.experts_per_rank();
  for (int64_t slot = rank * per; slot < (rank + 1) * per; ++slot)
    on[static_cast<size_t>(placement.Physical(layer, slot))] = 1;
  return on;
}

}  // namespace deepinfer::parallel
