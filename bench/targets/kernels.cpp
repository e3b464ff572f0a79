// deepinfer bench kernels: Linear over every stored weight format, as GEMV (decode, memory-bound: GB/s of
// weight bytes against the measured memory bandwidth) and as GEMM (prefill, compute-bound: GFLOP/s against
// the measured peak).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/aligned_buffer.h"
#include "core/clock.h"
#include "core/machine_probe.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/linear.h"
#include "kernels/linear_dispatch.h"

namespace deepinfer::bench {
namespace {

using kernels::WeightFormat;
using kernels::WeightView;

struct Shape {
  const char* name;
  int64_t out, in;
};

uint64_t NextRandom(uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

// One weight matrix with plausible (finite, moderate) random contents.
struct BenchWeight {
  AlignedBuffer data, scales;
  WeightView view;
};

BenchWeight MakeWeight(WeightFormat format, const Shape& shape, uint64_t seed) {
  BenchWeight b;
  WeightView& v = b.view;
  v.format = format;
  v.out_features = shape.out;
  v.in_features = shape.in;
  const int64_t elements = shape.out * shape.in;
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  switch (format) {
    case WeightFormat::kF32: {
      b.data = AlignedBuffer(static_cast<size_t>(elements) * 4);
      uint32_t* p = b.data.as<uint32_t>();
      for (int64_t i = 0; i < elements; ++i) p[i] = 0x3C000000u | (NextRandom(state) & 0x807FFFFFu);
      break;
    }
    case WeightFormat::kBF16: {
      b.data = AlignedBuffer(static_cast<size_t>(elements) * 2);
      uint16_t* p = b.data.as<uint16_t>();
      for (int64_t i = 0; i < elements; ++i) p[i] = static_cast<uint16_t>(0x3C00u | (NextRandom(state) & 0x807Fu));
      break;
    }
    case WeightFormat::kFP8Block: {
      b.data = AlignedBuffer(static_cast<size_t>(elements));
      uint8_t* p = b.data.data();
      for (int64_t i = 0; i < elements; ++i) {
        uint8_t byte = static_cast<uint8_t>(NextRandom(state));
        if ((byte & 0x7F) == 0x7F) byte ^= 1;  // no NaN
        p[i] = byte;
      }
      const int64_t blocks = ((shape.out + 127) / 128) * ((shape.in + 127) / 128);
      b.scales = AlignedBuffer(static_cast<size_t>(blocks));
      for (int64_t i = 0; i < blocks; ++i) b.scales.data()[i] = static_cast<uint8_t>(118 + NextRandom(state) % 8);
      v.scale_format = kernels::ScaleFormat::kUE8M0;
      break;
    }
    case WeightFormat::kMXFP4: {
      b.data = AlignedBuffer(static_cast<size_t>(elements / 2));
      for (int64_t i = 0; i < elements / 2; ++i) b.data.data()[i] = static_cast<uint8_t>(NextRandom(state));
      b.scales = AlignedBuffer(static_cast<size_t>(elements / 32));
      for (int64_t i = 0; i < elements / 32; ++i)
        b.scales.data()[i] = static_cast<uint8_t>(120 + NextRandom(state) % 8);
      break;
    }
  }
  v.data = b.data.data();
  v.scales = b.scales.empty() ? nullptr : b.scales.data();
  return b;
}

BenchWeight CopyWeight(const BenchWeight& from) {
  BenchWeight b;
  b.view = from.view;
  b.data = AlignedBuffer(from.data.size());
  std::memcpy(b.data.data(), from.data.data(), from.data.size());
  b.view.data = b.data.data();
  if (!from.scales.empty()) {
    b.scales = AlignedBuffer(from.scales.size());
    std::memcpy(b.scales.data(), from.scales.data(), from.scales.size());
    b.view.scales = b.scales.data();
  }
  return b;
}

const char* FormatName(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
      return "F32";
    case WeightFormat::kBF16:
      return "BF16";
    case WeightFormat::kFP8Block:
      return "FP8";
    case WeightFormat::kMXFP4:
      return "MXFP4";
  }
  return "?";
}

struct Config {
  kernels::Isa isa = kernels::BestIsa();
  kernels::LinearOptions options;
  double seconds = 0.3;
  int64_t gemm_m = 512;
  std::vector<int64_t> ms = {1, 2, 8, 32};
  bool bench_shapes = true, model_shapes = true;
  // FP8 weights marked NaN-free after one check, as a model loader can do at load (--fp8-unchecked: not).
  bool fp8_checked = true;
  std::vector<WeightFormat> formats = {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kFP8Block,
                                       WeightFormat::kMXFP4};
};

// Seconds per call, cycling through `weights` so that GEMV streams from memory rather than from cache.
double TimeLinear(const Config& config, const std::vector<BenchWeight>& weights, const float* x, int64_t m, float* y) {
  const WeightView& first = weights[0].view;
  auto call = [&](size_t i) {
    kernels::LinearWithIsa(config.isa, x, m, first.in_features, weights[i % weights.size()].view, y, first.out_features,
                           config.options, &ThreadPool::Shared());
  };
  call(0);  // warm-up
  Stopwatch total;
  size_t calls = 0;
  double best = 1e30;
  while (total.ElapsedSeconds() < config.seconds || calls < 3) {
    Stopwatch one;
    call(calls + 1);
    best = std::min(best, one.ElapsedSeconds());
    ++calls;
  }
  return best;
}

int RunBenchKernels(const std::vector<std::string>& args) {
  Config config;
  bool fp8_unchecked = false, bf16_activations = false;
  std::string which_shapes = "all";
  std::vector<std::pair<std::string, kernels::Isa>> isas;
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512, kernels::Isa::kAvx512Bf16})
    isas.emplace_back(std::string(kernels::IsaName(isa)), isa);
  std::vector<std::pair<std::string, WeightFormat>> formats;
  for (WeightFormat f : config.formats) formats.emplace_back(FormatName(f), f);
  WeightFormat only_format = WeightFormat::kF32;
  cli::Flags flags("bench kernels");
  flags.Choice("--isa", &config.isa, isas);
  flags.Switch("--fp8-unchecked", &fp8_unchecked);
  flags.Switch("--bf16-activations", &bf16_activations);
  flags.Double("--seconds", &config.seconds, 1e-3, 3600);
  flags.Int<int64_t>("--gemm-m", &config.gemm_m, 0, 65536);
  flags.IntList("--m", &config.ms, 1, 65536);
  flags.Choice<std::string>("--shapes", &which_shapes, {{"bench", "bench"}, {"model", "model"}, {"all", "all"}});
  flags.Choice("--format", &only_format, formats);
  if (int rc = flags.Parse(args)) return rc;
  if (!kernels::IsaSupported(config.isa)) {
    return cli::Fail("bench kernels", "ISA " + std::string(kernels::IsaName(config.isa)) + " is not available here");
  }
  config.fp8_checked = !fp8_unchecked;
  if (bf16_activations) config.options.precision = kernels::LinearPrecision::kBf16Activations;
  config.bench_shapes = which_shapes == "bench" || which_shapes == "all";
  config.model_shapes = which_shapes == "model" || which_shapes == "all";
  if (flags.given("--format")) config.formats = {only_format};

  std::printf("threads: %d, isa: %s, precision: %s\n", ThreadPool::Shared().size(),
              std::string(kernels::IsaName(config.isa)).c_str(),
              config.options.precision == kernels::LinearPrecision::kExact ? "exact fp32" : "bf16 activations");
  const BandwidthResult bandwidth = MeasureMemoryBandwidth();
  const FlopsResult flops = MeasurePeakFlops();
  const bool bf16_peak =
      config.options.precision == kernels::LinearPrecision::kBf16Activations && flops.bf16_gflops > 0;
  const double peak = bf16_peak ? flops.bf16_gflops : flops.fp32_gflops;
  std::printf("measured: memory read %.1f GB/s, peak %s %.1f GFLOP/s\n\n", bandwidth.read_gbps,
              bf16_peak ? "bf16 dot" : "fp32 FMA", peak);
  std::printf("%-6s %-14s %5s %10s %9s %7s %10s %7s\n", "format", "shape (out,in)", "m", "us/call", "GB/s", "of bw",
              "GFLOP/s", "of pk");

  // "bench": large matrices; "model": the per-layer matrices of the small V4 presets, which one decode
  // step multiplies one after another (their per-call overheads matter as much as the streaming).
  std::vector<Shape> shapes;
  if (config.bench_shapes) {
    shapes.push_back({"expert", 2048, 4096});
    shapes.push_back({"dense", 8192, 4096});
  }
  if (config.model_shapes) {
    for (const Shape& s : {Shape{"model", 512, 1024}, Shape{"model", 1024, 512}, Shape{"model", 4096, 512},
                           Shape{"model", 2048, 1024}, Shape{"model", 1024, 1024}}) {
      shapes.push_back(s);
    }
  }
  for (WeightFormat format : config.formats) {
    for (const Shape& shape : shapes) {
      BenchWeight probe = MakeWeight(format, shape, 0);
      if (format == WeightFormat::kFP8Block && config.fp8_checked) {
        probe.view.fp8_nan_free = !kernels::Fp8ContainsNanCodes(probe.view);
      }
      const int64_t bytes = kernels::WeightBytes(probe.view);
      // Enough distinct copies that one pass over them all far exceeds the caches (contents are
      // irrelevant to the speed, so they are copies of one random matrix).
      const int64_t copies = std::max<int64_t>(2, (int64_t{256} << 20) / bytes);
      std::vector<BenchWeight> weights;
      weights.reserve(static_cast<size_t>(copies));
      for (int64_t c = 0; c < copies; ++c) weights.push_back(CopyWeight(probe));
      std::vector<int64_t> ms = config.ms;
      if (config.gemm_m > 0) ms.push_back(config.gemm_m);
      const int64_t max_m = *std::max_element(ms.begin(), ms.end());
      std::vector<float> x(static_cast<size_t>(max_m * shape.in));
      uint64_t state = 7;
      for (float& v : x) v = static_cast<float>(static_cast<int64_t>(NextRandom(state) % 2001) - 1000) / 1000.0f;
      std::vector<float> y(static_cast<size_t>(max_m * shape.out));
      char label[64];
      std::snprintf(label, sizeof(label), "%s %lldx%lld", shape.name, static_cast<long long>(shape.out),
                    static_cast<long long>(shape.in));
      for (int64_t m : ms) {
        const double seconds = TimeLinear(config, weights, x.data(), m, y.data());
        const double gbps = static_cast<double>(bytes) / seconds / 1e9;
        const double gflops = 2.0 * static_cast<double>(m * shape.out * shape.in) / seconds / 1e9;
        std::printf("%-6s %-14s %5lld %10.1f %9.1f %6.0f%% %10.1f %6.0f%%\n", FormatName(format), label,
                    static_cast<long long>(m), seconds * 1e6, gbps, 100.0 * gbps / bandwidth.read_gbps, gflops,
                    100.0 * gflops / peak);
      }
    }
  }
  return 0;
}

const cli::BenchRegistration kKernelsRegistration(
    {"kernels", "Linear GEMV/GEMM throughput per weight format, against the machine's limits",
     "usage: deepinfer bench kernels [--isa scalar|avx2|avx512|avx512bf16] [--bf16-activations]\n"
     "                               [--format F32|BF16|FP8|MXFP4] [--seconds S] [--gemm-m M]\n"
     "                               [--m 1,2,8,32] [--shapes bench|model|all] [--fp8-unchecked]\n"
     "  --gemm-m 0 leaves out the prefill-sized product; DEEPINFER_THREADS=1 measures one thread.\n",
     RunBenchKernels});

}  // namespace
}  // namespace deepinfer::bench
