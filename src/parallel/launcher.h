// `deepinfer serve ... --data-parallel-size N` started without a launcher: the command runs itself again as
// a unit of N ranks under Open MPI's mpirun, found on PATH (DEEPINFER_MPIRUN names another). mpirun gets
// `--allow-run-as-root` when this process runs as root and `--oversubscribe` when N exceeds the cores (both
// Open MPI's; docs/parallel.md). SIGINT and SIGTERM are forwarded to mpirun, which passes them to every
// rank (about a second later, then kills them a few seconds after); a unit still running `deadline_s` after
// the first signal is killed (mpirun, its process group and the ranks it started on this host), so a stop
// never hangs; a launcher killed outright sends mpirun SIGTERM (its parent-death signal).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer::parallel {

struct RelaunchOptions {
  int ranks = 2;
  std::string subcommand;          // "serve"
  std::vector<std::string> args;   // the subcommand's arguments, as given
  double deadline_s = 30;          // after the first forwarded signal
};

// The path of mpirun, or an error naming what to install.
Result<std::string> FindMpirun();
// Runs the unit and returns the exit code to exit with: mpirun's, or 128 + the signal that ended it. The
// caller blocks SIGINT and SIGTERM in every thread first (they are taken here, by sigtimedwait).
Result<int> RunUnderMpirun(const RelaunchOptions& options);

}  // namespace deepinfer::parallel
