// deepinfer bench ep --simulate: expert parallelism on paper (parallel/ep_simulator.h): bytes per token per
// MoE layer, all-to-all time per layer and predicted step time at each EP size, and the expert load balance
// with and without the balancer on synthetic Zipf routing or a recorded routing trace.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/hf_config.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "parallel/ep_simulator.h"

namespace deepinfer::bench {
namespace {

constexpr const char* kEpUsage =
    "usage: deepinfer bench ep --simulate [--model DIR | --preset v4-flash|v4-pro] [--ep 8,16,32,64,128]\n"
    "                          [--link-gbps X] [--link-latency-us Y] [--tokens-per-rank T]\n"
    "                          [--zipf S | --trace FILE] [--num-redundant-experts R] [--json] ...\n\n"
    "Expert parallelism on paper, for each EP size N (DP attention on N ranks, routed experts sharded):\n"
    "  ranks/token   ranks a token's top-k experts reach (its own included)\n"
    "  B/token/layer dispatch + combine bytes per token per MoE layer, and the part that crosses the link\n"
    "  a2a us        one MoE layer's exchanges (counts, dispatch, combine) for T tokens on every rank\n"
    "  step ms       predicted step: a roofline over the weights (not the engine's fitted cost model) plus\n"
    "                every MoE layer's exchanges, with the balance below applied to the busiest rank\n"
    "  balance       expert load max/mean over ranks per layer per step, averaged: experts placed in order\n"
    "                without the balancer, and with DeepSeek's EPLB and R redundant experts planned on\n"
    "                --window-steps steps and measured on the --eval-steps after them (planned: on the\n"
    "                window itself)\n"
    "The models behind each figure are documented in src/parallel/ep_simulator.h.\n\n"
    "  --model DIR | --preset P  the model's config.json, or DeepSeek-V4-Flash / V4-Pro (default: both)\n"
    "  --ep LIST                 EP sizes (default 8,16,32,64,128)\n"
    "  --link-gbps X             each rank's link, Gbit/s each way (default 100)\n"
    "  --link-latency-us Y       one message (default 5)\n"
    "  --tokens-per-rank T       tokens each rank routes per step (default 128, DeepSeek's decode profile)\n"
    "  --memory-gbs B, --tflops F  one rank's memory bandwidth (default 200 GB/s) and peak (default 4)\n"
    "  --dispatch-dtype fp8|bf16|f32, --combine-dtype bf16|f32, --combine-rows per-rank|per-expert\n"
    "                            the wire format (default DeepSeek's: fp8 with a scale per 128 values out,\n"
    "                            bf16 summed per rank back; deepinfer's bit-exact exchange is f32 both ways\n"
    "                            with rows per expert)\n"
    "  --zipf S                  synthetic routing skew: expert weights 1/i^S in a random order (default 1)\n"
    "  --token-zipf S            the model's hash-routed layers (the first of the simulated ones) send each\n"
    "                            token id to a fixed random set of experts, ids drawn with frequencies\n"
    "                            1/i^S (default 1)\n"
    "  --trace FILE              a recorded routing trace (lines of {\"loads\": [[...]]}) instead; its first\n"
    "                            half plans, its second half is measured\n"
    "  --num-redundant-experts R extra expert copies (default N: one a rank)\n"
    "  --balance-tokens-per-rank tokens per rank per synthetic step (default T), --balance-layers L\n"
    "                            (default 8), --window-steps (8), --eval-steps (4), --seed, --ranks-per-node\n"
    "                            (8: the nodes of the hierarchical policy)\n"
    "  --json                    one JSON object per model\n";

struct EpOptions {
  parallel::WireFormat wire;
  parallel::LinkSpec link;
  parallel::RankSpec rank;
  std::vector<int64_t> ep{8, 16, 32, 64, 128};
  double tokens_per_rank = 128;
  double zipf = 1.0;
  double token_zipf = 1.0;
  int64_t redundant = -1;
  int64_t balance_tokens_per_rank = 0;  // 0: tokens_per_rank
  int64_t balance_layers = 8;
  int64_t window_steps = 8;
  int64_t eval_steps = 4;
  int64_t seed = 0;
  int64_t ranks_per_node = 8;
  std::vector<parallel::ExpertLoads> trace;
  bool json = false;
};

Result<nlohmann::ordered_json> SimulateModel(const parallel::MoeModelShape& m, const EpOptions& o) {
  nlohmann::ordered_json out;
  out["model"] = m.name;
  out["hidden_size"] = m.hidden_size;
  out["moe_layers"] = m.moe_layers;
  out["hash_layers"] = m.hash_layers;
  out["experts"] = m.experts;
  out["experts_per_token"] = m.experts_per_token;
  out["expert_groups"] = m.expert_groups;
  out["dense_params"] = m.dense_params;
  out["expert_params_total"] = m.expert_params * static_cast<double>(m.experts * m.moe_layers);
  out["wire"] = {{"dispatch", parallel::WireDtypeName(o.wire.dispatch)},
                 {"combine", parallel::WireDtypeName(o.wire.combine)},
                 {"combine_rows", o.wire.combine_rows == parallel::CombineRows::kPerRank ? "per-rank" : "per-expert"}};
  out["link"] = {{"gbit_per_s", o.link.gbit_per_s}, {"latency_us", o.link.latency_us}};
  out["rank"] = {{"memory_gb_per_s", o.rank.memory_gb_per_s}, {"tflops", o.rank.tflops}};
  out["tokens_per_rank"] = o.tokens_per_rank;
  const int64_t balance_tokens =
      o.balance_tokens_per_rank > 0 ? o.balance_tokens_per_rank : static_cast<int64_t>(std::ceil(o.tokens_per_rank));
  const int64_t hash_layers = std::min(m.hash_layers, o.balance_layers);
  out["routing"] = o.trace.empty() ? nlohmann::ordered_json{{"zipf", o.zipf},
                                                           {"tokens_per_rank", balance_tokens},
                                                           {"layers", o.balance_layers},
                                                           {"hash_layers", hash_layers},
                                                           {"token_zipf", o.token_zipf},
                                                           {"window_steps", o.window_steps},
                                                           {"eval_steps", o.eval_steps},
                                                           {"seed", o.seed}}
                                   : nlohmann::ordered_json{{"trace_steps", o.trace.size()}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (int64_t n : o.ep) {
    DI_ASSIGN_OR_RETURN(parallel::TokenExchange x, parallel::ExchangePerToken(m, n, o.wire));
    parallel::BalanceOptions bo;
    bo.ranks = n;
    bo.redundant_experts = o.redundant >= 0 ? o.redundant : n;
    bo.ranks_per_node = o.ranks_per_node;
    Result<parallel::BalanceFigures> balance = Status::Internal("unset");
    if (o.trace.empty()) {
      parallel::SyntheticRouting r;
      r.layers = o.balance_layers;
      r.hash_layers = hash_layers;
      r.zipf = o.zipf;
      r.token_zipf = o.token_zipf;
      const int64_t per_rank = o.balance_tokens_per_rank > 0 ? o.balance_tokens_per_rank
                                                              : static_cast<int64_t>(std::ceil(o.tokens_per_rank));
      r.tokens_per_step = per_rank * n;
      r.window_steps = o.window_steps;
      r.eval_steps = o.eval_steps;
      r.seed = static_cast<uint64_t>(o.seed);
      balance = parallel::SimulateBalance(m, r, bo);
    } else {
      balance = parallel::TraceBalance(o.trace, m.expert_groups, bo);
    }
    if (!balance.ok()) return balance.status();
    const parallel::AllToAllTime a2a = parallel::AllToAllPerLayer(x, n, o.tokens_per_rank, o.link);
    const parallel::StepTime plain =
        parallel::PredictStep(m, n, o.tokens_per_rank, x, o.link, o.rank, balance->unbalanced_mean);
    const parallel::StepTime balanced =
        parallel::PredictStep(m, n, o.tokens_per_rank, x, o.link, o.rank, balance->balanced_mean);
    nlohmann::ordered_json row;
    row["ep"] = n;
    row["ranks_per_token"] = x.ranks_reached;
    row["bytes_per_token_per_layer"] = x.total();
    row["dispatch_bytes_per_token_per_layer"] = x.dispatch_bytes;
    row["combine_bytes_per_token_per_layer"] = x.combine_bytes;
    row["remote_bytes_per_token_per_layer"] = x.remote();
    row["a2a_us_per_layer"] = a2a.total_us();
    row["a2a_us"] = {{"counts", a2a.counts_us}, {"dispatch", a2a.dispatch_us}, {"combine", a2a.combine_us}};
    row["step_ms_without_eplb"] = plain.total_ms();
    row["step_ms_with_eplb"] = balanced.total_ms();
    row["step_ms_parts_with_eplb"] = {
        {"dense", balanced.dense_ms}, {"experts", balanced.experts_ms}, {"exchange", balanced.exchange_ms}};
    row["redundant_experts"] = balance->replicas - m.experts;
    row["eplb_policy"] = balance->hierarchical ? "hierarchical" : "global";
    row["balance_without_eplb"] = balance->unbalanced_mean;
    row["balance_without_eplb_max"] = balance->unbalanced_max;
    row["balance_with_eplb"] = balance->balanced_mean;
    row["balance_with_eplb_max"] = balance->balanced_max;
    row["balance_planned"] = balance->planned_mean;
    rows.push_back(std::move(row));
  }
  out["rows"] = std::move(rows);
  return out;
}

void PrintText(const nlohmann::ordered_json& r) {
  std::printf("%s: hidden %lld, %lld MoE layers (%lld hash-routed), %lld experts top-%lld, expert groups %lld; "
              "%.2fB replicated + %.1fB routed-expert parameters\n",
              r["model"].get<std::string>().c_str(), r["hidden_size"].get<long long>(),
              r["moe_layers"].get<long long>(), r["hash_layers"].get<long long>(), r["experts"].get<long long>(),
              r["experts_per_token"].get<long long>(), r["expert_groups"].get<long long>(),
              r["dense_params"].get<double>() / 1e9, r["expert_params_total"].get<double>() / 1e9);
  std::printf("wire: dispatch %s, combine %s %s; link %.0f Gbit/s, %.1f us; rank %.0f GB/s, %.1f TFLOP/s; "
              "%.0f tokens per rank per step\n",
              r["wire"]["dispatch"].get<std::string>().c_str(), r["wire"]["combine"].get<std::string>().c_str(),
              r["wire"]["combine_rows"].get<std::string>().c_str(), r["link"]["gbit_per_s"].get<double>(),
              r["link"]["latency_us"].get<double>(), r["rank"]["memory_gb_per_s"].get<double>(),
              r["rank"]["tflops"].get<double>(), r["tokens_per_rank"].get<double>());
  std::printf("routing: %s\n", DumpJson(r["routing"]).c_str());
  std::printf("%5s %8s %10s %10s %9s %19s %6s %29s\n", "", "", "per token", "and layer", "per layer", "step ms",
              "", "balance max/mean");
  std::printf("%5s %8s %10s %10s %9s %9s %9s %6s %9s %9s %9s\n", "EP", "ranks", "bytes", "remote", "a2a us", "EPLB",
              "no EPLB", "redund", "EPLB", "no EPLB", "planned");
  for (const auto& row : r["rows"]) {
    std::printf("%5lld %8.2f %10.0f %10.0f %9.1f %9.2f %9.2f %6lld %9.4f %9.4f %9.4f\n", row["ep"].get<long long>(),
                row["ranks_per_token"].get<double>(), row["bytes_per_token_per_layer"].get<double>(),
                row["remote_bytes_per_token_per_layer"].get<double>(), row["a2a_us_per_layer"].get<double>(),
                row["step_ms_with_eplb"].get<double>(), row["step_ms_without_eplb"].get<double>(),
                row["redundant_experts"].get<long long>(), row["balance_with_eplb"].get<double>(),
                row["balance_without_eplb"].get<double>(), row["balance_planned"].get<double>());
  }
}

int RunBenchEp(const std::vector<std::string>& args) {
  EpOptions o;
  bool simulate = false;
  std::string model_dir, preset, trace_file;
  cli::Flags flags("bench ep");
  flags.Switch("--simulate", &simulate);
  flags.Path("--model", &model_dir);
  flags.Choice<std::string>("--preset", &preset, {{"v4-flash", "v4-flash"}, {"v4-pro", "v4-pro"}});
  flags.IntList("--ep", &o.ep, 1, parallel::EplbLimits::kMaxRanks, 32);
  flags.Double("--link-gbps", &o.link.gbit_per_s, 0.001, 1e6);
  flags.Double("--link-latency-us", &o.link.latency_us, 0, 1e6);
  flags.Double("--memory-gbs", &o.rank.memory_gb_per_s, 0.001, 1e6);
  flags.Double("--tflops", &o.rank.tflops, 1e-6, 1e6);
  flags.Choice<parallel::WireDtype>("--dispatch-dtype", &o.wire.dispatch,
                                    {{"fp8", parallel::WireDtype::kFp8},
                                     {"bf16", parallel::WireDtype::kBf16},
                                     {"f32", parallel::WireDtype::kF32}});
  flags.Choice<parallel::WireDtype>("--combine-dtype", &o.wire.combine,
                                    {{"bf16", parallel::WireDtype::kBf16}, {"f32", parallel::WireDtype::kF32}});
  flags.Choice<parallel::CombineRows>("--combine-rows", &o.wire.combine_rows,
                                      {{"per-rank", parallel::CombineRows::kPerRank},
                                       {"per-expert", parallel::CombineRows::kPerExpert}});
  flags.Double("--zipf", &o.zipf, 0, 10);
  flags.Double("--token-zipf", &o.token_zipf, 0, 10);
  flags.Path("--trace", &trace_file);
  flags.Int("--num-redundant-experts", &o.redundant, int64_t{0}, parallel::EplbLimits::kMaxReplicas);
  flags.Int("--balance-tokens-per-rank", &o.balance_tokens_per_rank, int64_t{1}, int64_t{1} << 16);
  flags.Double("--tokens-per-rank", &o.tokens_per_rank, 1, 1 << 16);
  flags.Int("--balance-layers", &o.balance_layers, int64_t{1}, int64_t{256});
  flags.Int("--window-steps", &o.window_steps, int64_t{1}, int64_t{1024});
  flags.Int("--eval-steps", &o.eval_steps, int64_t{1}, int64_t{1024});
  flags.Int("--seed", &o.seed, int64_t{0}, int64_t{1} << 62);
  flags.Int("--ranks-per-node", &o.ranks_per_node, int64_t{1}, parallel::EplbLimits::kMaxRanks);
  flags.Switch("--json", &o.json);
  if (int rc = flags.Parse(args)) return rc;
  if (!simulate) return cli::UsageError("bench ep", "only --simulate is available: the calculator");
  if (flags.given("--model") && flags.given("--preset"))
    return cli::UsageError("bench ep", "give --model or --preset, not both");
  if (flags.given("--trace") && flags.given("--zipf"))
    return cli::UsageError("bench ep", "give --zipf or --trace, not both");
  if (!trace_file.empty()) {
    auto text = ReadFileToString(trace_file, size_t{64} << 20);
    if (!text.ok()) return cli::Fail("bench ep", trace_file + ": " + text.status().message());
    auto steps = parallel::ParseRoutingTrace(*text);
    if (!steps.ok()) return cli::Fail("bench ep", trace_file + ": " + steps.status().message());
    o.trace = std::move(*steps);
  }

  std::vector<parallel::MoeModelShape> models;
  if (!model_dir.empty()) {
    auto hf = HfConfig::Load(model_dir);
    if (!hf.ok()) return cli::Fail("bench ep", hf.status().message());
    auto shape = parallel::ModelShapeFromConfig(*hf, model_dir);
    if (!shape.ok()) return cli::Fail("bench ep", shape.status().message());
    models.push_back(std::move(*shape));
  } else {
    for (const char* name : {"v4-flash", "v4-pro"}) {
      if (!preset.empty() && preset != name) continue;
      auto shape = parallel::PresetModelShape(name);
      if (!shape.ok()) return cli::Fail("bench ep", shape.status().message());
      models.push_back(std::move(*shape));
    }
  }
  for (size_t i = 0; i < models.size(); ++i) {
    if (!o.trace.empty() && o.trace[0].experts != models[i].experts)
      return cli::Fail("bench ep", trace_file + ": " + std::to_string(o.trace[0].experts) + " experts per layer, " +
                                       models[i].name + " has " + std::to_string(models[i].experts));
    auto result = SimulateModel(models[i], o);
    if (!result.ok()) return cli::Fail("bench ep", models[i].name + ": " + result.status().message());
    if (o.json) {
      std::cout << DumpJson(*result) << "\n";
    } else {
      if (i > 0) std::printf("\n");
      PrintText(*result);
    }
  }
  return 0;
}

const cli::BenchRegistration kEpRegistration({"ep",
                                             "expert parallelism on paper: exchange bytes, all-to-all and step time, "
                                             "EPLB balance",
                                             kEpUsage, RunBenchEp});

}  // namespace
}  // namespace deepinfer::bench
