#include "router/planner.h"

#include <algorithm>
#include <cmath>

#include "router/placement.h"

namespace deepinfer::router {

namespace {

double DecodeStepSeconds(const std::array<double, kStepCostTerms>& c, double batch, double context) {
  return c[0] + batch * (c[1] + c[2] + c[4]) + c[3] * batch * context;
}

double PrefillSeconds(const std::array<double, kStepCostTerms>& c, int64_t chunk, int64_t start, int64_t end) {
  double s = 0;
  for (int64_t pos = start; pos < end; pos += chunk) {
    const double n = static_cast<double>(std::min(chunk, end - pos));
    const bool last = pos + chunk >= end;
    s += c[0] + c[1] * n + c[2] * (last ? 1 : 0) + c[3] * n * (static_cast<double>(pos) + n / 2) + c[4];
  }
  return s;
}

}  // namespace

Result<PdPlan> PlanPrefillDecode(const std::vector<MixRequest>& mix, double duration_s, const PlannerOptions& o) {
  if (mix.empty()) return Status::InvalidArgument("empty mix");
  if (!(duration_s > 0 && std::isfinite(duration_s))) return Status::InvalidArgument("duration must be positive");
  if (o.chunk_tokens < 1 || o.max_num_seqs < 1 || o.max_num_seqs > (1 << 16) || o.total_units < 0 ||
      o.total_units == 1 || o.total_units > 1024 || !(o.tbt_slo_s > 0))
    return Status::InvalidArgument("planner options out of range");
  const auto& c = o.step_cost;
  double context_sum = 0;
  for (const MixRequest& r : mix) {
    if (r.prompt_tokens < 1 || r.output_tokens < 1 || r.cached_tokens < 0 || r.cached_tokens >= r.prompt_tokens)
      return Status::InvalidArgument("mix request lengths out of range");
    context_sum += static_cast<double>(r.prompt_tokens) + static_cast<double>(r.output_tokens) / 2;
  }
  const double mean_context = context_sum / static_cast<double>(mix.size());
  PdPlan plan;
  plan.tbt_feasible = DecodeStepSeconds(c, 1, mean_context) <= o.tbt_slo_s;
  for (int64_t b = 1; b <= o.max_num_seqs; ++b) {
    if (DecodeStepSeconds(c, static_cast<double>(b), mean_context) > o.tbt_slo_s) break;
    plan.decode_batch = b;
  }
  const double batch = static_cast<double>(plan.decode_batch);
  for (const MixRequest& r : mix) {
    plan.prefill_seconds += PrefillSeconds(c, o.chunk_tokens, r.cached_tokens, r.prompt_tokens);
    // Tokens 2..output: their contexts are prompt, prompt + 1, ..., prompt + output - 2.
    const double steps = static_cast<double>(r.output_tokens - 1);
    const double context = steps * static_cast<double>(r.prompt_tokens) + steps * (steps - 1) / 2;
    plan.decode_seconds += steps * (c[0] / batch + c[1] + c[2] + c[4]) + c[3] * context;
  }
  plan.prefill_load = plan.prefill_seconds / duration_s;
  plan.decode_load = plan.decode_seconds / duration_s;
  if (o.total_units >= 2) {
    const double total = plan.prefill_load + plan.decode_load;
    const double share = total > 0 ? plan.prefill_load / total : 0.5;
    plan.prefill_units = std::clamp<int64_t>(std::llround(share * static_cast<double>(o.total_units)), 1,
                                             o.total_units - 1);
    plan.decode_units = o.total_units - plan.prefill_units;
  } else {
    plan.prefill_units = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(plan.prefill_load)));
    plan.decode_units = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(plan.decode_load)));
  }
  return plan;
}

TraceMix MixOfTrace(const Trace& trace) {
  TraceMix mix;
  const std::vector<int64_t> hits = OracleHitTokens(trace);
  mix.requests.reserve(trace.requests.size());
  for (size_t i = 0; i < trace.requests.size(); ++i) {
    const TraceRequest& r = trace.requests[i];
    mix.requests.push_back({r.input_tokens, hits[i], r.output_tokens});
  }
  if (!trace.requests.empty()) mix.duration_s = trace.requests.back().arrival_s - trace.requests.front().arrival_s;
  return mix;
}

std::optional<RoleSwitch> NextRoleSwitch(const std::vector<UnitRoleState>& units, const PdPlan& plan) {
  int64_t prefill = 0, decode = 0;
  for (const UnitRoleState& u : units) {
    if (u.draining || u.role == UnitRole::kBoth) return std::nullopt;
    (u.role == UnitRole::kPrefill ? prefill : decode) += 1;
  }
  if (prefill + decode != plan.prefill_units + plan.decode_units || prefill == plan.prefill_units) return std::nullopt;
  const UnitRole from = prefill > plan.prefill_units ? UnitRole::kPrefill : UnitRole::kDecode;
  std::optional<RoleSwitch> best;
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i].role != from) continue;
    if (!best || units[i].in_flight < units[best->unit].in_flight) best = RoleSwitch{i, UnitRole::kBoth};
  }
  if (best) best->to = from == UnitRole::kPrefill ? UnitRole::kDecode : UnitRole::kPrefill;
  return best;
}

std::array<double, kStepCostTerms> PlanningStepCost(const std::vector<UnitLease>& units, int64_t* calibrated) {
  std::array<double, kStepCostTerms> sum{};
  int64_t n = 0;
  for (const UnitLease& u : units) {
    if (!u.load.calibrated) continue;
    for (int i = 0; i < kStepCostTerms; ++i) sum[static_cast<size_t>(i)] += u.load.step_cost[static_cast<size_t>(i)];
    ++n;
  }
  if (calibrated != nullptr) *calibrated = n;
  if (n == 0) return kDefaultStepCost;
  for (double& c : sum) c /= static_cast<double>(n);
  return sum;
}

}  // namespace deepinfer::router
