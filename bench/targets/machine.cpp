// deepinfer bench machine: the limits every other benchmark is reported against.
#include <cstdio>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/cpu_features.h"
#include "core/machine_probe.h"
#include "core/thread_pool.h"

namespace deepinfer::bench {
namespace {

int RunBenchMachine(const std::vector<std::string>& args) {
  int mib = 256;
  cli::Flags flags("bench machine");
  flags.Int("--buffer-mib", &mib, 1, 16384);
  if (int rc = flags.Parse(args)) return rc;
  const CpuFeatures& cpu = GetCpuFeatures();
  std::printf("threads: %d\ncpu: %s\nbest isa: %s\n", ThreadPool::Shared().size(), cpu.ToString().c_str(),
              cpu.best_isa().c_str());
  BandwidthResult bw = MeasureMemoryBandwidth(mib);
  std::printf("memory bandwidth: read %.1f GB/s, triad %.1f GB/s (%d MiB buffers)\n", bw.read_gbps, bw.triad_gbps,
              mib);
  FlopsResult flops = MeasurePeakFlops();
  std::printf("peak fp32 FMA: %.1f GFLOP/s (%s)\n", flops.fp32_gflops, flops.isa.c_str());
  if (flops.bf16_gflops > 0) std::printf("peak bf16 dot: %.1f GFLOP/s (avx512_bf16)\n", flops.bf16_gflops);
  return 0;
}

const cli::BenchRegistration kMachineRegistration(
    {"machine", "memory bandwidth and peak FLOP/s of this machine",
     "usage: deepinfer bench machine [--buffer-mib N]\n", RunBenchMachine});

}  // namespace
}  // namespace deepinfer::bench
