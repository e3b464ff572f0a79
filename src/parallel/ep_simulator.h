// Expert parallelism on paper: from a model's shape, what an EP-N unit moves per token at every MoE layer,
// how long the all-to-all exchanges take over a link of given bandwidth and latency, a predicted step time,
// and the expert load balance with and without the balancer (parallel/eplb.h) on synthetic Zipf routing or
// on a recorded routing trace. `deepinfer bench ep --simulate` prints it.
//
// The models (all documented here, none measured):
//
// Exchange per MoE layer (DP attention + EP; each rank routes its own T tokens):
//   - a token's k experts are spread uniformly over the logical experts, E / N per rank, so it reaches a
//     given rank with probability 1 − C(E − E/N, k) / C(E, k) (k distinct experts, hypergeometric), i.e.
//     N · that many ranks in all, N − 1 times that many other ranks;
//   - dispatch: one hidden row per (token, rank reached) in the wire dtype (fp8 adds one f32 scale per 128
//     values), plus one int32 expert id and one f32 routing weight per (token, chosen expert);
//   - combine: one row back per (token, rank reached) (each rank sums its experts' outputs first, as
//     DeepEP does) or per (token, chosen expert) (the source rank sums them in a fixed order, which keeps
//     results bit-identical to one process), in the combine dtype;
//   - only what goes to other ranks crosses the link.
// All-to-all time per MoE layer: a counts exchange (N int64, Bruck: ⌈log2 N⌉ latencies), then dispatch
// and combine, each (N − 1) latencies (pairwise exchange) plus the bytes a rank sends over its link; the
// busiest rank's bytes are the mean times the balance max/mean when a balance is given.
// Compute (a roofline, not the engine's fitted cost model, which needs a running engine): per step and
// rank, the replicated weights (attention, compressors and indexers, shared experts, router, dense layers,
// head) are read once and multiply every token; at each MoE layer the rank reads the routed experts its
// tokens touch (of its E/N, each touched with probability 1 − (1 − k/E)^(N·T)) and multiplies T·k rows,
// scaled by the balance. Each part takes max(bytes / memory bandwidth, FLOPs / peak). Attention over the KV
// cache, activations and the overlap of compute with exchanges are not counted: the step time is compute +
// exchanges, as with blocking collectives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/hf_config.h"
#include "core/status.h"
#include "parallel/eplb.h"

namespace deepinfer::parallel {

// What the simulator needs to know of a model.
struct MoeModelShape {
  std::string name;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t moe_layers = 0;   // layers with routed experts
  int64_t hash_layers = 0;  // of them, routed by token id (their load follows token frequencies)
  int64_t experts = 0;      // routed experts per MoE layer
  int64_t experts_per_token = 0;
  int64_t expert_groups = 1;  // n_group (1: none)
  double expert_params = 0;   // one routed expert: gate, up and down projections
  double dense_params = 0;    // every replicated weight read per step (see above)
  double expert_bytes_per_param = 1;  // MXFP4 with an E8M0 scale per 32 values: 17/32
  double dense_bytes_per_param = 1;   // FP8
};

// "v4-flash" or "v4-pro": DeepSeek-V4-Flash and V4-Pro from their published config.json values.
Result<MoeModelShape> PresetModelShape(std::string_view preset);
// A checkpoint's config.json (model_type deepseek_v3, deepseek_v4 or deepseek_v41).
Result<MoeModelShape> ModelShapeFromConfig(const HfConfig& config, std::string name);

enum class WireDtype { kFp8, kBf16, kF32 };
enum class CombineRows { kPerRank, kPerExpert };

struct WireFormat {
  WireDtype dispatch = WireDtype::kFp8;
  WireDtype combine = WireDtype::kBf16;
  CombineRows combine_rows = CombineRows::kPerRank;
};

const char* WireDtypeName(WireDtype dtype);
// Bytes of one hidden row of `hidden` values in `dtype` (fp8: one byte each plus an f32 scale per 128).
double RowBytes(int64_t hidden, WireDtype dtype);

// Per token and MoE layer, on average.
struct TokenExchange {
  double ranks_reached = 0;         // ranks holding at least one of the token's experts (its own included)
  double dispatch_bytes = 0;        // to every rank reached, its own included
  double combine_bytes = 0;
  double remote_dispatch_bytes = 0;  // what crosses the link
  double remote_combine_bytes = 0;
  double total() const { return dispatch_bytes + combine_bytes; }
  double remote() const { return remote_dispatch_bytes + remote_combine_bytes; }
};

// InvalidArgument when ranks is not in 1..experts or the top-k exceeds the experts.
Result<TokenExchange> ExchangePerToken(const MoeModelShape& model, int64_t ranks, const WireFormat& wire);

struct LinkSpec {
  double gbit_per_s = 100;  // each rank's link, each direction
  double latency_us = 5;    // one message
};

struct AllToAllTime {
  double counts_us = 0, dispatch_us = 0, combine_us = 0;
  double total_us() const { return counts_us + dispatch_us + combine_us; }
};

// One MoE layer's exchanges for `tokens_per_rank` tokens on every rank, the busiest rank's bytes being
// `balance` times the mean.
AllToAllTime AllToAllPerLayer(const TokenExchange& exchange, int64_t ranks, double tokens_per_rank,
                              const LinkSpec& link, double balance = 1.0);

struct RankSpec {
  double memory_gb_per_s = 200;  // per rank
  double tflops = 4;             // per rank, on the weights' dtype
};

struct StepTime {
  double dense_ms = 0;    // replicated weights, the whole step
  double experts_ms = 0;  // routed experts, all MoE layers, times the balance
  double exchange_ms = 0;  // all MoE layers' all-to-alls
  double total_ms() const { return dense_ms + experts_ms + exchange_ms; }
};

StepTime PredictStep(const MoeModelShape& model, int64_t ranks, double tokens_per_rank, const TokenExchange& exchange,
                     const LinkSpec& link, const RankSpec& rank, double balance);

// Balance max/mean per layer and step, averaged (and the worst), of the placement without the balancer
// (experts [r·E/N, (r+1)·E/N) on rank r) and of the balancer's (planned on a window of steps, applied to
// the steps after it), and of the balancer's on the very loads it planned on.
struct BalanceFigures {
  double unbalanced_mean = 0, unbalanced_max = 0;
  double balanced_mean = 0, balanced_max = 0;
  double planned_mean = 0;
  int64_t replicas = 0;
  bool hierarchical = false;
  int64_t evaluated_steps = 0;
};

struct BalanceOptions {
  int64_t ranks = 8;
  int64_t redundant_experts = 8;  // replicas = experts + this; must be a multiple of ranks
  int64_t ranks_per_node = 8;     // nodes = ranks / this (at least 1), for the hierarchical policy
};

// Synthetic routing: in each of `layers` layers, every token picks k distinct experts with probability
// proportional to 1 / rank^zipf over a random order of the experts (a new order per layer), sampled without
// replacement; except in the first `hash_layers`, where a token id drawn with probability proportional to
// 1 / rank^token_zipf over the vocabulary goes to the k distinct experts a fixed random table assigns it.
// `window_steps` steps plan the placement, `eval_steps` more are measured.
struct SyntheticRouting {
  int64_t layers = 8;
  int64_t hash_layers = 0;
  double zipf = 1.0;
  double token_zipf = 1.0;
  int64_t tokens_per_step = 4096;
  int64_t window_steps = 8;
  int64_t eval_steps = 4;
  uint64_t seed = 0;
};

Result<BalanceFigures> SimulateBalance(const MoeModelShape& model, const SyntheticRouting& routing,
                                       const BalanceOptions& options);
// The same on recorded steps: the first half plans, the second half is measured (a single step does both).
Result<BalanceFigures> TraceBalance(const std::vector<ExpertLoads>& steps, int64_t expert_groups,
                                    const BalanceOptions& options);

}  // namespace deepinfer::parallel
