// The router's placement decision (router/placement.h): predicted TTFT and TBT on every unit and the
// ranking, for 4, 16 and 64 units with varied load. The decision must stay far below a request's own
// cost; the p99 over single decisions is reported as a counter (seconds).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "router/placement.h"

namespace deepinfer::router {
namespace {

std::vector<PlacementLoad> Units(int n) {
  std::mt19937_64 rng(7);
  std::vector<PlacementLoad> units(static_cast<size_t>(n));
  for (auto& u : units) {
    u.published.running = static_cast<int64_t>(rng() % 64);
    u.published.waiting = static_cast<int64_t>(rng() % 8);
    u.published.queued_prefill_tokens = static_cast<int64_t>(rng() % 8192);
    u.published.max_num_seqs = 64;
    u.published.step_cost = {2e-3, 1e-4, 5e-5, 1e-9, 1e-5};
    u.published.calibrated = true;
    u.placed_streams = static_cast<int64_t>(rng() % 4);
  }
  return units;
}

void BM_Place(benchmark::State& state) {
  const std::vector<PlacementLoad> units = Units(static_cast<int>(state.range(0)));
  const PlacementSlo slo{.ttft_s = 2.0, .tbt_s = 0.05};
  std::vector<double> samples;
  samples.reserve(1 << 16);
  int64_t prompt = 100;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    PlacementDecision d = Place(units, prompt, slo);
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(d);
    if (samples.size() < samples.capacity()) samples.push_back(std::chrono::duration<double>(t1 - t0).count());
    prompt = prompt % 4000 + 37;
  }
  std::sort(samples.begin(), samples.end());
  if (!samples.empty()) state.counters["p99_s"] = samples[samples.size() * 99 / 100];
}
BENCHMARK(BM_Place)->Arg(4)->Arg(16)->Arg(64);

}  // namespace
}  // namespace deepinfer::router

BENCHMARK_MAIN();
