#include "parallel/eplb.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/json.h"

namespace deepinfer::parallel {
namespace {

std::string Num(int64_t v) { return std::to_string(v); }

// The bin of each item and its position in the bin: items go, heaviest first (equal weights in index
// order), to the lightest bin (the first of equally light ones) that still has room; every bin takes
// items.size() / bins items. With one item per bin, item i simply goes to bin i.
struct Packing {
  std::vector<int64_t> bin;
  std::vector<int64_t> position;
};

Packing BalancedPacking(std::span<const float> weights, int64_t bins) {
  const int64_t n = static_cast<int64_t>(weights.size());
  const int64_t per_bin = n / bins;
  Packing p;
  p.bin.assign(n, 0);
  p.position.assign(n, 0);
  if (per_bin == 1) {
    std::iota(p.bin.begin(), p.bin.end(), 0);
    return p;
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return weights[a] > weights[b]; });
  std::vector<float> bin_weight(bins, 0.0f);
  std::vector<int64_t> bin_items(bins, 0);
  for (int64_t item : order) {
    int64_t best = -1;
    for (int64_t b = 0; b < bins; ++b) {
      if (bin_items[b] >= per_bin) continue;
      if (best < 0 || bin_weight[b] < bin_weight[best]) best = b;
    }
    p.bin[item] = best;
    p.position[item] = bin_items[best];
    bin_weight[best] += weights[item];
    ++bin_items[best];
  }
  return p;
}

// Replication of `weights.size()` logical experts into `physical` slots: slot i < logical holds expert i;
// each further slot copies the expert with the largest load per copy (the first of equal ones).
struct Replication {
  std::vector<int64_t> slot_expert;  // [physical]
  std::vector<int64_t> slot_rank;    // [physical]: which copy of its expert the slot is (0 = the first)
  std::vector<int64_t> count;        // [logical]
};

Replication ReplicateExperts(std::span<const float> weights, int64_t physical) {
  const int64_t logical = static_cast<int64_t>(weights.size());
  Replication r;
  r.slot_expert.resize(physical);
  r.slot_rank.assign(physical, 0);
  r.count.assign(logical, 1);
  std::iota(r.slot_expert.begin(), r.slot_expert.begin() + logical, 0);
  for (int64_t slot = logical; slot < physical; ++slot) {
    int64_t best = 0;
    float best_load = weights[0] / static_cast<float>(r.count[0]);
    for (int64_t e = 1; e < logical; ++e) {
      const float load = weights[e] / static_cast<float>(r.count[e]);
      if (load > best_load) {
        best = e;
        best_load = load;
      }
    }
    r.slot_expert[slot] = best;
    r.slot_rank[slot] = r.count[best];
    ++r.count[best];
  }
  return r;
}

std::vector<int64_t> Inverse(const std::vector<int64_t>& permutation) {
  std::vector<int64_t> inverse(permutation.size());
  for (size_t i = 0; i < permutation.size(); ++i) inverse[permutation[i]] = static_cast<int64_t>(i);
  return inverse;
}

// One layer of the hierarchical policy; writes the layer's slots (logical expert and copy rank) and counts.
void BalanceLayer(std::span<const double> loads, int64_t groups, int64_t nodes, int64_t ranks, int64_t replicas,
                  int64_t* slot_expert, int64_t* slot_rank, int64_t* counts) {
  const int64_t experts = static_cast<int64_t>(loads.size());
  const int64_t group_size = experts / groups;
  const int64_t groups_per_node = groups / nodes;
  const int64_t experts_per_node = experts / nodes;
  const int64_t slots_per_node = replicas / nodes;
  const int64_t ranks_per_node = ranks / nodes;
  const int64_t slots_per_rank = replicas / ranks;
  std::vector<float> w(experts);
  for (int64_t e = 0; e < experts; ++e) w[e] = static_cast<float>(loads[e]);

  // 1. Whole groups onto nodes. Experts are renumbered node by node ("node-major" ids): node n holds
  //    node-major ids [n·E/nodes, (n+1)·E/nodes), its groups in packing order, each group's experts in order.
  std::vector<float> group_load(groups, 0.0f);
  for (int64_t e = 0; e < experts; ++e) group_load[e / group_size] += w[e];
  const Packing group_packing = BalancedPacking(group_load, nodes);
  std::vector<int64_t> to_node_major(experts);
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t g = e / group_size;
    to_node_major[e] = (group_packing.bin[g] * groups_per_node + group_packing.position[g]) * group_size + e % group_size;
  }
  const std::vector<int64_t> from_node_major = Inverse(to_node_major);

  for (int64_t node = 0; node < nodes; ++node) {
    // 2. Copies within the node.
    std::vector<float> node_load(experts_per_node);
    for (int64_t j = 0; j < experts_per_node; ++j) node_load[j] = w[from_node_major[node * experts_per_node + j]];
    const Replication rep = ReplicateExperts(node_load, slots_per_node);
    // 3. The node's copies onto its ranks, each copy carrying an equal share of its expert's load.
    std::vector<float> slot_load(slots_per_node);
    for (int64_t s = 0; s < slots_per_node; ++s) {
      const int64_t j = rep.slot_expert[s];
      slot_load[s] = node_load[j] / static_cast<float>(rep.count[j]);
    }
    const Packing slot_packing = BalancedPacking(slot_load, ranks_per_node);
    std::vector<int64_t> placed(slots_per_node);
    for (int64_t s = 0; s < slots_per_node; ++s)
      placed[s] = slot_packing.bin[s] * slots_per_rank + slot_packing.position[s];
    const std::vector<int64_t> source = Inverse(placed);
    for (int64_t q = 0; q < slots_per_node; ++q) {
      const int64_t s = source[q];
      const int64_t out = node * slots_per_node + q;
      slot_expert[out] = from_node_major[node * experts_per_node + rep.slot_expert[s]];
      slot_rank[out] = rep.slot_rank[s];
    }
    for (int64_t j = 0; j < experts_per_node; ++j) counts[from_node_major[node * experts_per_node + j]] = rep.count[j];
  }
}

// Fills log2phy and max_count from phy2log and the copy rank of every slot.
void IndexCopies(ExpertPlacement& p, const std::vector<int64_t>& slot_rank) {
  p.max_count = *std::max_element(p.logcnt.begin(), p.logcnt.end());
  p.log2phy.assign(p.layers * p.experts * p.max_count, -1);
  for (int64_t l = 0; l < p.layers; ++l)
    for (int64_t s = 0; s < p.replicas; ++s) {
      const int64_t e = p.phy2log[l * p.replicas + s];
      p.log2phy[(l * p.experts + e) * p.max_count + slot_rank[l * p.replicas + s]] = s;
    }
}

}  // namespace

Status ValidateExpertLoads(const ExpertLoads& loads) {
  if (loads.layers < 1 || loads.layers > EplbLimits::kMaxLayers)
    return Status::InvalidArgument("loads: " + Num(loads.layers) + " layers (1.." + Num(EplbLimits::kMaxLayers) +
                                   " allowed)");
  if (loads.experts < 1 || loads.experts > EplbLimits::kMaxExperts)
    return Status::InvalidArgument("loads: " + Num(loads.experts) + " experts per layer (1.." +
                                   Num(EplbLimits::kMaxExperts) + " allowed)");
  if (static_cast<int64_t>(loads.values.size()) != loads.layers * loads.experts)
    return Status::InvalidArgument("loads: " + Num(static_cast<int64_t>(loads.values.size())) + " values for " +
                                   Num(loads.layers) + " layers of " + Num(loads.experts) + " experts");
  for (int64_t l = 0; l < loads.layers; ++l)
    for (int64_t e = 0; e < loads.experts; ++e) {
      const double v = loads.at(l, e);
      if (!std::isfinite(v) || v < 0 || v > EplbLimits::kMaxLoad)
        return Status::InvalidArgument("loads: layer " + Num(l) + ", expert " + Num(e) +
                                       ": a load must be a finite number in [0, 1e18]");
    }
  return Status::Ok();
}

Status ValidateEplbShape(int64_t experts, const EplbShape& s) {
  auto bad = [](std::string m) { return Status::InvalidArgument(std::move(m)); };
  if (s.ranks < 1 || s.ranks > EplbLimits::kMaxRanks) return bad("ranks must be in 1.." + Num(EplbLimits::kMaxRanks));
  if (s.nodes < 1 || s.nodes > s.ranks) return bad("nodes must be in 1..ranks (" + Num(s.ranks) + ")");
  if (s.groups < 1 || s.groups > experts) return bad("groups must be in 1..experts (" + Num(experts) + ")");
  if (s.replicas < 1 || s.replicas > EplbLimits::kMaxReplicas)
    return bad("replicas must be in 1.." + Num(EplbLimits::kMaxReplicas));
  if (s.replicas < experts)
    return bad("replicas (" + Num(s.replicas) + ") must be at least the experts (" + Num(experts) + ")");
  if (s.replicas % s.ranks != 0)
    return bad("replicas (" + Num(s.replicas) + ") must be a multiple of ranks (" + Num(s.ranks) + ")");
  if (s.ranks % s.nodes != 0)
    return bad("ranks (" + Num(s.ranks) + ") must be a multiple of nodes (" + Num(s.nodes) + ")");
  if (experts % s.groups != 0)
    return bad("groups (" + Num(s.groups) + ") must divide the experts (" + Num(experts) + ")");
  return Status::Ok();
}

Result<ExpertPlacement> RebalanceExperts(const ExpertLoads& loads, const EplbShape& shape) {
  DI_RETURN_IF_ERROR(ValidateExpertLoads(loads));
  DI_RETURN_IF_ERROR(ValidateEplbShape(loads.experts, shape));
  if (loads.layers * shape.replicas > EplbLimits::kMaxLayerReplicas)
    return Status::InvalidArgument("layers × replicas (" + Num(loads.layers * shape.replicas) + ") exceeds " +
                                   Num(EplbLimits::kMaxLayerReplicas));
  const bool hierarchical = shape.hierarchical();
  const int64_t groups = hierarchical ? shape.groups : 1;
  const int64_t nodes = hierarchical ? shape.nodes : 1;
  ExpertPlacement p;
  p.layers = loads.layers;
  p.experts = loads.experts;
  p.replicas = shape.replicas;
  p.ranks = shape.ranks;
  p.phy2log.assign(p.layers * p.replicas, 0);
  p.logcnt.assign(p.layers * p.experts, 0);
  std::vector<int64_t> slot_rank(p.layers * p.replicas, 0);
  for (int64_t l = 0; l < p.layers; ++l)
    BalanceLayer(loads.row(l), groups, nodes, shape.ranks, shape.replicas, &p.phy2log[l * p.replicas],
                 &slot_rank[l * p.replicas], &p.logcnt[l * p.experts]);
  IndexCopies(p, slot_rank);
  return p;
}

Result<ExpertPlacement> IdentityPlacement(int64_t layers, int64_t experts, int64_t ranks) {
  if (layers < 1 || layers > EplbLimits::kMaxLayers || experts < 1 || experts > EplbLimits::kMaxExperts ||
      ranks < 1 || ranks > experts || experts % ranks != 0)
    return Status::InvalidArgument("identity placement: " + Num(experts) + " experts do not divide over " +
                                   Num(ranks) + " ranks (or a size is out of bounds)");
  ExpertPlacement p;
  p.layers = layers;
  p.experts = experts;
  p.replicas = experts;
  p.ranks = ranks;
  p.phy2log.resize(layers * experts);
  for (int64_t l = 0; l < layers; ++l) std::iota(p.phy2log.begin() + l * experts, p.phy2log.begin() + (l + 1) * experts, 0);
  p.logcnt.assign(layers * experts, 1);
  IndexCopies(p, std::vector<int64_t>(layers * experts, 0));
  return p;
}

std::vector<double> RankLoads(const ExpertPlacement& p, int64_t layer, std::span<const double> expert_loads) {
  std::vector<double> ranks(p.ranks, 0.0);
  for (int64_t s = 0; s < p.replicas; ++s) {
    const int64_t e = p.Physical(layer, s);
    ranks[p.RankOfPhysical(s)] += expert_loads[e] / static_cast<double>(p.Count(layer, e));
  }
  return ranks;
}

double BalanceRatio(std::span<const double> rank_loads) {
  if (rank_loads.empty()) return 1.0;
  double sum = 0, max = 0;
  for (double v : rank_loads) {
    sum += v;
    max = std::max(max, v);
  }
  if (sum <= 0) return 1.0;
  return max / (sum / static_cast<double>(rank_loads.size()));
}

nlohmann::ordered_json ExpertPlacement::ToJson() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  nlohmann::ordered_json p2l = nlohmann::ordered_json::array(), l2p = nlohmann::ordered_json::array(),
                         cnt = nlohmann::ordered_json::array();
  for (int64_t l = 0; l < layers; ++l) {
    p2l.push_back(std::vector<int64_t>(phy2log.begin() + l * replicas, phy2log.begin() + (l + 1) * replicas));
    cnt.push_back(std::vector<int64_t>(logcnt.begin() + l * experts, logcnt.begin() + (l + 1) * experts));
    nlohmann::ordered_json layer = nlohmann::ordered_json::array();
    for (int64_t e = 0; e < experts; ++e) {
      const auto first = log2phy.begin() + (l * experts + e) * max_count;
      layer.push_back(std::vector<int64_t>(first, first + max_count));
    }
    l2p.push_back(std::move(layer));
  }
  out["phy2log"] = std::move(p2l);
  out["log2phy"] = std::move(l2p);
  out["logcnt"] = std::move(cnt);
  return out;
}

// --- parsing

namespace {

constexpr int64_t kMaxTraceValues = int64_t{1} << 23;

// Whether a table's text can hold at most the largest table allowed, by its commas, before a parse builds
// anything: the limit on bytes alone would let one line of tiny numbers build a huge document.
Status CheckTableSize(std::string_view text, const std::string& where) {
  const int64_t max_commas = EplbLimits::kMaxLayers * EplbLimits::kMaxExperts + EplbLimits::kMaxLayers;
  if (std::count(text.begin(), text.end(), ',') > max_commas)
    return Status::InvalidArgument(where + "more values than " + Num(EplbLimits::kMaxLayers) + " layers of " +
                                   Num(EplbLimits::kMaxExperts) + " experts");
  return Status::Ok();
}

// A [layers][experts] table from a JSON array of arrays of numbers.
Result<ExpertLoads> LoadsFromJson(const nlohmann::json& value, const std::string& where) {
  if (!value.is_array() || value.empty())
    return Status::InvalidArgument(where + "expected a non-empty array of per-layer arrays of loads");
  if (static_cast<int64_t>(value.size()) > EplbLimits::kMaxLayers)
    return Status::InvalidArgument(where + Num(static_cast<int64_t>(value.size())) + " layers (at most " +
                                   Num(EplbLimits::kMaxLayers) + ")");
  ExpertLoads loads;
  loads.layers = static_cast<int64_t>(value.size());
  for (int64_t l = 0; l < loads.layers; ++l) {
    const nlohmann::json& row = value[l];
    if (!row.is_array() || row.empty())
      return Status::InvalidArgument(where + "layer " + Num(l) + " is not a non-empty array of loads");
    if (l == 0) {
      loads.experts = static_cast<int64_t>(row.size());
      if (loads.experts > EplbLimits::kMaxExperts)
        return Status::InvalidArgument(where + Num(loads.experts) + " experts per layer (at most " +
                                       Num(EplbLimits::kMaxExperts) + ")");
      loads.values.reserve(loads.layers * loads.experts);
    } else if (static_cast<int64_t>(row.size()) != loads.experts) {
      return Status::InvalidArgument(where + "layer " + Num(l) + " has " + Num(static_cast<int64_t>(row.size())) +
                                     " loads, layer 0 has " + Num(loads.experts));
    }
    for (int64_t e = 0; e < loads.experts; ++e) {
      if (!row[e].is_number())
        return Status::InvalidArgument(where + "layer " + Num(l) + ", expert " + Num(e) + ": not a number");
      loads.values.push_back(row[e].get<double>());
    }
  }
  Status valid = ValidateExpertLoads(loads);
  if (!valid.ok()) return Status::InvalidArgument(where + valid.message());
  return loads;
}

std::string_view TrimLeft(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
  return text.substr(i);
}

}  // namespace

Result<std::vector<ExpertLoads>> ParseRoutingTrace(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes)
    return Status::InvalidArgument("loads: " + Num(static_cast<int64_t>(text.size())) + " bytes (at most " +
                                   Num(static_cast<int64_t>(max_bytes)) + ")");
  const std::string_view body = TrimLeft(text);
  if (body.empty()) return Status::InvalidArgument("loads: empty input");
  std::vector<ExpertLoads> steps;
  if (body.front() == '[') {
    DI_RETURN_IF_ERROR(CheckTableSize(body, "loads: "));
    DI_ASSIGN_OR_RETURN(nlohmann::json value, ParseJson(body, JsonLimits{max_bytes, 2}));
    DI_ASSIGN_OR_RETURN(ExpertLoads loads, LoadsFromJson(value, ""));
    steps.push_back(std::move(loads));
    return steps;
  }
  if (body.front() != '{')
    return Status::InvalidArgument("loads: expected a JSON array of per-layer arrays or a routing trace "
                                   "(lines of {\"loads\": [[...]]})");
  int64_t line_number = 0, values = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_number;
    if (TrimLeft(line).empty()) continue;
    const std::string where = "trace line " + Num(line_number) + ": ";
    DI_RETURN_IF_ERROR(CheckTableSize(line, where));
    auto parsed = ParseJson(line, JsonLimits{max_bytes, 3});
    if (!parsed.ok()) return Status::InvalidArgument(where + parsed.status().message());
    if (!parsed->is_object() || !parsed->contains("loads"))
      return Status::InvalidArgument(where + "expected an object with \"loads\"");
    DI_ASSIGN_OR_RETURN(ExpertLoads loads, LoadsFromJson((*parsed)["loads"], where));
    if (!steps.empty() && (loads.layers != steps[0].layers || loads.experts != steps[0].experts))
      return Status::InvalidArgument(where + Num(loads.layers) + " layers of " + Num(loads.experts) +
                                     " experts, the first step has " + Num(steps[0].layers) + " of " +
                                     Num(steps[0].experts));
    values += loads.layers * loads.experts;
    if (values > kMaxTraceValues)
      return Status::InvalidArgument(where + "the trace holds more than " + Num(kMaxTraceValues) + " loads");
    steps.push_back(std::move(loads));
  }
  if (steps.empty()) return Status::InvalidArgument("loads: the trace has no steps");
  return steps;
}

Result<ExpertLoads> ParseExpertLoads(std::string_view text, size_t max_bytes) {
  DI_ASSIGN_OR_RETURN(std::vector<ExpertLoads> steps, ParseRoutingTrace(text, max_bytes));
  ExpertLoads total = std::move(steps[0]);
  for (size_t i = 1; i < steps.size(); ++i)
    for (size_t k = 0; k < total.values.size(); ++k) total.values[k] += steps[i].values[k];
  DI_RETURN_IF_ERROR(ValidateExpertLoads(total));
  return total;
}

}  // namespace deepinfer::parallel
