// The router simulator: a discrete-event replay of a request trace (router_sim_trace.h) through serving
// units whose step time comes from the engine's step-cost model (engine/cost_model.h's terms: seconds =
// c0 + c1 × tokens + c2 × logit rows + c3 × attended context + c4 × chunks), routed by one of the policies
// below, so that routing rules can be compared on the same trace and the same machine model.
//
// A unit runs the engine's continuous batching in steps: each step carries one token of every decoding
// sequence plus up to chunk_tokens prompt tokens of the sequences still in prefill (first come first),
// admits waiting requests up to max_num_seqs at its start, and costs what the model predicts for its
// shape. A prompt's leading blocks that the unit holds (its LRU cache of unit_cache_blocks blocks) or, with
// the shared store, that any unit computed before, are not computed again; the lookup happens when the
// request is admitted, and a prompt's blocks become visible when its prefill ends. Reading a block from
// the store costs nothing here (the store's read time is `bench kvstore`'s business). A request's first
// token comes at the end of the step that finishes its prompt; each further token at the end of a step.
//
// Disaggregated (prefill_units and decode_units > 0): prefill units run prompts only; a finished prompt's
// first token is emitted there and the request moves, after handoff_s_per_token × prompt tokens, to a
// decode unit, which decodes it (its KV loaded, nothing recomputed).
//
// Policies, each given the state the router would see at the arrival:
//   round-robin   units in turn
//   least-load    fewest requests in flight (ties: fewer queued prompt tokens, then lower index)
//   cache-aware   SGLang's: when loads (requests in flight) are imbalanced (max - min > balance_abs and
//                 max > balance_rel × min) the least loaded; otherwise the unit whose approximate prefix
//                 tree (the blocks of the requests routed to it, LRU-bounded) matches the largest share of
//                 the prompt when that share exceeds cache_threshold, else the unit with the smallest tree
//   cost          Dynamo's KV router: least overlap_weight × prefill blocks (queued prompt tokens plus this
//                 prompt's tokens missing from the unit's own cache, in blocks) + decode blocks (the blocks
//                 of its running sequences)
//   predicted-ttft ours (placement.h): the unit with the least predicted TTFT among those whose predicted
//                 TBT is within the SLO, from its load and its step-cost model; the prompt counted is what
//                 that unit would not hit (with the store: what nobody computed yet)
// With disaggregation the policy picks the prefill unit; the decode unit is the next in turn for
// round-robin, the least predicted TBT for predicted-ttft, and the fewest requests in flight otherwise.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/cost_model.h"
#include "router/placement.h"
#include "router/router_sim_trace.h"

namespace deepinfer::router {

enum class RoutingPolicy { kRoundRobin, kLeastLoad, kCacheAware, kCost, kPredictedTtft };
inline constexpr RoutingPolicy kAllPolicies[] = {RoutingPolicy::kRoundRobin, RoutingPolicy::kLeastLoad,
                                                 RoutingPolicy::kCacheAware, RoutingPolicy::kCost,
                                                 RoutingPolicy::kPredictedTtft};
std::string_view PolicyName(RoutingPolicy policy);

struct CacheAwareOptions {
  int64_t balance_abs = 32;  // SGLang's guide's example thresholds
  double balance_rel = 1.5;
  double cache_threshold = 0.5;
};

struct SimulationOptions {
  int64_t units = 4;          // colocated units (used when prefill_units or decode_units is 0)
  int64_t prefill_units = 0;  // both > 0: disaggregated
  int64_t decode_units = 0;
  bool shared_store = true;
  std::array<double, kStepCostTerms> step_cost = kDefaultStepCost;
  int64_t chunk_tokens = kPrefillChunkTokens;
  int64_t max_num_seqs = 64;
  int64_t unit_cache_blocks = 1024;  // each unit's RAM prefix cache, in trace blocks
  double ttft_slo_s = 2.0;
  double tbt_slo_s = 0.2;  // a request meets it when its mean time between tokens is within
  double handoff_s_per_token = 1e-6;
  CacheAwareOptions cache_aware;
  double cost_overlap_weight = 1.0;
};

struct SimulationLimits {
  static constexpr int64_t kMaxUnits = 1024;
  static constexpr int64_t kMaxNumSeqs = 1 << 16;
  static constexpr int64_t kMaxCacheBlocks = int64_t{1} << 26;
};

struct RequestOutcome {
  int prefill_unit = -1;
  int decode_unit = -1;  // disaggregated only
  double ttft_s = 0;
  double mean_tbt_s = 0;  // 0 for a single-token output
  int64_t hit_tokens = 0;
  bool slo_met = false;
};

struct SimulationResult {
  double ttft_p50_s = 0, ttft_p99_s = 0;
  double tbt_p50_s = 0, tbt_p99_s = 0;  // over every interval between two tokens of a request
  double hit_rate = 0;                  // Σ hit prompt tokens / Σ prompt tokens
  double slo_attainment = 0;            // requests meeting both SLOs / requests
  double makespan_s = 0;                // the last token's time
  double prefill_busy = 0;              // busy seconds / (units × makespan) of the prefill (or colocated) pool
  double decode_busy = 0;               // the same for the decode pool (disaggregated only)
  std::vector<RequestOutcome> requests;
};

// Validates the options (InvalidArgument when out of SimulationLimits) and replays the trace.
Result<SimulationResult> Simulate(const Trace& trace, RoutingPolicy policy, const SimulationOptions& options);

// The step-cost model's seconds for a step of this shape (engine/cost_model.h's features).
double ShapeSeconds(const std::array<double, kStepCostTerms>& cost, const engine::StepShape& step);

// Nearest-rank percentile (q in [0, 1]) of unsorted values; 0 when empty.
double Percentile(std::vector<double> values, double q);

}  // namespace deepinfer::router
