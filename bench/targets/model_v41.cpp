#include "bench/targets/model_v41.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "bench/common.h"
#include "cli/command.h"
#include "core/clock.h"
#include "core/hf_config.h"
#include "core/machine_probe.h"
#include "core/thread_pool.h"
#include "model/deepseek_v41/v41_model.h"
#include "model/sequential_blocks.h"
#include "model/step_profile.h"

namespace deepinfer::bench {
namespace {

using cli::Fail;
using model::V41Config;
using model::V41Model;

using PhaseSeconds = std::array<double, static_cast<int>(model::Phase::kCount)>;

// Cache bytes one more position costs a long sequence: V4.1's prefix groups (latents and indexer keys in
// their FP4 formats; the window is bounded per sequence).
double V41BytesPerToken(const V41Config& c) {
  const double latent = c.head_dim / 2.0 + c.head_dim / 16.0, key = c.index_head_dim / 2.0 + c.index_head_dim / 32.0;
  double bytes = 0;
  for (int64_t src : c.kv_source_layer_ids)
    bytes += (latent + (c.layers[src].index_source ? key : 0.0)) / static_cast<double>(c.compress_ratios[src]);
  return bytes;
}

// The same for DeepSeek-V4 with the same layers and head sizes, scheduled as V4-Flash (two window-only
// layers, then CSA ratio 4 with indexer keys and HCA ratio 128 alternating), each layer with its own
// compressed entries, stored as V4 stores them (fp32, or bf16 with --kv-precision bf16).
double V4BytesPerToken(const V41Config& c, double element_bytes) {
  double values = 0;
  for (int64_t l = 2; l < c.num_layers; ++l) {
    if ((l - 2) % 2 == 0) values += (c.head_dim + c.index_head_dim) / 4.0;
    else values += c.head_dim / 128.0;
  }
  return values * element_bytes;
}

}  // namespace

int RunBenchModelV41(const ModelBenchOptions& o) {
  BandwidthResult bw = MeasureMemoryBandwidth();
  FlopsResult peak = MeasurePeakFlops();
  ResetPeakRss();
  Stopwatch load_watch;
  model::LoadOptions load = o.load;
  load.progress = model::TerminalProgressBar("loading " + o.dir);
  auto loaded = V41Model::Load(o.dir, load);
  if (!loaded.ok()) return Fail("bench model", loaded.status().message());
  V41Model& m = **loaded;
  const V41Config& c = m.config();
  std::printf("model: %s (DeepSeek-V4.1: %lld layers, hidden %lld, %lld experts, top-%lld, %zu KV sources, Engram "
              "on %zu layers), loaded in %.2f s\n",
              o.dir.c_str(), static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.n_routed_experts), static_cast<long long>(c.num_experts_per_tok),
              c.kv_source_layer_ids.size(), c.engram.layer_ids.size(), load_watch.ElapsedSeconds());

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
  int64_t max_tokens = o.context + o.steps + 1, max_batch = 1;
  for (int64_t p : o.prompts) max_tokens = std::max(max_tokens, p);
  for (int64_t b : o.batches) max_batch = std::max(max_batch, b);
  auto pools = kvcache::KvPools::Create(m.cache_spec(), kvcache::BlocksFor(max_tokens) * max_batch + 1);
  if (!pools.ok()) return Fail("bench model", pools.status().message());
  auto token_at = [&](int64_t seq, int64_t i) {
    return static_cast<int32_t>((seq * 7919 + i * 104729 + 17) % c.vocab_size);
  };

  for (int64_t len : o.prompts) {
    model::SequentialBlocks blocks(m.cache_spec(), *pools);
    auto state = m.NewSequence();
    std::vector<int32_t> tokens(len);
    for (int64_t i = 0; i < len; ++i) tokens[i] = token_at(0, i);
    if (Status s = blocks.Reserve(*state, len); !s.ok()) return Fail("bench model", s.message());
    model::SequenceChunk chunk{state.get(), tokens, model::LogitsWanted::kLast};
    model::ForwardOutput out;
    model::StepProfile::Reset();
    model::StepProfile::Enable(o.breakdown);
    Stopwatch watch;
    if (Status s = m.Forward(std::span(&chunk, 1), *pools, &out); !s.ok()) return Fail("bench model", s.message());
    const double seconds = watch.ElapsedSeconds();
    model::StepProfile::Enable(false);
    const model::ChunkShape shape{0, len, 1};
    auto cost = m.EstimateStepCost(std::span(&shape, 1));
    if (!cost.ok()) return Fail("bench model", cost.status().message());
    prefill_results.push_back({len, seconds, cost->flops, model::StepProfile::Totals()});
  }

  for (int64_t batch : o.batches) {
    model::SequentialBlocks blocks(m.cache_spec(), *pools);
    std::vector<std::unique_ptr<model::SequenceState>> states;
    std::vector<std::vector<int32_t>> prompt_tokens(batch);
    std::vector<model::SequenceChunk> chunks;
    for (int64_t s = 0; s < batch; ++s) {
      states.push_back(m.NewSequence());
      for (int64_t i = 0; i < std::max<int64_t>(o.context, 1); ++i) prompt_tokens[s].push_back(token_at(s + 1, i));
      if (Status st = blocks.Reserve(*states[s], static_cast<int64_t>(prompt_tokens[s].size())); !st.ok())
        return Fail("bench model", st.message());
      chunks.push_back({states[s].get(), prompt_tokens[s], model::LogitsWanted::kLast});
    }
    model::ForwardOutput out;
    if (Status st = m.Forward(chunks, *pools, &out); !st.ok()) return Fail("bench model", st.message());
    std::vector<int32_t> next(batch);
    std::vector<double> step_seconds;
    double bytes = 0;
    // Phases are always timed here: the Engram share of the step is one of V4.1's rows.
    model::StepProfile::Enable(true);
    for (int64_t step = 0; step <= o.steps; ++step) {
      if (step == 1) model::StepProfile::Reset();
      chunks.clear();
      std::vector<model::ChunkShape> shapes;
      for (int64_t s = 0; s < batch; ++s) {
        next[s] = token_at(s + 1, states[s]->num_tokens());
        if (Status st = blocks.Reserve(*states[s], 1); !st.ok()) return Fail("bench model", st.message());
        shapes.push_back({states[s]->num_tokens(), 1, 1});
        chunks.push_back({states[s].get(), std::span(&next[s], 1), model::LogitsWanted::kLast});
      }
      if (step == o.steps / 2 + 1) {
        auto cost = m.EstimateStepCost(shapes);
        if (!cost.ok()) return Fail("bench model", cost.status().message());
        bytes = cost->weight_bytes + cost->kv_bytes;
      }
      Stopwatch watch;
      if (Status st = m.Forward(chunks, *pools, &out); !st.ok()) return Fail("bench model", st.message());
      if (step > 0) step_seconds.push_back(watch.ElapsedSeconds());
    }
    model::StepProfile::Enable(false);
    std::sort(step_seconds.begin(), step_seconds.end());
    const double median = step_seconds[step_seconds.size() / 2];
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
  const bool bf16 = o.load.precision == model::ComputePrecision::kBf16Activations && peak.bf16_gflops > 0;
  const double peak_gflops = bf16 ? peak.bf16_gflops : peak.fp32_gflops;
  std::printf("machine: %d threads, memory read %.1f GB/s, peak fp32 %.1f GFLOP/s (%s), peak bf16 dot %.1f GFLOP/s\n",
              ThreadPool::Shared().size(), bw.read_gbps, peak.fp32_gflops, peak.isa.c_str(), peak.bf16_gflops);
  std::printf("precision: %s (prefill %% of the %s peak)\n\n", bf16 ? "bf16 activations" : "exact fp32",
              bf16 ? "bf16 dot" : "fp32 FMA");
  std::printf("%-18s %12s %12s %10s\n", "prefill", "tokens/s", "GFLOP/s", "of peak");
  for (const PrefillResult& r : prefill_results) {
    const double gflops = r.flops / r.seconds / 1e9;
    std::printf("%-18s %12.1f %12.1f %9.1f%%\n", ("prompt " + std::to_string(r.len)).c_str(), r.len / r.seconds,
                gflops, 100.0 * gflops / peak_gflops);
  }
  std::printf("\n%-18s %12s %12s %10s %14s %10s\n", "decode", "tokens/s", "GB/s", "of bw", "MB read/step", "Engram");
  for (const DecodeResult& r : decode_results) {
    const double gbps = r.bytes / r.step_seconds / 1e9;
    std::printf("%-18s %12.1f %12.1f %9.1f%% %14.1f %9.1f%%\n", ("batch " + std::to_string(r.batch)).c_str(),
                r.batch / r.step_seconds, gbps, 100.0 * gbps / bw.read_gbps, r.bytes / 1e6,
                100.0 * r.phases[static_cast<int>(model::Phase::kEngram)] / r.step_seconds);
  }
  std::printf("(Engram: the n-gram table lookups, wkv and the gate, as a share of the median decode step)\n");

  // KV bytes per token: this model against DeepSeek-V4 at the same hidden size, and the released shapes.
  auto released = HfConfig::Parse(R"({"model_type": "deepseek_v41_text", "vocab_size": 129280, "hidden_size": 5120,
      "num_hidden_layers": 40, "num_attention_heads": 64, "q_lora_rank": 1280})");
  // The ratio is against V4's bf16 KV (its smaller storage), so it does not flatter V4.1.
  std::printf("\n%-48s %10s %10s %10s %12s\n", "KV cache bytes per token (long context)", "V4.1", "V4 fp32",
              "V4 bf16", "V4 bf16/V4.1");
  auto kv_row = [](const char* label, const V41Config& cfg) {
    const double ours = V41BytesPerToken(cfg), v4 = V4BytesPerToken(cfg, 4), v4b = V4BytesPerToken(cfg, 2);
    std::printf("%-48s %10.1f %10.1f %10.1f %11.1fx\n", label, ours, v4, v4b, v4b / ours);
  };
  kv_row(("this model (hidden " + std::to_string(c.hidden_size) + ", " + std::to_string(c.num_layers) + " layers)").c_str(), c);
  if (released.ok()) {
    auto rc = V41Config::FromHf(*released);
    if (rc.ok()) kv_row("released shapes (hidden 5120, 40 layers)", *rc);
  }
  std::printf("(V4.1: FP4 latents of its KV sources only, shared by the layers after them, and FP4 indexer keys; V4:\n"
              " every CSA/HCA layer's own entries and CSA indexer keys. Windows excluded: bounded per sequence,\n"
              " %lld bytes here for V4.1 (FP8), %lld for V4 in fp32.)\n",
              static_cast<long long>(c.num_layers * c.sliding_window * m.cache_layout().window_bytes),
              static_cast<long long>(c.num_layers * c.sliding_window * c.head_dim * 4));

  if (o.breakdown) {
    auto print = [](const char* title, const std::vector<std::pair<std::string, std::pair<double, PhaseSeconds>>>& cols,
                    const char* format) {
      std::printf("\n%-34s", title);
      for (const auto& col : cols) std::printf(" %9s", col.first.c_str());
      std::printf("\n");
      for (int p = 0; p <= static_cast<int>(model::Phase::kCount); ++p) {
        const bool whole = p == static_cast<int>(model::Phase::kCount);
        std::printf("%-34s", whole ? "whole" : model::PhaseName(static_cast<model::Phase>(p)));
        for (const auto& col : cols) {
          std::printf(" ");
          std::printf(format, 1e3 * (whole ? col.second.first : col.second.second[p]));
        }
        std::printf("\n");
      }
    };
    std::vector<std::pair<std::string, std::pair<double, PhaseSeconds>>> cols;
    for (const PrefillResult& r : prefill_results) cols.push_back({"prompt " + std::to_string(r.len), {r.seconds, r.phases}});
    if (!cols.empty()) print("ms per prefill", cols, "%9.1f");
    cols.clear();
    for (const DecodeResult& r : decode_results) cols.push_back({"batch " + std::to_string(r.batch), {r.step_seconds, r.phases}});
    if (!cols.empty()) print("ms per decode step", cols, "%9.3f");
  }
  std::printf("\npeak resident memory (loading and model runs): %.0f MiB\n", peak_rss);
  return 0;
}

}  // namespace deepinfer::bench
