#include "cli/command.h"

#include <algorithm>
#include <iostream>

#include "cli/flags.h"

namespace deepinfer::cli {

std::vector<Command>& Registry() {
  static std::vector<Command> commands;
  return commands;
}

std::vector<Command>& BenchRegistry() {
  static std::vector<Command> targets;
  return targets;
}

int Fail(const std::string& command, const std::string& message) {
  std::cerr << "deepinfer " << command << ": " << message << "\n";
  return 1;
}

int UsageError(const std::string& command, const std::string& message) {
  std::cerr << UsageLine(command, message) << "\n";
  return 2;
}

std::string BenchHelp() {
  auto targets = BenchRegistry();
  std::sort(targets.begin(), targets.end(), [](const Command& a, const Command& b) { return a.name < b.name; });
  std::string usage = "usage: deepinfer bench TARGET [ARGS]\n\nMeasures speed and memory; prints our figures beside the machine's limits\n"
                      "and, where a peer's figures are given (--peer FILE), the peer's figure and the ratio.\n\ntargets:\n";
  for (const auto& t : targets) {
    std::string name = t.name;
    name.resize(std::max<size_t>(name.size(), 12), ' ');
    usage += "  " + name + t.summary + "\n";
  }
  usage += "\nRun 'deepinfer bench TARGET --help' for a target's options.\n";
  return usage;
}

}  // namespace deepinfer::cli
