// The `deepinfer` command's subcommands. Each lives in its own src/cli/cmd_<name>.cpp and registers itself
// with a static CommandRegistration, so adding a subcommand touches no other file. Their arguments are
// parsed with cli/flags.h. This header and flags.h form the library deepinfer_cli, which the bench targets
// (bench/targets/) link as well; the `deepinfer` executable is main.cpp + cmd_*.cpp + the bench targets.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/log.h"

namespace deepinfer::cli {

struct Command {
  std::string name;
  std::string summary;  // one line for `deepinfer --help`
  std::string usage;    // full help for `deepinfer NAME --help`
  // argv excludes the program and subcommand names. Returns the process exit code.
  std::function<int(const std::vector<std::string>& args)> run;
  // The log threshold the command runs with unless DEEPINFER_LOG says otherwise. Commands print their
  // result on stdout and, on failure, one line on stderr, so informational records stay off; the server
  // logs at info.
  LogLevel log_level = LogLevel::kWarn;
};

std::vector<Command>& Registry();

struct CommandRegistration {
  explicit CommandRegistration(Command command) { Registry().push_back(std::move(command)); }
};

// Prints "deepinfer NAME: message" to stderr and returns 1: the CLI's error convention.
int Fail(const std::string& command, const std::string& message);
// Prints a usage error ("see deepinfer NAME --help") and returns 2.
int UsageError(const std::string& command, const std::string& message);

}  // namespace deepinfer::cli

namespace deepinfer::cli {

// `deepinfer bench TARGET`: each benchmark target lives in its own bench/targets/<target>.cpp and registers
// itself here the same way.
std::vector<Command>& BenchRegistry();
// `deepinfer bench --help`: the targets and their summaries.
std::string BenchHelp();

struct BenchRegistration {
  explicit BenchRegistration(Command command) { BenchRegistry().push_back(std::move(command)); }
};

}  // namespace deepinfer::cli
