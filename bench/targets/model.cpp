// deepinfer bench model: prefill and decode speed of a DeepSeek-V4 or V3 checkpoint, each against the machine's
// measured limit: prefill FLOPs ÷ measured peak fp32 FLOP/s, decode bytes of weights and KV read per step ÷
// measured memory bandwidth.
#include <array>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "bench/targets/model_v41.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "core/clock.h"
#include "core/hf_config.h"
#include "core/json.h"
#include "core/machine_probe.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "kernels/linear.h"
#include "model/causal_lm.h"
#include "model/sequential_blocks.h"
#include "model/step_profile.h"

namespace deepinfer::bench {
namespace {

using cli::Fail;


constexpr const char* kModelUsage =
    "usage: deepinfer bench model --model DIR [--prompts 512,4096] [--batches 1,8,32] [--context N]\n"
    "                             [--steps N] [--precision exact|bf16] [--kv-precision f32|bf16] [--breakdown]\n"
    "                             [--peer FILE]\n\n"
    "Prefill tokens/s for one prompt of each length (FLOPs against the measured peak fp32 FLOP/s) and decode\n"
    "tokens/s (median step) for each batch size after a context of N tokens per sequence (default 256; bytes of weights and\n"
    "KV read per step against the measured memory bandwidth; routed-expert bytes use the expected number of\n"
    "distinct experts a batch touches; the machine's limits are the better of probes before and after the runs).\n"
    "Also the load time and the peak resident memory of the model runs. --breakdown adds the\n"
    "milliseconds per decode step spent in each phase of the forward pass. --precision bf16 rounds activations\n"
    "to bf16 for the matrix products (bf16 dot-product instructions); --kv-precision bf16 stores KV entries in bf16\n"
    "(half the KV bytes). --peer FILE prints another system's\n"
    "figures for the same runs beside ours (JSON from tools/model/bench_transformers.py).\n";

using PhaseSeconds = std::array<double, static_cast<int>(model::Phase::kCount)>;

struct BreakdownColumn {
  std::string label;
  double total_seconds;
  PhaseSeconds phases;
};

// A table of milliseconds per phase, one column per run.
void PrintBreakdown(const char* title, const char* total_label, const std::vector<BreakdownColumn>& columns,
                    const char* cell_format) {
  std::printf("\n%-34s", title);
  for (const BreakdownColumn& c : columns) std::printf(" %9s", c.label.c_str());
  std::printf("\n");
  auto row = [&](const char* label, auto value) {
    std::printf("%-34s", label);
    for (const BreakdownColumn& c : columns) {
      std::printf(" ");
      std::printf(cell_format, 1e3 * value(c));
    }
    std::printf("\n");
  };
  for (int p = 0; p < static_cast<int>(model::Phase::kCount); ++p)
    row(model::PhaseName(static_cast<model::Phase>(p)), [p](const BreakdownColumn& c) { return c.phases[p]; });
  row(total_label, [](const BreakdownColumn& c) { return c.total_seconds; });
}

// Another system's figures for the same runs: {"system": "...", "prefill": {"512": tokens/s, ...},
// "decode": {"1": tokens/s, ...}}.
struct PeerFigures {
  std::string system;
  std::map<int64_t, double> prefill, decode;
};

Result<PeerFigures> LoadPeer(const std::string& path) {
  DI_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto parsed = ParseJson(text);
  if (!parsed.ok()) return Status::InvalidArgument(path + ": " + parsed.status().message());
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object()) return Status::InvalidArgument(path + ": not a JSON object");
  PeerFigures peer;
  peer.system = "peer";
  if (doc.contains("system")) {
    if (!doc["system"].is_string()) return Status::InvalidArgument(path + ": 'system' must be a string");
    peer.system = doc["system"].get<std::string>();
  }
  for (const char* key : {"prefill", "decode"}) {
    if (!doc.contains(key)) continue;
    if (!doc[key].is_object()) return Status::InvalidArgument(path + ": '" + key + "' must be an object");
    for (const auto& [k, v] : doc[key].items()) {
      if (!v.is_number()) return Status::InvalidArgument(path + ": " + key + "." + k + " must be a number");
      (std::string(key) == "prefill" ? peer.prefill : peer.decode)[std::atoll(k.c_str())] = v.get<double>();
    }
  }
  return peer;
}

int RunBenchModel(const std::vector<std::string>& args) {
  std::string dir;
  std::vector<int64_t> prompts = {512, 4096}, batches = {1, 8, 32};
  int64_t context = 256, steps = 8;
  bool breakdown = false;
  model::LoadOptions load_options;
  std::string peer_path;
  cli::Flags flags("bench model");
  flags.Path("--model", &dir).Required();
  flags.IntList("--prompts", &prompts, 1, 1 << 20);
  flags.IntList("--batches", &batches, 1, 4096);
  flags.Int<int64_t>("--context", &context, 0, 1 << 20);
  flags.Int<int64_t>("--steps", &steps, 1, 1 << 20);
  flags.Switch("--breakdown", &breakdown);
  flags.Path("--peer", &peer_path);
  flags.Choice("--precision", &load_options.precision,
               {{"exact", model::ComputePrecision::kExact}, {"bf16", model::ComputePrecision::kBf16Activations}});
  flags.Choice("--kv-precision", &load_options.kv_precision,
               {{"f32", model::KvPrecision::kF32}, {"bf16", model::KvPrecision::kBF16}});
  if (int rc = flags.Parse(args)) return rc;
  // DeepSeek-V4.1 has rows of its own (bench/targets/model_v41.cpp).
  if (auto hf = HfConfig::Load(dir); hf.ok() && hf->model_type().rfind("deepseek_v41", 0) == 0) {
    if (!peer_path.empty())
      return Fail("bench model", "no peer for DeepSeek-V4.1: transformers' deepseek_v41 is in no release to run");
    return RunBenchModelV41({dir, prompts, batches, context, steps, breakdown, load_options});
  }
  PeerFigures peer;
  if (!peer_path.empty()) {
    auto loaded_peer = LoadPeer(peer_path);
    if (!loaded_peer.ok()) return Fail("bench model", loaded_peer.status().message());
    peer = std::move(*loaded_peer);
  }
  auto peer_cells = [&](const std::map<int64_t, double>& figures, int64_t key, double ours) {
    if (peer_path.empty()) return std::string();
    auto it = figures.find(key);
    char buf[64];
    if (it == figures.end()) std::snprintf(buf, sizeof buf, " %12s %8s", "-", "-");
    else std::snprintf(buf, sizeof buf, " %12.2f %7.1fx", it->second, ours / it->second);
    return std::string(buf);
  };

  // The machine's limits, measured before and after the model runs (the better of the two: a neighbour's
  // burst during one probe must not flatter our fractions).
  BandwidthResult bw = MeasureMemoryBandwidth();
  FlopsResult peak = MeasurePeakFlops();
  ResetPeakRss();
  Stopwatch load_watch;
  load_options.progress = model::TerminalProgressBar("loading " + dir);
  // DeepSeek-V4 or V3 (the rows are the same; config.json names the family).
  auto loaded = model::LoadCausalLM(dir, load_options);
  if (!loaded.ok()) return Fail("bench model", loaded.status().message());
  model::CausalLM& m = **loaded;
  auto hf = HfConfig::Load(dir);
  if (!hf.ok()) return Fail("bench model", hf.status().message());
  std::printf("model: %s (%s, %lld layers, hidden %lld, %lld experts, top-%lld), loaded in %.2f s\n", dir.c_str(),
              m.info().architecture.c_str(), static_cast<long long>(hf->GetInt("num_hidden_layers", 0)),
              static_cast<long long>(m.info().hidden_size), static_cast<long long>(hf->GetInt("n_routed_experts", 0)),
              static_cast<long long>(hf->GetInt("num_experts_per_tok", 0)), load_watch.ElapsedSeconds());
  const int64_t vocab_size = m.info().vocab_size;
  // Runs first, the machine probes after (so that the peak resident memory is the model's own).
  struct PrefillResult {
    int64_t len;
    double seconds, flops;
    PhaseSeconds phases;
  };
  struct DecodeResult {
    int64_t batch;
    double step_seconds, bytes;
    PhaseSeconds phases;
  };
  std::vector<PrefillResult> prefill_results;
  std::vector<DecodeResult> decode_results;

  int64_t max_tokens = context + steps + 1;
  for (int64_t p : prompts) max_tokens = std::max(max_tokens, p);
  int64_t max_batch = 1;
  for (int64_t b : batches) max_batch = std::max(max_batch, b);
  const int64_t pool_blocks = kvcache::BlocksFor(max_tokens) * std::max<int64_t>(max_batch, 1) + 1;
  auto pools = kvcache::KvPools::Create(m.cache_spec(), pool_blocks);
  if (!pools.ok()) return Fail("bench model", pools.status().message());
  kvcache::KvPools& pool = *pools;
  auto token_at = [&](int64_t seq, int64_t i) {
    return static_cast<int32_t>((seq * 7919 + i * 104729 + 17) % vocab_size);
  };

  for (int64_t len : prompts) {
    model::SequentialBlocks blocks(m.cache_spec(), pool);
    auto state = m.NewSequence();
    std::vector<int32_t> tokens(len);
    for (int64_t i = 0; i < len; ++i) tokens[i] = token_at(0, i);
    if (Status s = blocks.Reserve(*state, len); !s.ok()) return Fail("bench model", s.message());
    model::SequenceChunk chunk{state.get(), tokens, model::LogitsWanted::kLast};
    model::ForwardOutput out;
    model::StepProfile::Reset();
    model::StepProfile::Enable(breakdown);
    Stopwatch watch;
    if (Status s = m.Forward(std::span(&chunk, 1), pool, &out); !s.ok()) return Fail("bench model", s.message());
    const double seconds = watch.ElapsedSeconds();
    model::StepProfile::Enable(false);
    const model::ChunkShape shape{0, len, 1};
    auto cost = m.EstimateStepCost(std::span(&shape, 1));
    if (!cost.ok()) return Fail("bench model", cost.status().message());
    prefill_results.push_back({len, seconds, cost->flops, model::StepProfile::Totals()});
  }

  for (int64_t batch : batches) {
    model::SequentialBlocks blocks(m.cache_spec(), pool);
    std::vector<std::unique_ptr<model::SequenceState>> states;
    std::vector<std::vector<int32_t>> prompt_tokens(batch);
    std::vector<model::SequenceChunk> chunks;
    for (int64_t s = 0; s < batch; ++s) {
      states.push_back(m.NewSequence());
      for (int64_t i = 0; i < std::max<int64_t>(context, 1); ++i) prompt_tokens[s].push_back(token_at(s + 1, i));
      if (Status st = blocks.Reserve(*states[s], static_cast<int64_t>(prompt_tokens[s].size())); !st.ok())
        return Fail("bench model", st.message());
      chunks.push_back({states[s].get(), prompt_tokens[s], model::LogitsWanted::kLast});
    }
    model::ForwardOutput out;
    if (Status st = m.Forward(chunks, pool, &out); !st.ok()) return Fail("bench model", st.message());
    std::vector<int32_t> next(batch);
    std::vector<double> step_seconds;
    model::StepProfile::Enable(breakdown);
    for (int64_t step = 0; step <= steps; ++step) {
      if (step == 1) model::StepProfile::Reset();
      chunks.clear();
      for (int64_t s = 0; s < batch; ++s) {
        next[s] = token_at(s + 1, states[s]->num_tokens());
        if (Status st = blocks.Reserve(*states[s], 1); !st.ok())
          return Fail("bench model", st.message());
        chunks.push_back({states[s].get(), std::span(&next[s], 1), model::LogitsWanted::kLast});
      }
      Stopwatch watch;
      if (Status st = m.Forward(chunks, pool, &out); !st.ok()) return Fail("bench model", st.message());
      if (step > 0) step_seconds.push_back(watch.ElapsedSeconds());  // step 0 warms up
    }
    // Bytes per step (the model's cost figures): dense weights once, the distinct routed experts the batch
    // touches, each sequence's KV, at the middle of the timed steps.
    const std::vector<model::ChunkShape> shapes(static_cast<size_t>(batch), model::ChunkShape{context + steps / 2, 1, 1});
    auto cost = m.EstimateStepCost(shapes);
    if (!cost.ok()) return Fail("bench model", cost.status().message());
    const double bytes = cost->weight_bytes + cost->kv_bytes;
    model::StepProfile::Enable(false);
    // The median step: robust to a neighbour's burst on a shared machine.
    std::sort(step_seconds.begin(), step_seconds.end());
    const double median = step_seconds[step_seconds.size() / 2];
    // Phase totals over all timed steps, scaled to one median step.
    auto phases = model::StepProfile::Totals();
    double total = 0;
    for (double sec : step_seconds) total += sec;
    for (double& p : phases) p *= median / total;
    decode_results.push_back({batch, median, bytes, phases});
  }
  const double peak_rss = PeakRssMiB();

  const BandwidthResult bw_after = MeasureMemoryBandwidth();
  const FlopsResult peak_after = MeasurePeakFlops();
  bw.read_gbps = std::max(bw.read_gbps, bw_after.read_gbps);
  peak.fp32_gflops = std::max(peak.fp32_gflops, peak_after.fp32_gflops);
  peak.bf16_gflops = std::max(peak.bf16_gflops, peak_after.bf16_gflops);
  const bool bf16 = load_options.precision == model::ComputePrecision::kBf16Activations && peak.bf16_gflops > 0;
  const double peak_gflops = bf16 ? peak.bf16_gflops : peak.fp32_gflops;
  std::printf("machine: %d threads, memory read %.1f GB/s, peak fp32 %.1f GFLOP/s (%s), peak bf16 dot %.1f GFLOP/s\n",
              ThreadPool::Shared().size(), bw.read_gbps, peak.fp32_gflops, peak.isa.c_str(), peak.bf16_gflops);
  std::printf("precision: %s (prefill %% of the %s peak), KV storage %s\n\n", bf16 ? "bf16 activations" : "exact fp32",
              bf16 ? "bf16 dot" : "fp32 FMA", load_options.kv_precision == model::KvPrecision::kBF16 ? "bf16" : "f32");
  if (!peer_path.empty()) std::printf("peer: %s (from %s)\n\n", peer.system.c_str(), peer_path.c_str());
  const std::string peer_header = peer_path.empty() ? "" : " peer tok/s    ratio";
  std::printf("%-18s %12s %12s %10s%s\n", "prefill", "tokens/s", "GFLOP/s", "of peak", peer_header.c_str());
  for (const PrefillResult& r : prefill_results) {
    const double gflops = r.flops / r.seconds / 1e9;
    std::printf("%-18s %12.1f %12.1f %9.1f%%%s\n", ("prompt " + std::to_string(r.len)).c_str(), r.len / r.seconds,
                gflops, 100.0 * gflops / peak_gflops, peer_cells(peer.prefill, r.len, r.len / r.seconds).c_str());
  }
  std::printf("\n%-18s %12s %12s %10s %14s%s\n", "decode", "tokens/s", "GB/s", "of bw", "MB read/step",
              peer_header.c_str());
  for (const DecodeResult& r : decode_results) {
    const double gbps = r.bytes / r.step_seconds / 1e9;
    std::printf("%-18s %12.1f %12.1f %9.1f%% %14.1f%s\n", ("batch " + std::to_string(r.batch)).c_str(),
                r.batch / r.step_seconds, gbps, 100.0 * gbps / bw.read_gbps, r.bytes / 1e6,
                peer_cells(peer.decode, r.batch, r.batch / r.step_seconds).c_str());
  }
  if (breakdown) {
    std::vector<BreakdownColumn> columns;
    for (const PrefillResult& r : prefill_results)
      columns.push_back({"prompt " + std::to_string(r.len), r.seconds, r.phases});
    if (!columns.empty()) PrintBreakdown("ms per prefill", "whole prefill", columns, "%9.1f");
    columns.clear();
    for (const DecodeResult& r : decode_results)
      columns.push_back({"batch " + std::to_string(r.batch), r.step_seconds, r.phases});
    if (!columns.empty()) PrintBreakdown("ms per decode step", "whole step", columns, "%9.3f");
  }
  std::printf("\npeak resident memory (loading and model runs): %.0f MiB\n", peak_rss);
  return 0;
}

const cli::BenchRegistration kModelRegistration(
    {"model", "prefill and decode speed of a DeepSeek-V3, V4 or V4.1 checkpoint", kModelUsage, RunBenchModel});

}  // namespace
}  // namespace deepinfer::bench
