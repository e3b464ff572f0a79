// deepinfer bench router: replays a request trace (Mooncake JSON lines, or a synthetic one) through the
// router simulator (router/router_sim.h) under each routing policy, with and without the shared KV store,
// and prints TTFT / TBT percentiles, prefix hit rate and SLO attainment beside the affinity oracle's hit
// rate, then the planner's P:D split (router/planner.h) for the same mix.
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "router/planner.h"
#include "router/router_sim.h"
#include "router/unit_lease.h"

namespace deepinfer::bench {
namespace {

constexpr const char* kRouterUsage =
    "usage: deepinfer bench router (--trace FILE | --synthetic N) [--units N | --prefill-units P --decode-units D]\n"
    "                              [--policy all|round-robin|least-load|cache-aware|cost|predicted-ttft]\n"
    "                              [--store both|on|off] [--json] ...\n\n"
    "Replays a trace through simulated units (step time from the engine's step-cost model) under each routing\n"
    "policy and prints, per policy and store setting:\n"
    "  ttft p50/p99, tbt p50/p99   milliseconds (TBT over every interval between two tokens)\n"
    "  hit                         prompt tokens not computed (in a unit's cache or, store on, in the store)\n"
    "  slo                         requests with TTFT <= --ttft-slo-ms and mean TBT <= --tbt-slo-ms\n"
    "  busy, d-busy                busy time / (units x makespan) of the routed (prefill or colocated) pool\n"
    "                              and, disaggregated, of the decode pool\n"
    "and the affinity oracle's hit rate (every earlier prompt's blocks reachable), then the planner's P:D split\n"
    "for the same mix, and (colocated units given) that split replayed with predicted-ttft and the store.\n"
    "The models are documented in src/router/router_sim.h and planner.h.\n\n"
    "  --trace FILE             Mooncake JSON lines: {timestamp (ms), input_length, output_length, hash_ids}\n"
    "  --block-tokens N         tokens per hash id (default 512, Mooncake's)\n"
    "  --synthetic N            N synthetic requests instead: Poisson arrivals at --rate per second (default\n"
    "                           4), prompts of one of --prefix-groups (64) shared prefixes drawn with Zipf\n"
    "                           --zipf (1.0) frequencies, --prefix-tokens MIN,MAX (1024,8192) long, then\n"
    "                           --suffix-tokens MIN,MAX (64,1024) own tokens; --output-tokens MIN,MAX (16,512);\n"
    "                           --seed S (0)\n"
    "  --units N                colocated units (default 4)\n"
    "  --prefill-units P --decode-units D   disaggregated units instead\n"
    "  --step-cost C0,C1,C2,C3,C4   the step-cost coefficients (seconds; per step, token, logits row,\n"
    "                           attended context, chunk), e.g. from a unit's /metrics or lease\n"
    "  --lease FILE             take them from a unit lease (serve --unit-dir) whose model is calibrated\n"
    "                           (default: placement.h's kDefaultStepCost, a small CPU model's order)\n"
    "  --ttft-slo-ms MS (2000), --tbt-slo-ms MS (200), --chunk-tokens N (512), --max-num-seqs N (64),\n"
    "  --unit-cache-blocks N (1024: each unit's RAM prefix cache in trace blocks),\n"
    "  --handoff-us-per-token X (1: the prefill-to-decode transfer)\n"
    "  --json                   one JSON object\n";

Status ParseCoefficients(const std::string& text, std::array<double, router::kStepCostTerms>* out) {
  size_t pos = 0;
  for (int i = 0; i < router::kStepCostTerms; ++i) {
    const size_t end = text.find(',', pos);
    const std::string item = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    char* stop = nullptr;
    const double v = std::strtod(item.c_str(), &stop);
    if (item.empty() || stop != item.c_str() + item.size() || !(v >= 0 && v < 1e3))
      return Status::InvalidArgument("need 5 comma-separated numbers in [0, 1000)");
    (*out)[static_cast<size_t>(i)] = v;
    if ((end == std::string::npos) != (i == router::kStepCostTerms - 1))
      return Status::InvalidArgument("need exactly 5 comma-separated numbers");
    pos = end + 1;
  }
  return Status::Ok();
}

Status ParseRange(const std::string& text, int64_t* lo, int64_t* hi) {
  const size_t comma = text.find(',');
  if (comma == std::string::npos) return Status::InvalidArgument("need MIN,MAX");
  const std::string a = text.substr(0, comma), b = text.substr(comma + 1);
  char *ea = nullptr, *eb = nullptr;
  const long long x = std::strtoll(a.c_str(), &ea, 10), y = std::strtoll(b.c_str(), &eb, 10);
  if (a.empty() || b.empty() || ea != a.c_str() + a.size() || eb != b.c_str() + b.size() || x < 0 || y < x ||
      y > router::TraceLimits::kMaxInputTokens)
    return Status::InvalidArgument("need MIN,MAX with 0 <= MIN <= MAX <= 2097152");
  *lo = x;
  *hi = y;
  return Status::Ok();
}

nlohmann::ordered_json RunJson(router::RoutingPolicy policy, bool store, const router::SimulationResult& r) {
  return {{"policy", router::PolicyName(policy)},
          {"store", store},
          {"ttft_p50_ms", r.ttft_p50_s * 1e3},
          {"ttft_p99_ms", r.ttft_p99_s * 1e3},
          {"tbt_p50_ms", r.tbt_p50_s * 1e3},
          {"tbt_p99_ms", r.tbt_p99_s * 1e3},
          {"hit_rate", r.hit_rate},
          {"slo_attainment", r.slo_attainment},
          {"makespan_s", r.makespan_s},
          {"prefill_busy", r.prefill_busy},
          {"decode_busy", r.decode_busy}};
}

int RunBenchRouter(const std::vector<std::string>& args) {
  const char* cmd = "bench router";
  std::string trace_file, lease_file, policy_name = "all", store = "both";
  int64_t synthetic = 0, block_tokens = router::kTraceBlockTokens;
  router::SyntheticTraceOptions syn;
  router::SimulationOptions sim;
  double ttft_slo_ms = sim.ttft_slo_s * 1e3, tbt_slo_ms = sim.tbt_slo_s * 1e3;
  double handoff_us = sim.handoff_s_per_token * 1e6;
  bool json = false;
  int64_t seed = 0;
  cli::Flags flags(cmd);
  flags.Path("--trace", &trace_file);
  flags.Int("--block-tokens", &block_tokens, int64_t{1}, router::TraceLimits::kMaxBlockTokens);
  flags.Int("--synthetic", &synthetic, int64_t{1}, router::TraceLimits::kMaxRequests);
  flags.Double("--rate", &syn.requests_per_s, 1e-6, 1e6);
  flags.Int("--prefix-groups", &syn.prefix_groups, int64_t{1}, int64_t{1} << 20);
  flags.Double("--zipf", &syn.zipf, 0, 10);
  flags.Custom("--prefix-tokens", "MIN,MAX",
               [&](const std::string& v) { return ParseRange(v, &syn.min_prefix_tokens, &syn.max_prefix_tokens); });
  flags.Custom("--suffix-tokens", "MIN,MAX",
               [&](const std::string& v) { return ParseRange(v, &syn.min_suffix_tokens, &syn.max_suffix_tokens); });
  flags.Custom("--output-tokens", "MIN,MAX",
               [&](const std::string& v) { return ParseRange(v, &syn.min_output_tokens, &syn.max_output_tokens); });
  flags.Int("--seed", &seed, int64_t{0}, int64_t{1} << 62);
  flags.Int("--units", &sim.units, int64_t{1}, router::SimulationLimits::kMaxUnits);
  flags.Int("--prefill-units", &sim.prefill_units, int64_t{1}, router::SimulationLimits::kMaxUnits);
  flags.Int("--decode-units", &sim.decode_units, int64_t{1}, router::SimulationLimits::kMaxUnits);
  flags.Choice<std::string>("--policy", &policy_name,
                            {{"all", "all"},
                             {"round-robin", "round-robin"},
                             {"least-load", "least-load"},
                             {"cache-aware", "cache-aware"},
                             {"cost", "cost"},
                             {"predicted-ttft", "predicted-ttft"}});
  flags.Choice<std::string>("--store", &store, {{"both", "both"}, {"on", "on"}, {"off", "off"}});
  flags.Custom("--step-cost", "C0,C1,C2,C3,C4",
               [&](const std::string& v) { return ParseCoefficients(v, &sim.step_cost); });
  flags.Path("--lease", &lease_file);
  flags.Double("--ttft-slo-ms", &ttft_slo_ms, 1e-3, 1e9);
  flags.Double("--tbt-slo-ms", &tbt_slo_ms, 1e-3, 1e9);
  flags.Int("--chunk-tokens", &sim.chunk_tokens, int64_t{1}, int64_t{1} << 20);
  flags.Int("--max-num-seqs", &sim.max_num_seqs, int64_t{1}, router::SimulationLimits::kMaxNumSeqs);
  flags.Int("--unit-cache-blocks", &sim.unit_cache_blocks, int64_t{1}, router::SimulationLimits::kMaxCacheBlocks);
  flags.Double("--handoff-us-per-token", &handoff_us, 0, 1e5);
  flags.Switch("--json", &json);
  if (int rc = flags.Parse(args)) return rc;
  if (flags.given("--trace") == flags.given("--synthetic"))
    return cli::UsageError(cmd, "give --trace FILE or --synthetic N");
  if (flags.given("--prefill-units") != flags.given("--decode-units"))
    return cli::UsageError(cmd, "give both --prefill-units and --decode-units");
  if (flags.given("--units") && flags.given("--prefill-units"))
    return cli::UsageError(cmd, "give --units or --prefill-units/--decode-units, not both");
  if (flags.given("--step-cost") && flags.given("--lease"))
    return cli::UsageError(cmd, "give --step-cost or --lease, not both");
  sim.ttft_slo_s = ttft_slo_ms / 1e3;
  sim.tbt_slo_s = tbt_slo_ms / 1e3;
  sim.handoff_s_per_token = handoff_us / 1e6;
  std::string cost_source = flags.given("--step-cost") ? "--step-cost" : "default";
  if (!lease_file.empty()) {
    auto text = ReadFileToString(lease_file, router::kMaxLeaseBytes);
    if (!text.ok()) return cli::Fail(cmd, lease_file + ": " + text.status().message());
    auto lease = router::ParseLease(*text);
    if (!lease.ok()) return cli::Fail(cmd, lease_file + ": " + lease.status().message());
    if (!lease->load.calibrated) return cli::Fail(cmd, lease_file + ": the unit's step-cost model is not calibrated");
    sim.step_cost = lease->load.step_cost;
    cost_source = "lease " + lease->unit_id;
  }

  Result<router::Trace> trace = Status::Internal("unset");
  if (!trace_file.empty()) {
    auto text = ReadFileToString(trace_file, router::TraceLimits::kMaxBytes);
    if (!text.ok()) return cli::Fail(cmd, trace_file + ": " + text.status().message());
    trace = router::ParseMooncakeTrace(*text, block_tokens);
    if (!trace.ok()) return cli::Fail(cmd, trace_file + ": " + trace.status().message());
  } else {
    syn.requests = synthetic;
    syn.seed = static_cast<uint64_t>(seed);
    trace = router::SyntheticTrace(syn);
    if (!trace.ok()) return cli::Fail(cmd, "synthetic trace: " + trace.status().message());
  }

  const router::TraceMix mix = router::MixOfTrace(*trace);
  double prompt_sum = 0, output_sum = 0, oracle_sum = 0;
  for (const router::MixRequest& r : mix.requests) {
    prompt_sum += static_cast<double>(r.prompt_tokens);
    output_sum += static_cast<double>(r.output_tokens);
    oracle_sum += static_cast<double>(r.cached_tokens);
  }
  const double n = static_cast<double>(trace->requests.size());
  const double span_s = mix.duration_s;
  const bool disaggregated = sim.prefill_units > 0;
  const int64_t total_units = disaggregated ? sim.prefill_units + sim.decode_units : sim.units;

  nlohmann::ordered_json out;
  out["trace"] = {{"source", trace_file.empty() ? "synthetic" : trace_file},
                  {"requests", trace->requests.size()},
                  {"span_s", span_s},
                  {"mean_input_tokens", prompt_sum / n},
                  {"mean_output_tokens", output_sum / n},
                  {"oracle_hit_rate", oracle_sum / prompt_sum}};
  out["units"] = disaggregated ? nlohmann::ordered_json{{"prefill", sim.prefill_units}, {"decode", sim.decode_units}}
                               : nlohmann::ordered_json{{"colocated", sim.units}};
  out["step_cost"] = {{"source", cost_source}, {"coefficients", sim.step_cost}};
  out["slo"] = {{"ttft_ms", ttft_slo_ms}, {"tbt_ms", tbt_slo_ms}};
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (router::RoutingPolicy policy : router::kAllPolicies) {
    if (policy_name != "all" && policy_name != router::PolicyName(policy)) continue;
    for (bool with_store : {false, true}) {
      if ((store == "on" && !with_store) || (store == "off" && with_store)) continue;
      sim.shared_store = with_store;
      auto result = router::Simulate(*trace, policy, sim);
      if (!result.ok()) return cli::Fail(cmd, result.status().message());
      runs.push_back(RunJson(policy, with_store, *result));
    }
  }
  out["runs"] = runs;

  router::PlannerOptions po;
  po.step_cost = sim.step_cost;
  po.chunk_tokens = sim.chunk_tokens;
  po.max_num_seqs = sim.max_num_seqs;
  po.tbt_slo_s = sim.tbt_slo_s;
  po.total_units = total_units >= 2 ? total_units : 0;
  if (span_s > 0) {
    auto plan = router::PlanPrefillDecode(mix.requests, span_s, po);
    if (!plan.ok()) return cli::Fail(cmd, "planner: " + plan.status().message());
    out["planner"] = {{"prefill_units", plan->prefill_units}, {"decode_units", plan->decode_units},
                      {"prefill_load", plan->prefill_load},   {"decode_load", plan->decode_load},
                      {"decode_batch", plan->decode_batch},   {"tbt_feasible", plan->tbt_feasible}};
    // The recommended split replayed with our policy and the store, beside the colocated rows above.
    if (!disaggregated && total_units >= 2) {
      router::SimulationOptions split = sim;
      split.shared_store = true;
      split.prefill_units = plan->prefill_units;
      split.decode_units = plan->decode_units;
      auto result = router::Simulate(*trace, router::RoutingPolicy::kPredictedTtft, split);
      if (!result.ok()) return cli::Fail(cmd, "planned split: " + result.status().message());
      out["planner"]["simulated"] = RunJson(router::RoutingPolicy::kPredictedTtft, true, *result);
    }
  } else {
    out["planner"] = nullptr;  // every request arrives at once: no rate to plan for
  }

  if (json) {
    std::cout << DumpJson(out) << "\n";
    return 0;
  }
  const auto& t = out["trace"];
  std::printf("trace: %s, %lld requests over %.1f s, mean input %.0f, output %.0f tokens\n",
              t["source"].get<std::string>().c_str(), t["requests"].get<long long>(), span_s,
              t["mean_input_tokens"].get<double>(), t["mean_output_tokens"].get<double>());
  if (disaggregated)
    std::printf("units: %lld prefill + %lld decode", static_cast<long long>(sim.prefill_units),
                static_cast<long long>(sim.decode_units));
  else
    std::printf("units: %lld colocated", static_cast<long long>(sim.units));
  std::printf("; step cost (%s): %g %g %g %g %g; SLO: TTFT %.0f ms, mean TBT %.0f ms\n", cost_source.c_str(),
              sim.step_cost[0], sim.step_cost[1], sim.step_cost[2], sim.step_cost[3], sim.step_cost[4], ttft_slo_ms,
              tbt_slo_ms);
  std::printf("affinity oracle hit rate: %.1f%%\n\n", 100 * t["oracle_hit_rate"].get<double>());
  std::printf("%-15s %-5s %9s %9s %8s %8s %6s %6s %6s%s\n", "policy", "store", "ttft p50", "ttft p99", "tbt p50",
              "tbt p99", "hit", "slo", "busy", disaggregated ? " d-busy" : "");
  for (const auto& r : runs) {
    std::printf("%-15s %-5s %9.0f %9.0f %8.1f %8.1f %5.1f%% %5.1f%% %5.1f%%", r["policy"].get<std::string>().c_str(),
                r["store"].get<bool>() ? "on" : "off", r["ttft_p50_ms"].get<double>(), r["ttft_p99_ms"].get<double>(),
                r["tbt_p50_ms"].get<double>(), r["tbt_p99_ms"].get<double>(), 100 * r["hit_rate"].get<double>(),
                100 * r["slo_attainment"].get<double>(), 100 * r["prefill_busy"].get<double>());
    if (disaggregated) std::printf(" %5.1f%%", 100 * r["decode_busy"].get<double>());
    std::printf("\n");
  }
  if (out["planner"].is_null()) {
    std::printf("\nplanner: the trace has no arrival span, no rate to plan for\n");
  } else {
    const auto& p = out["planner"];
    std::printf("\nplanner: P:D = %lld:%lld (prefill load %.2f units, decode load %.2f units at batch %lld%s)\n",
                p["prefill_units"].get<long long>(), p["decode_units"].get<long long>(),
                p["prefill_load"].get<double>(), p["decode_load"].get<double>(), p["decode_batch"].get<long long>(),
                p["tbt_feasible"].get<bool>() ? "" : "; one sequence's step already exceeds the TBT SLO");
    if (p.contains("simulated")) {
      const auto& r = p["simulated"];
      std::printf("planned split replayed (predicted-ttft, store on): TTFT p50/p99 %.0f/%.0f ms, TBT p50/p99 "
                  "%.1f/%.1f ms, SLO %.1f%%, busy prefill %.1f%% decode %.1f%%\n",
                  r["ttft_p50_ms"].get<double>(), r["ttft_p99_ms"].get<double>(), r["tbt_p50_ms"].get<double>(),
                  r["tbt_p99_ms"].get<double>(), 100 * r["slo_attainment"].get<double>(),
                  100 * r["prefill_busy"].get<double>(), 100 * r["decode_busy"].get<double>());
    }
  }
  return 0;
}

const cli::BenchRegistration kRouterRegistration({"router",
                                                 "router simulator: routing policies on a request trace, P:D planner",
                                                 kRouterUsage, RunBenchRouter});

}  // namespace
}  // namespace deepinfer::bench
