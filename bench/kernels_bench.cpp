// Micro-benchmarks of the kernels (Google Benchmark). The machine-relative table is
// `deepinfer bench kernels`; these track single kernels over time.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/number_formats.h"

namespace deepinfer::kernels {
namespace {

struct Weights {
  std::vector<uint8_t> data, scales;
  WeightView view;
};

Weights MakeWeights(WeightFormat format, int64_t out, int64_t in) {
  std::mt19937 rng(1);
  Weights w;
  w.view.format = format;
  w.view.out_features = out;
  w.view.in_features = in;
  int64_t bytes = 0, scale_bytes = 0;
  switch (format) {
    case WeightFormat::kF32:
      bytes = out * in * 4;
      break;
    case WeightFormat::kBF16:
      bytes = out * in * 2;
      break;
    case WeightFormat::kFP8Block:
      bytes = out * in;
      scale_bytes = ((out + 127) / 128) * ((in + 127) / 128);
      w.view.scale_format = ScaleFormat::kUE8M0;
      break;
    case WeightFormat::kMXFP4:
      bytes = out * in / 2;
      scale_bytes = out * in / 32;
      break;
  }
  w.data.resize(static_cast<size_t>(bytes));
  std::normal_distribution<float> normal(0.0f, 0.05f);
  if (format == WeightFormat::kF32 || format == WeightFormat::kBF16) {
    for (int64_t i = 0; i < out * in; ++i) {
      const float v = normal(rng);
      if (format == WeightFormat::kF32) {
        reinterpret_cast<float*>(w.data.data())[i] = v;
      } else {
        reinterpret_cast<uint16_t*>(w.data.data())[i] = FloatToBf16(v);
      }
    }
  } else {
    for (uint8_t& b : w.data) b = static_cast<uint8_t>(rng() & 0x3F);  // finite E4M3 / any E2M1 pair
  }
  w.scales.assign(static_cast<size_t>(scale_bytes), 120);
  w.view.data = w.data.data();
  w.view.scales = w.scales.empty() ? nullptr : w.scales.data();
  return w;
}

void BM_Linear(benchmark::State& state, WeightFormat format, LinearPrecision precision) {
  const int64_t m = state.range(0), out = state.range(1), in = state.range(2);
  const Weights w = MakeWeights(format, out, in);
  std::vector<float> x(static_cast<size_t>(m * in), 0.5f), y(static_cast<size_t>(m * out));
  LinearOptions options;
  options.precision = precision;
  for (auto _ : state) {
    Linear(x.data(), m, in, w.view, y.data(), out, options);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(WeightBytes(w.view)) * 1e-9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2e-9 * static_cast<double>(m * out * in), benchmark::Counter::kIsIterationInvariantRate);
}

#define DEEPINFER_LINEAR_BENCH(name, format, precision) \
  BENCHMARK_CAPTURE(BM_Linear, name, format, precision) \
      ->Args({1, 2048, 4096})                           \
      ->Args({8, 2048, 4096})                           \
      ->Args({128, 2048, 4096})                         \
      ->UseRealTime()

DEEPINFER_LINEAR_BENCH(f32, WeightFormat::kF32, LinearPrecision::kExact);
DEEPINFER_LINEAR_BENCH(bf16, WeightFormat::kBF16, LinearPrecision::kExact);
DEEPINFER_LINEAR_BENCH(fp8, WeightFormat::kFP8Block, LinearPrecision::kExact);
DEEPINFER_LINEAR_BENCH(mxfp4, WeightFormat::kMXFP4, LinearPrecision::kExact);
DEEPINFER_LINEAR_BENCH(bf16_bf16act, WeightFormat::kBF16, LinearPrecision::kBf16Activations);
DEEPINFER_LINEAR_BENCH(mxfp4_bf16act, WeightFormat::kMXFP4, LinearPrecision::kBf16Activations);

// FP8 weights whose codes are all E4M3 subnormals (exponent field 0, nonzero mantissa) or all normal, at
// decode sizes: a decode that feeds subnormal fp32 patterns to the FMA runs far slower on cores that take
// a microcode assist for them, one that keeps every pattern normal runs both at the same speed.
void BM_LinearFp8Codes(benchmark::State& state, bool subnormal) {
  const int64_t m = state.range(0), out = state.range(1), in = state.range(2);
  Weights w = MakeWeights(WeightFormat::kFP8Block, out, in);
  std::mt19937 rng(2);
  for (uint8_t& b : w.data) {
    const auto sign = static_cast<uint8_t>(rng() & 0x80);
    b = subnormal ? static_cast<uint8_t>(sign | (1 + rng() % 7)) : static_cast<uint8_t>(sign | (8 + rng() % 112));
  }
  w.view.fp8_nan_free = !Fp8ContainsNanCodes(w.view);
  std::vector<float> x(static_cast<size_t>(m * in), 0.5f), y(static_cast<size_t>(m * out));
  for (auto _ : state) {
    Linear(x.data(), m, in, w.view, y.data(), out);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(WeightBytes(w.view)) * 1e-9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_LinearFp8Codes, subnormal, true)->Args({1, 2048, 4096})->Args({8, 2048, 4096})->UseRealTime();
BENCHMARK_CAPTURE(BM_LinearFp8Codes, normal, false)->Args({1, 2048, 4096})->Args({8, 2048, 4096})->UseRealTime();

void BM_RmsNorm(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> x(static_cast<size_t>(n), 0.3f), w(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n));
  for (auto _ : state) {
    RmsNorm(x.data(), w.data(), 1e-6f, n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_RmsNorm)->Arg(4096)->Arg(7168);

void BM_Softmax(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto _ : state) {
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 17) * 0.1f;
    Softmax(x.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
}
BENCHMARK(BM_Softmax)->Arg(640)->Arg(4096);

}  // namespace
}  // namespace deepinfer::kernels
BENCHMARK_MAIN();
