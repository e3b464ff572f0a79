#include "parallel/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <optional>
#include <thread>

namespace deepinfer::parallel {

Result<std::string> FindMpirun() {
  if (const char* named = std::getenv("DEEPINFER_MPIRUN"); named != nullptr && *named != '\0') {
    if (access(named, X_OK) != 0) return Status::NotFound(std::string("DEEPINFER_MPIRUN=") + named + " is not an executable");
    return std::string(named);
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  size_t at = 0;
  while (at <= dirs.size()) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(at, end - at);
    if (!dir.empty()) {
      const std::string candidate = dir + "/mpirun";
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    at = end + 1;
  }
  return Status::NotFound("--data-parallel-size needs Open MPI's mpirun on PATH (apt-get install openmpi-bin "
                          "libopenmpi-dev; docs/parallel.md), or start the unit with `mpirun -n N deepinfer ...`");
}

namespace {

// The processes whose parent is `parent` (mpirun's ranks on this host: mpirun gives each a session of its own).
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == parent) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

}  // namespace

Result<int> RunUnderMpirun(const RelaunchOptions& options) {
  DI_ASSIGN_OR_RETURN(const std::string mpirun, FindMpirun());
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return Status::IoError("cannot tell this executable's path: " + ec.message());
  std::vector<std::string> argv{mpirun, "-n", std::to_string(options.ranks)};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  if (options.ranks > static_cast<int>(std::thread::hardware_concurrency())) argv.push_back("--oversubscribe");
  argv.push_back(self);
  argv.push_back(options.subcommand);
  argv.insert(argv.end(), options.args.begin(), options.args.end());
  std::vector<char*> c_argv;
  for (std::string& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) return Status::IoError(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    setpgid(0, 0);  // a group of its own: what the deadline kills, with the ranks it started
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // a launcher killed outright still stops the unit
    if (getppid() != parent) _exit(1);  // it died before prctl
    sigprocmask(SIG_UNBLOCK, &signals, nullptr);
    execv(c_argv[0], c_argv.data());
    _exit(127);
  }
  setpgid(child, child);
  std::optional<std::chrono::steady_clock::time_point> deadline;
  while (true) {
    int status = 0;
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    if (deadline && std::chrono::steady_clock::now() >= *deadline) {
      for (pid_t rank : ChildrenOf(child)) kill(rank, SIGKILL);
      kill(-child, SIGKILL);
      waitpid(child, &status, 0);
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%.1f", options.deadline_s);
      return Status::DeadlineExceeded(std::string("the unit did not stop within ") + seconds +
                                      " s of the signal: killed mpirun and its ranks");
    }
    const timespec poll{0, 50 * 1000 * 1000};
    const int signal_number = sigtimedwait(&signals, nullptr, &poll);
    if (signal_number > 0) {
      kill(child, signal_number);
      if (!deadline)
        deadline = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(options.deadline_s));
    }
  }
}

}  // namespace deepinfer::parallel
