#include "bench/common.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/clock.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/mapped_file.h"

namespace deepinfer::bench {

namespace fs = std::filesystem;

double BestWall(int runs, const std::function<void()>& fn) {
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    Stopwatch sw;
    fn();
    best = std::min(best, sw.ElapsedSeconds());
  }
  return best;
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double BestCpu(int runs, const std::function<void()>& fn) {
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const double start = ProcessCpuSeconds();
    fn();
    best = std::min(best, ProcessCpuSeconds() - start);
  }
  return best;
}

double PeakRssMiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;  // in kB
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

void ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
}

std::string Ratio(double ours, double theirs) {
  if (theirs <= 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fx", ours / theirs);
  return buf;
}

std::string FindUp(const std::string& relative) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / relative, ec)) return (dir / relative).string();
    if (dir == dir.root_path()) break;
  }
  return "";
}

std::string BenchInputs::Id() const {
  Hasher128 h;
  for (const auto& [name, bytes] : files) {
    const std::string header = name + "\n" + std::to_string(bytes.size()) + "\n";
    h.Update(header.data(), header.size());
    h.Update(bytes.data(), bytes.size());
  }
  const std::string p = params.dump();
  h.Update(p.data(), p.size());
  return h.Digest().ToHex();
}

Status WriteBenchInputs(const std::string& dir, const std::string& target, const BenchInputs& inputs) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError(dir + ": cannot create: " + ec.message());
  auto write = [&](const std::string& name, const std::string& bytes) -> Status {
    const fs::path path = fs::path(dir) / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) return Status::IoError(path.string() + ": cannot write");
    return Status::Ok();
  };
  nlohmann::json manifest = inputs.params;
  manifest["target"] = target;
  manifest["inputs_id"] = inputs.Id();
  nlohmann::json names = nlohmann::json::array();
  for (const auto& [name, bytes] : inputs.files) {
    DI_RETURN_IF_ERROR(write(name, bytes));
    names.push_back(name);
  }
  manifest["files"] = names;
  return write("inputs.json", manifest.dump(1) + "\n");
}

Result<nlohmann::json> ReadPeer(const std::string& path, const std::string& target, const BenchInputs& inputs) {
  DI_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, size_t{16} << 20));
  auto parsed = ParseJson(text);
  if (!parsed.ok()) return Status::InvalidArgument(path + ": " + parsed.status().message());
  nlohmann::json peer = std::move(parsed).value();
  if (!peer.is_object()) return Status::InvalidArgument(path + ": not a JSON object");
  if (!peer.contains("target") || peer["target"] != target) {
    return Status::InvalidArgument(path + ": not a peer result for bench " + target);
  }
  if (!peer.contains("inputs_id") || peer["inputs_id"] != inputs.Id()) {
    return Status::InvalidArgument(path + ": measured on other inputs than this run's (different sizes, tokenizer or "
                                   "generator); rerun the peer script with the same options");
  }
  if (!peer.contains("system") || !peer["system"].is_string()) peer["system"] = "peer";
  return peer;
}

std::string PeerLine(const nlohmann::json& peer, const std::string& path) {
  auto text = [&](const char* key) {
    return peer.contains(key) && peer[key].is_string() ? peer[key].get<std::string>() : std::string("?");
  };
  return "peer: " + text("system") + " (" + path + "; measured " + text("measured_at") + ", load average " +
         text("load_average") + ")";
}

double PeerNumber(const nlohmann::json& peer, const char* key) {
  return peer.is_object() && peer.contains(key) && peer[key].is_number() ? peer[key].get<double>() : 0.0;
}

}  // namespace deepinfer::bench
