// The expert-parallel load balancer: DeepSeek's published EPLB algorithm (deepseek-ai/EPLB), written anew.
//
// Given each MoE layer's predicted load per logical expert (tokens routed to it over a recent window), it
// decides how many physical copies ("replicas") each expert gets and on which rank each copy lives, so that
// the most loaded rank carries as little as possible:
//
//   replicate  each slot beyond one per expert goes to the expert with the largest load per copy so far;
//   pack       items go, heaviest first, to the lightest bin that still has room, every bin taking the same
//              number of items.
//
// Hierarchical policy (when the expert groups divide evenly over the nodes): pack whole expert groups onto
// nodes by group load, replicate within each node, then pack each node's physical experts onto its ranks by
// their load per copy. Global policy (otherwise): the same with one group and one node.
//
// Ties break towards the lower index everywhere (the stable order of the reference), and loads are summed
// in single precision as the reference does, so equal inputs give the reference's placement.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer::parallel {

// Bounds on what the balancer accepts (inputs come from the command line, files and routing traces).
struct EplbLimits {
  static constexpr int64_t kMaxLayers = 1024;
  static constexpr int64_t kMaxExperts = 4096;
  static constexpr int64_t kMaxReplicas = 65536;
  static constexpr int64_t kMaxRanks = 4096;
  static constexpr int64_t kMaxLayerReplicas = int64_t{1} << 24;  // layers × replicas
  static constexpr double kMaxLoad = 1e18;
};

// Per-layer loads of the logical experts, row-major [layers][experts].
struct ExpertLoads {
  int64_t layers = 0;
  int64_t experts = 0;
  std::vector<double> values;

  ExpertLoads() = default;
  ExpertLoads(int64_t num_layers, int64_t num_experts)
      : layers(num_layers), experts(num_experts), values(num_layers * num_experts, 0.0) {}
  double& at(int64_t layer, int64_t expert) { return values[layer * experts + expert]; }
  double at(int64_t layer, int64_t expert) const { return values[layer * experts + expert]; }
  std::span<const double> row(int64_t layer) const {
    return {values.data() + layer * experts, static_cast<size_t>(experts)};
  }
};

// Every load finite, non-negative and at most kMaxLoad; sizes within the limits and non-empty.
Status ValidateExpertLoads(const ExpertLoads& loads);

struct EplbShape {
  int64_t replicas = 0;  // physical experts per layer: a multiple of ranks, at least the logical experts
  int64_t groups = 1;    // expert groups (contiguous ids); must divide the experts
  int64_t nodes = 1;     // must divide the ranks
  int64_t ranks = 1;

  // The hierarchical policy applies when the groups divide evenly over the nodes.
  bool hierarchical() const { return nodes >= 1 && groups % nodes == 0; }
};

// Whether the shape fits `experts` logical experts; the message names the first rule broken.
Status ValidateEplbShape(int64_t experts, const EplbShape& shape);

// Where each layer's physical experts live. Physical expert p sits on rank p / (replicas / ranks).
struct ExpertPlacement {
  int64_t layers = 0;
  int64_t experts = 0;
  int64_t replicas = 0;
  int64_t ranks = 0;
  int64_t max_count = 0;            // the largest replica count of any expert in any layer
  std::vector<int64_t> phy2log;     // [layers][replicas]: the logical expert of each physical one
  std::vector<int64_t> log2phy;     // [layers][experts][max_count]: its physical copies, by replica rank, -1 padded
  std::vector<int64_t> logcnt;      // [layers][experts]: how many copies each logical expert has

  int64_t experts_per_rank() const { return replicas / ranks; }
  int64_t RankOfPhysical(int64_t physical) const { return physical / experts_per_rank(); }
  int64_t Physical(int64_t layer, int64_t slot) const { return phy2log[layer * replicas + slot]; }
  int64_t Count(int64_t layer, int64_t expert) const { return logcnt[layer * experts + expert]; }

  // {"phy2log": [[...]], "log2phy": [[[...]]], "logcnt": [[...]]}, in that order.
  nlohmann::ordered_json ToJson() const;
};

// DeepSeek's algorithm over `loads` (validated here: InvalidArgument on a bad load or shape).
Result<ExpertPlacement> RebalanceExperts(const ExpertLoads& loads, const EplbShape& shape);

// The placement without a balancer: one copy per expert, experts [r·E/K, (r+1)·E/K) on rank r. The ranks
// must divide the experts.
Result<ExpertPlacement> IdentityPlacement(int64_t layers, int64_t experts, int64_t ranks);

// The load each rank receives in `layer` when each expert's tokens are spread evenly over its copies.
std::vector<double> RankLoads(const ExpertPlacement& placement, int64_t layer, std::span<const double> expert_loads);

// max / mean of `rank_loads`: 1 when they are equal, and 1 when every rank is idle.
double BalanceRatio(std::span<const double> rank_loads);

// Parses loads written as a JSON array of per-layer arrays of numbers ("[[90, 132, ...], [...]]") or as a
// routing trace (lines of {"loads": [[...], ...]}, one per recorded step, summed here), bounded by
// EplbLimits and at most max_bytes of text. InvalidArgument names what is wrong.
Result<ExpertLoads> ParseExpertLoads(std::string_view text, size_t max_bytes = size_t{64} << 20);
// The steps of a routing trace, each a [layers][experts] table of the same shape. A plain JSON array of
// per-layer arrays is one step.
Result<std::vector<ExpertLoads>> ParseRoutingTrace(std::string_view text, size_t max_bytes = size_t{64} << 20);

}  // namespace deepinfer::parallel
