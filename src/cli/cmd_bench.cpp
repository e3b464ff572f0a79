// deepinfer bench TARGET [ARGS]: dispatches to the benchmark targets registered with BenchRegistration.
#include <algorithm>
#include <iostream>

#include "cli/command.h"

namespace deepinfer::cli {

std::vector<Command>& BenchRegistry() {
  static std::vector<Command> targets;
  return targets;
}

std::string BenchHelp() {
  auto targets = BenchRegistry();
  std::sort(targets.begin(), targets.end(), [](const Command& a, const Command& b) { return a.name < b.name; });
  std::string usage = "usage: deepinfer bench TARGET [ARGS]\n\nMeasures speed and memory; prints our figures beside the machine's limits\n"
                      "and, where a peer runs here, the peer's figure and the ratio.\n\ntargets:\n";
  for (const auto& t : targets) {
    std::string name = t.name;
    name.resize(std::max<size_t>(name.size(), 12), ' ');
    usage += "  " + name + t.summary + "\n";
  }
  usage += "\nRun 'deepinfer bench TARGET --help' for a target's options.\n";
  return usage;
}

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

const CommandRegistration kRegistration({"bench", "benchmarks (tokenize, machine, ...)", "", RunBench});

}  // namespace
}  // namespace deepinfer::cli
