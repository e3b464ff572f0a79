// Micro-benchmarks of the kernels (Google Benchmark). The machine-relative table is
// `deepinfer bench kernels`; these track single kernels over time.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/attention.h"
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

// One thread (no pool) at the DeepSeek-V3 bench preset's prefill and batch-32 shapes, for the GEMM
// efficiency against one core's FMA peak: a routed expert's gate (or up) and down product at 512 prompt
// tokens (about 48 rows each: 512 x top-6 / 64 experts) and at batch 32 (about 3 rows), the attention
// projections at 512 rows, and a slice of the vocabulary head at 32 rows.
void BM_LinearOneThread(benchmark::State& state, WeightFormat format) {
  const int64_t m = state.range(0), out = state.range(1), in = state.range(2);
  const Weights w = MakeWeights(format, out, in);
  std::vector<float> x(static_cast<size_t>(m * in)), y(static_cast<size_t>(m * out));
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  for (auto _ : state) {
    Linear(x.data(), m, in, w.view, y.data(), out, nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2e-9 * static_cast<double>(m * out * in), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_LinearOneThread, bf16, WeightFormat::kBF16)
    ->Args({48, 512, 1024})
    ->Args({48, 1024, 512})
    ->Args({3, 512, 1024})
    ->Args({3, 1024, 512})
    ->Args({96, 1024, 1024})
    ->Args({192, 1024, 1024})
    ->Args({512, 576, 1024})
    ->Args({512, 3072, 512})
    ->Args({512, 1024, 2048})
    ->Args({32, 3072, 512})
    ->Args({32, 8192, 1024})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_LinearOneThread, fp8, WeightFormat::kFP8Block)
    ->Args({48, 512, 1024})
    ->Args({512, 1024, 2048})
    ->UseRealTime();

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

// MLA's scores: `queries` (row, head) vectors against `keys` 576-wide latents in fp32 (keys_bf16: bf16) cache
// entries, as QueryKeyDotsRows reads them in place, and as a kernels::Linear per 128-key block (which decodes
// each block into a panel first). Same dots, same bits; the ratio of the two is the in-place gain.
void BM_LatentScores(benchmark::State& state, bool keys_bf16, bool through_linear) {
  const int64_t queries = state.range(0), num_keys = state.range(1), dim = 576, block = 128;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<float> q(static_cast<size_t>(queries * dim)), store(static_cast<size_t>(num_keys * dim));
  for (float& v : q) v = dist(rng);
  for (float& v : store) v = dist(rng);
  std::vector<uint16_t> half(store.size());
  FloatToBf16(store.data(), half.data(), static_cast<int64_t>(store.size()));
  std::vector<const float*> keys;
  std::vector<const uint16_t*> hkeys;
  for (int64_t t = 0; t < num_keys; ++t) {
    keys.push_back(store.data() + t * dim);
    hkeys.push_back(half.data() + t * dim);
  }
  std::vector<float> out(static_cast<size_t>(queries * num_keys));
  for (auto _ : state) {
    if (through_linear) {
      WeightView w;
      w.format = keys_bf16 ? WeightFormat::kBF16 : WeightFormat::kF32;
      w.in_features = dim;
      for (int64_t t = 0; t < num_keys; t += block) {
        w.out_features = std::min(block, num_keys - t);
        w.data = keys_bf16 ? static_cast<const void*>(hkeys[t]) : static_cast<const void*>(keys[t]);
        Linear(q.data(), queries, dim, w, out.data() + t, num_keys, nullptr);
      }
    } else if (keys_bf16) {
      QueryKeyDotsRows(q.data(), dim, queries, hkeys.data(), num_keys, dim, 1.0f, out.data(), num_keys);
    } else {
      QueryKeyDotsRows(q.data(), dim, queries, keys.data(), num_keys, dim, 1.0f, out.data(), num_keys);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(queries * num_keys * dim),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
// 16 heads: a decode row (16 queries) and a tile of 8 prefill rows (128), over 256 and 512 positions.
#define DEEPINFER_SCORES_BENCH(name, bf16, linear) \
  BENCHMARK_CAPTURE(BM_LatentScores, name, bf16, linear)->Args({16, 256})->Args({128, 256})->Args({128, 512})
DEEPINFER_SCORES_BENCH(f32_in_place, false, false);
DEEPINFER_SCORES_BENCH(f32_linear_panels, false, true);
DEEPINFER_SCORES_BENCH(bf16_in_place, true, false);
DEEPINFER_SCORES_BENCH(bf16_linear_panels, true, true);

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
