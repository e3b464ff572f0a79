#include "core/machine_probe.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/clock.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace deepinfer {

namespace probe_detail {
double FmaLoopScalar(long iterations) {
  float acc[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  const float m = 0.9999f, a = 0.0001f;
  for (long i = 0; i < iterations; ++i)
    for (float& x : acc) x = x * m + a;
  volatile float sink = acc[0] + acc[7];
  (void)sink;
  return 2.0 * 8 * static_cast<double>(iterations);
}
}  // namespace probe_detail

BandwidthResult MeasureMemoryBandwidth(int buffer_mib, int repeats) {
  ThreadPool& pool = ThreadPool::Shared();
  const size_t n = static_cast<size_t>(buffer_mib) * (1 << 20) / sizeof(float);
  AlignedBuffer a(n * sizeof(float)), b(n * sizeof(float)), c(n * sizeof(float));
  float* pa = a.as<float>();
  float* pb = b.as<float>();
  float* pc = c.as<float>();
  const int64_t grain = static_cast<int64_t>((n + pool.size() - 1) / pool.size());
  // First touch from the threads that will read, so pages sit where they are used.
  pool.ParallelFor(static_cast<int64_t>(n), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      pa[i] = 0;
      pb[i] = 1.0f;
      pc[i] = 2.0f;
    }
  }, grain);

  BandwidthResult result;
  std::vector<double> partial(pool.size() * 16, 0.0);
  for (int r = 0; r < repeats; ++r) {
    Stopwatch sw;
    pool.ParallelFor(static_cast<int64_t>(n), [&](int64_t lo, int64_t hi) {
      // 32 independent lanes: the compiler vectorises them without reassociating any sum.
      float acc[32] = {};
      int64_t i = lo;
      for (; i + 32 <= hi; i += 32)
        for (int j = 0; j < 32; ++j) acc[j] += pb[i + j];
      for (; i < hi; ++i) acc[0] += pb[i];
      float total = 0;
      for (float lane : acc) total += lane;
      partial[(lo / grain) * 16] = total;
    }, grain);
    result.read_gbps = std::max(result.read_gbps, n * sizeof(float) / sw.ElapsedSeconds() / 1e9);

    sw.Reset();
    pool.ParallelFor(static_cast<int64_t>(n), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) pa[i] = pb[i] + 3.0f * pc[i];
    }, grain);
    result.triad_gbps = std::max(result.triad_gbps, 3.0 * n * sizeof(float) / sw.ElapsedSeconds() / 1e9);
  }
  volatile double sink = partial[0] + pa[n / 2];
  (void)sink;
  return result;
}

namespace {
double MeasureLoop(double (*loop)(long), double seconds) {
  ThreadPool& pool = ThreadPool::Shared();
  // Calibrate iterations on one thread, then run all threads at once.
  long iterations = 1 << 16;
  for (;;) {
    Stopwatch sw;
    loop(iterations);
    if (sw.ElapsedSeconds() > seconds / 4 || iterations > (1L << 40)) break;
    iterations *= 2;
  }
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    std::atomic<double> flops{0};
    Stopwatch sw;
    pool.ParallelFor(pool.size(), [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        double f = loop(iterations);
        double cur = flops.load();
        while (!flops.compare_exchange_weak(cur, cur + f)) {
        }
      }
    }, 1);
    best = std::max(best, flops.load() / sw.ElapsedSeconds() / 1e9);
  }
  return best;
}
}  // namespace

FlopsResult MeasurePeakFlops(double seconds_per_probe) {
  const CpuFeatures& cpu = GetCpuFeatures();
  FlopsResult result;
  if (cpu.has_avx512_set()) {
    result.isa = "avx512";
    result.fp32_gflops = MeasureLoop(probe_detail::FmaLoopAvx512, seconds_per_probe);
  } else if (cpu.has_avx2_set()) {
    result.isa = "avx2";
    result.fp32_gflops = MeasureLoop(probe_detail::FmaLoopAvx2, seconds_per_probe);
  } else {
    result.isa = "scalar";
    result.fp32_gflops = MeasureLoop(probe_detail::FmaLoopScalar, seconds_per_probe);
  }
  if (cpu.has_avx512bf16_set()) result.bf16_gflops = MeasureLoop(probe_detail::Bf16DotLoopAvx512, seconds_per_probe);
  return result;
}

}  // namespace deepinfer
