// deepinfer eplb: DeepSeek's expert-parallel load balancer (parallel/eplb.h) on loads given on the command
// line, in a file or as a recorded routing trace.
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "parallel/eplb.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kEplbUsage =
    "usage: deepinfer eplb (--weights JSON | --weights-file FILE) --replicas R --ranks K [--groups G]\n"
    "                      [--nodes N] [--json]\n\n"
    "Places each MoE layer's experts on K ranks with R physical slots in all (R - experts redundant\n"
    "copies), by DeepSeek's EPLB algorithm: the heaviest expert per copy gets each extra copy, then copies go,\n"
    "heaviest first, to the least loaded rank with room. Hierarchical when the G expert groups divide\n"
    "evenly over the N nodes (groups packed onto nodes first, then replication and packing within each\n"
    "node), global otherwise.\n\n"
    "  --weights JSON       per-layer loads of the logical experts: [[l0e0, l0e1, ...], [l1e0, ...], ...]\n"
    "  --weights-file FILE  the same in a file, or a routing trace (lines of {\"loads\": [[...], ...]}, one\n"
    "                       per recorded step, summed)\n"
    "  --replicas R         physical experts per layer: at least the experts, a multiple of K\n"
    "  --ranks K            ranks (GPUs, processes), a multiple of N\n"
    "  --groups G           expert groups (contiguous ids; default 1); G must divide the experts\n"
    "  --nodes N            nodes (default 1)\n"
    "  --json               print {\"phy2log\", \"log2phy\", \"logcnt\"} as the reference does: phy2log[l][p] is\n"
    "                       the logical expert in slot p (on rank p / (R/K)), log2phy[l][e] its slots\n"
    "                       padded with -1, logcnt[l][e] its number of copies\n\n"
    "Bounds: at most 1024 layers, 4096 experts, 65536 replicas, 4096 ranks and 16 MiB of input; loads are\n"
    "finite numbers in [0, 1e18].\n";

constexpr size_t kMaxInputBytes = size_t{16} << 20;

void PrintText(const parallel::ExpertLoads& loads, const parallel::ExpertPlacement& p,
               const parallel::EplbShape& shape) {
  std::printf("policy: %s; %lld layers, %lld experts, %lld replicas on %lld ranks (%lld per rank)\n",
              shape.hierarchical() ? "hierarchical" : "global", static_cast<long long>(p.layers),
              static_cast<long long>(p.experts), static_cast<long long>(p.replicas), static_cast<long long>(p.ranks),
              static_cast<long long>(p.experts_per_rank()));
  auto identity = parallel::IdentityPlacement(p.layers, p.experts, p.ranks);
  for (int64_t l = 0; l < p.layers; ++l) {
    const double balanced = parallel::BalanceRatio(parallel::RankLoads(p, l, loads.row(l)));
    std::printf("layer %lld: balance max/mean %.4f", static_cast<long long>(l), balanced);
    if (identity.ok())
      std::printf(" (without the balancer %.4f)",
                  parallel::BalanceRatio(parallel::RankLoads(*identity, l, loads.row(l))));
    std::printf("\n");
    for (int64_t r = 0; r < p.ranks; ++r) {
      std::printf("  rank %lld:", static_cast<long long>(r));
      for (int64_t s = r * p.experts_per_rank(); s < (r + 1) * p.experts_per_rank(); ++s)
        std::printf(" %lld", static_cast<long long>(p.Physical(l, s)));
      std::printf("\n");
    }
  }
}

int RunEplb(const std::vector<std::string>& args) {
  std::string weights, weights_file;
  parallel::EplbShape shape;
  bool json = false;
  Flags flags("eplb");
  flags.String("--weights", &weights);
  flags.Path("--weights-file", &weights_file);
  flags.Int("--replicas", &shape.replicas, int64_t{1}, parallel::EplbLimits::kMaxReplicas).Required();
  flags.Int("--ranks", &shape.ranks, int64_t{1}, parallel::EplbLimits::kMaxRanks).Required();
  flags.Int("--groups", &shape.groups, int64_t{1}, parallel::EplbLimits::kMaxExperts);
  flags.Int("--nodes", &shape.nodes, int64_t{1}, parallel::EplbLimits::kMaxRanks);
  flags.Switch("--json", &json);
  if (int rc = flags.Parse(args)) return rc;
  if (flags.given("--weights") == flags.given("--weights-file"))
    return UsageError("eplb", "give exactly one of --weights and --weights-file");

  std::string text = weights;
  if (flags.given("--weights-file")) {
    auto read = ReadFileToString(weights_file, kMaxInputBytes);
    if (!read.ok()) return Fail("eplb", weights_file + ": " + read.status().message());
    text = std::move(*read);
  }
  auto loads = parallel::ParseExpertLoads(text, kMaxInputBytes);
  if (!loads.ok())
    return Fail("eplb", (flags.given("--weights-file") ? weights_file : std::string("--weights")) + ": " +
                            loads.status().message());
  auto placed = parallel::RebalanceExperts(*loads, shape);
  if (!placed.ok()) return Fail("eplb", placed.status().message());
  if (json) {
    std::cout << DumpJson(placed->ToJson()) << "\n";
  } else {
    PrintText(*loads, *placed, shape);
  }
  return 0;
}

const CommandRegistration kEplbRegistration(
    {"eplb", "DeepSeek's expert-parallel load balancer: expert copies and ranks", kEplbUsage, RunEplb});

}  // namespace
}  // namespace deepinfer::cli
