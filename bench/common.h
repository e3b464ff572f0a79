// What several `deepinfer bench` targets share: timing loops (wall and CPU time), peak resident memory,
// ratio cells, and finding files of the repository the binary was built from.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer::bench {

// The best (smallest) wall time of `runs` calls of fn, in seconds.
double BestWall(int runs, const std::function<void()>& fn);

// The best process CPU time of `runs` calls. Single-thread figures use it: other work on a shared machine
// then does not count against either side (a pool's workers idle meanwhile add nothing).
double BestCpu(int runs, const std::function<void()>& fn);
double ProcessCpuSeconds();

// The process's peak resident set (VmHWM) since the last ResetPeakRss, in MiB; getrusage's lifetime peak
// where /proc is missing.
double PeakRssMiB();
// Starts a new peak for VmHWM (writing 5 to /proc/self/clear_refs).
void ResetPeakRss();

// "2.5x", or "n/a" when theirs is not positive.
std::string Ratio(double ours, double theirs);

// `relative` under the nearest ancestor directory of the running executable that has it, or "".
std::string FindUp(const std::string& relative);

// Peers: another system measured on the same inputs by a script in tools/ (each target's --help names it).
// The protocol: `deepinfer bench T --write-inputs DIR` writes the inputs' files and DIR/inputs.json
// {"target", "inputs_id", params...}; the script reads them, measures, and writes a JSON object
// {"system", "inputs_id", "measured_at", "load_average", figures...}; `deepinfer bench T --peer FILE`
// measures ours and prints the peer's figures beside them, refusing a file whose inputs_id is not the id of
// the inputs this run used (other sizes, another tokenizer, another version of the generator).
struct BenchInputs {
  std::vector<std::pair<std::string, std::string>> files;  // name in DIR, bytes
  nlohmann::json params = nlohmann::json::object();         // what else defines the inputs
  // XXH3-128 over the files and params: equal ids mean the same inputs.
  std::string Id() const;
};
Status WriteBenchInputs(const std::string& dir, const std::string& target, const BenchInputs& inputs);
Result<nlohmann::json> ReadPeer(const std::string& path, const std::string& target, const BenchInputs& inputs);
// "peer: <system> (FILE; measured <when>, load average <la>)".
std::string PeerLine(const nlohmann::json& peer, const std::string& path);
// A number the peer reported, or 0 when it is missing or not a number.
double PeerNumber(const nlohmann::json& peer, const char* key);

}  // namespace deepinfer::bench
