// Measures what this machine can do, so that benchmarks report their figures as a fraction of it:
// memory bandwidth (read and STREAM-style triad) and peak FLOP/s (FP32 FMA, and BF16 dot where present).
#pragma once

#include <string>

namespace deepinfer {

struct BandwidthResult {
  double read_gbps = 0;   // sum over a buffer far larger than the caches, all pool threads
  double triad_gbps = 0;  // a[i] = b[i] + s * c[i], counting 3 streams
};

struct FlopsResult {
  double fp32_gflops = 0;  // fused multiply-add, 2 FLOPs each, all pool threads, best ISA
  double bf16_gflops = 0;  // vdpbf16ps (AVX512_BF16), 0 where the CPU lacks it
  std::string isa;         // the ISA the FP32 figure was measured with
};

// `buffer_mib` per array; the best of `repeats` runs.
BandwidthResult MeasureMemoryBandwidth(int buffer_mib = 256, int repeats = 5);
FlopsResult MeasurePeakFlops(double seconds_per_probe = 0.2);

namespace probe_detail {
// Per-thread FMA loops, one per ISA (compiled with that ISA's flags). Each returns FLOPs done.
double FmaLoopScalar(long iterations);
double FmaLoopAvx2(long iterations);
double FmaLoopAvx512(long iterations);
double Bf16DotLoopAvx512(long iterations);
}  // namespace probe_detail

}  // namespace deepinfer
