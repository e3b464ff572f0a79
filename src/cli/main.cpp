#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/command.h"

#ifndef DEEPINFER_VERSION
#define DEEPINFER_VERSION "unknown"
#endif

namespace deepinfer::cli {

namespace {
void PrintHelp() {
  auto commands = Registry();
  std::sort(commands.begin(), commands.end(), [](const Command& a, const Command& b) { return a.name < b.name; });
  std::cout << "deepinfer " DEEPINFER_VERSION " - inference and serving for DeepSeek models\n\n"
               "usage: deepinfer [--help] [--version] COMMAND [ARGS]\n\ncommands:\n";
  for (const auto& c : commands) {
    std::string name = c.name;
    name.resize(std::max<size_t>(name.size(), 14), ' ');
    std::cout << "  " << name << c.summary << "\n";
  }
  std::cout << "\nRun 'deepinfer COMMAND --help' for a command's options.\n";
}
}  // namespace
}  // namespace deepinfer::cli

int main(int argc, char** argv) {
  using namespace deepinfer::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    PrintHelp();
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "-V") {
    std::cout << "deepinfer " DEEPINFER_VERSION "\n";
    return 0;
  }
  for (const auto& command : Registry()) {
    if (command.name != args[0]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
        std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
      // `bench` forwards --help to its target when one is named.
      if (command.name != "bench" || rest.empty() || rest[0].rfind("-", 0) == 0) {
        std::cout << (command.name == "bench" ? BenchHelp() : command.usage);
        return 0;
      }
    }
    // Errors cross into main as exit codes; an exception arriving here is a bug in a library edge, and
    // the distinct exit code 3 lets the hostile-input harness tell it apart from a handled error.
    if (std::getenv("DEEPINFER_LOG") == nullptr) deepinfer::SetLogLevel(command.log_level);
    try {
      return command.run(rest);
    } catch (const std::bad_alloc&) {
      std::cerr << "deepinfer " << command.name << ": out of memory\n";
    } catch (const std::exception& e) {
      std::cerr << "deepinfer " << command.name << ": internal error: " << e.what() << "\n";
    }
    return 3;
  }
  std::cerr << "deepinfer: unknown command '" << args[0] << "' (see 'deepinfer --help')\n";
  return 2;
}
