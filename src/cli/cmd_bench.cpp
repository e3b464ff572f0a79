// deepinfer bench TARGET [ARGS]: dispatches to the benchmark targets registered with BenchRegistration.
#include <algorithm>
#include <iostream>

#include "cli/command.h"

namespace deepinfer::cli {

namespace {

int RunBench(const std::vector<std::string>& args) {
  if (args.empty()) return UsageError("bench", "TARGET is required");
  for (const auto& target : BenchRegistry()) {
    if (target.name != args[0]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (std::find(rest.begin(), rest.end(), "--help") != rest.end()) {
      std::cout << target.usage;
      return 0;
    }
    return target.run(rest);
  }
  return UsageError("bench", "unknown target '" + args[0] + "'");
}

const CommandRegistration kBenchRegistration({"bench", "benchmarks (tokenize, machine, ...)", "", RunBench});

}  // namespace
}  // namespace deepinfer::cli
