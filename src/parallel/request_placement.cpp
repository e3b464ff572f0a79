#include "parallel/request_placement.h"

#include <algorithm>

namespace deepinfer::parallel {

double PromptContext(int64_t prompt_tokens) {
  return static_cast<double>(prompt_tokens) * static_cast<double>(prompt_tokens) / 2;
}

int PlaceRequest(std::span<const RankLoad> ranks, const RankCapacity& capacity) {
  const auto fraction = [](int64_t used, int64_t total) {
    return static_cast<double>(used) / static_cast<double>(std::max<int64_t>(total, 1));
  };
  int best = 0;
  double best_cost = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankLoad& l = ranks[r];
    const double prefill = static_cast<double>(l.queued_prefill_tokens) +
                           capacity.context_cost_per_token * l.queued_prefill_context;
    const double cost = prefill / static_cast<double>(std::max<int64_t>(capacity.batched_tokens, 1)) +
                        fraction(l.kv_tokens, capacity.kv_tokens) + fraction(l.requests, capacity.sequences);
    // Costs computed from the same integers compare exactly: equal loads tie.
    if (r == 0 || cost < best_cost || (cost == best_cost && l.placed < ranks[static_cast<size_t>(best)].placed)) {
      best = static_cast<int>(r);
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace deepinfer::parallel
