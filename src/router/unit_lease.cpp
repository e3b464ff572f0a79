#include "router/unit_lease.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace deepinfer::router {

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

bool IsPlainName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
  }) && name[0] != '.';
}

Status Bad(std::string_view what) { return Status::InvalidArgument("lease: " + std::string(what)); }

Result<int64_t> ReadInt(const Json& obj, const char* key, int64_t lo, int64_t hi) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return Bad(std::string(key) + " must be an integer");
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) return Bad(std::string(key) + " out of range");
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return Bad(std::string(key) + " out of range");
  return v;
}

Result<double> ReadReal(const Json& obj, const char* key, double lo, double hi) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return Bad(std::string(key) + " must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) return Bad(std::string(key) + " out of range");
  return v;
}

constexpr int64_t kMaxCount = int64_t{1} << 40;

}  // namespace

std::string_view UnitRoleName(UnitRole role) {
  switch (role) {
    case UnitRole::kPrefill: return "prefill";
    case UnitRole::kDecode: return "decode";
    case UnitRole::kBoth: break;
  }
  return "both";
}

bool ParseUnitRole(std::string_view text, UnitRole* out) {
  for (UnitRole role : {UnitRole::kBoth, UnitRole::kPrefill, UnitRole::kDecode}) {
    if (text == UnitRoleName(role)) {
      *out = role;
      return true;
    }
  }
  return false;
}

int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string LeaseToJson(const UnitLease& lease) {
  Json load = {{"running", lease.load.running},
               {"waiting", lease.load.waiting},
               {"queued_prefill_tokens", lease.load.queued_prefill_tokens},
               {"max_num_seqs", lease.load.max_num_seqs},
               {"kv_usage", lease.load.kv_usage},
               {"step_cost", lease.load.step_cost},
               {"calibrated", lease.load.calibrated}};
  Json j = {{"format", kLeaseFormat}, {"unit_id", lease.unit_id}, {"url", lease.url},
            {"models", lease.models}, {"version", lease.version},   {"pid", lease.pid},
            {"heartbeat_unix_ms", lease.heartbeat_unix_ms}, {"ttl_ms", lease.ttl_ms}, {"load", load},
            {"role", UnitRoleName(lease.role)}, {"draining", lease.draining}};
  return j.dump();
}

Result<HostPort> ParseUnitUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.size() > 256 || url.substr(0, kScheme.size()) != kScheme) return Bad("url must be http://HOST:PORT");
  std::string_view rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return Bad("url must be http://HOST:PORT");
  std::string_view host = rest.substr(0, colon), port = rest.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Bad("url must be http://HOST:PORT");
  if (!std::all_of(host.begin(), host.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == ':';
      }))
    return Bad("url has a bad host");
  HostPort out{std::string(host), std::stoi(std::string(port))};
  if (out.port < 1 || out.port > 65535) return Bad("url has a bad port");
  return out;
}

Result<UnitLease> ParseLease(std::string_view text) {
  if (text.size() > kMaxLeaseBytes) return Bad("over " + std::to_string(kMaxLeaseBytes) + " bytes");
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad("not a JSON object");
  if (!j.contains("format") || j["format"] != kLeaseFormat) return Bad("format is not " + std::string(kLeaseFormat));
  UnitLease lease;
  auto str = [&](const char* key, std::string* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return Bad(std::string(key) + " must be a string");
    *out = it->get<std::string>();
    return Status::Ok();
  };
  DI_RETURN_IF_ERROR(str("unit_id", &lease.unit_id));
  if (!IsPlainName(lease.unit_id)) return Bad("unit_id must be a plain name");
  DI_RETURN_IF_ERROR(str("url", &lease.url));
  DI_RETURN_IF_ERROR(ParseUnitUrl(lease.url).status());
  DI_RETURN_IF_ERROR(str("version", &lease.version));
  auto models = j.find("models");
  if (models == j.end() || !models->is_array() || models->empty() || models->size() > 64)
    return Bad("models must be a list of 1 to 64 names");
  for (const Json& m : *models) {
    if (!m.is_string() || m.get_ref<const std::string&>().empty()) return Bad("models must be names");
    lease.models.push_back(m.get<std::string>());
  }
  DI_ASSIGN_OR_RETURN(lease.pid, ReadInt(j, "pid", 0, INT32_MAX));
  DI_ASSIGN_OR_RETURN(lease.heartbeat_unix_ms, ReadInt(j, "heartbeat_unix_ms", 0, int64_t{1} << 50));
  DI_ASSIGN_OR_RETURN(lease.ttl_ms, ReadInt(j, "ttl_ms", 1, 3600 * 1000));
  if (auto role = j.find("role"); role != j.end()) {
    if (!role->is_string() || !ParseUnitRole(role->get_ref<const std::string&>(), &lease.role))
      return Bad("role must be \"prefill\", \"decode\" or \"both\"");
  }
  if (auto draining = j.find("draining"); draining != j.end()) {
    if (!draining->is_boolean()) return Bad("draining must be a boolean");
    lease.draining = draining->get<bool>();
  }
  auto load = j.find("load");
  if (load == j.end() || !load->is_object()) return Bad("load must be an object");
  UnitLoad& l = lease.load;
  DI_ASSIGN_OR_RETURN(l.running, ReadInt(*load, "running", 0, kMaxCount));
  DI_ASSIGN_OR_RETURN(l.waiting, ReadInt(*load, "waiting", 0, kMaxCount));
  DI_ASSIGN_OR_RETURN(l.queued_prefill_tokens, ReadInt(*load, "queued_prefill_tokens", 0, kMaxCount));
  DI_ASSIGN_OR_RETURN(l.max_num_seqs, ReadInt(*load, "max_num_seqs", 0, kMaxCount));
  DI_ASSIGN_OR_RETURN(l.kv_usage, ReadReal(*load, "kv_usage", 0, 1));
  auto cost = load->find("step_cost");
  if (cost == load->end() || !cost->is_array() || cost->size() != kStepCostTerms)
    return Bad("step_cost must be a list of " + std::to_string(kStepCostTerms) + " numbers");
  for (int i = 0; i < kStepCostTerms; ++i) {
    const Json& c = (*cost)[static_cast<size_t>(i)];
    // Seconds per unit of each term: non-negative and finite (a step of an hour per token is nonsense).
    if (!c.is_number() || !(c.get<double>() >= 0 && c.get<double>() <= 3600)) return Bad("step_cost out of range");
    l.step_cost[static_cast<size_t>(i)] = c.get<double>();
  }
  auto calibrated = load->find("calibrated");
  if (calibrated == load->end() || !calibrated->is_boolean()) return Bad("calibrated must be a boolean");
  l.calibrated = calibrated->get<bool>();
  return lease;
}

namespace {

// DIR/NAME replaced atomically: written beside as a hidden temporary file, then renamed over it.
Status WriteAtomically(const std::string& dir, const std::string& name, std::string_view text) {
  const fs::path final_path = fs::path(dir) / name;
  const fs::path tmp = fs::path(dir) / ("." + name + ".tmp");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError("writing " + tmp.string() + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return Status::IoError("writing " + tmp.string() + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0)
    return Status::IoError("renaming " + tmp.string() + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

Status WriteLease(const std::string& dir, const UnitLease& lease) {
  if (!IsPlainName(lease.unit_id)) return Status::InvalidArgument("unit id must be a plain name: " + lease.unit_id);
  return WriteAtomically(dir, lease.unit_id + std::string(kLeaseSuffix), LeaseToJson(lease));
}

Status WriteRoleRequest(const std::string& dir, std::string_view unit_id, UnitRole role) {
  if (!IsPlainName(unit_id)) return Status::InvalidArgument("unit id must be a plain name");
  return WriteAtomically(dir, std::string(unit_id) + std::string(kRoleRequestSuffix),
                         Json{{"role", UnitRoleName(role)}}.dump());
}

namespace {

// Up to `limit` + 1 bytes of an open file (one more than allowed tells the caller it is too long); closes it.
std::string ReadAndClose(int fd, size_t limit) {
  std::string text(limit + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

// Removes DIR/<unit_id><suffix>; one that is not there is already removed.
Status RemoveUnitFile(const std::string& dir, std::string_view unit_id, std::string_view suffix) {
  if (!IsPlainName(unit_id)) return Status::InvalidArgument("unit id must be a plain name");
  const fs::path path = fs::path(dir) / (std::string(unit_id) + std::string(suffix));
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return Status::IoError("removing " + path.string() + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

Result<UnitRole> ReadRoleRequest(const std::string& dir, std::string_view unit_id) {
  constexpr size_t kMaxRoleRequestBytes = 4096;
  if (!IsPlainName(unit_id)) return Status::InvalidArgument("unit id must be a plain name");
  const fs::path path = fs::path(dir) / (std::string(unit_id) + std::string(kRoleRequestSuffix));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("no role request");
    return Status::IoError("reading " + path.string() + ": " + std::strerror(errno));
  }
  std::string text = ReadAndClose(fd, kMaxRoleRequestBytes);
  if (text.size() > kMaxRoleRequestBytes) return Status::InvalidArgument(path.string() + ": over 4096 bytes");
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  UnitRole role = UnitRole::kBoth;
  if (!j.is_object() || !j.contains("role") || !j["role"].is_string() ||
      !ParseUnitRole(j["role"].get_ref<const std::string&>(), &role))
    return Status::InvalidArgument(path.string() + ": must be {\"role\": \"prefill\"|\"decode\"|\"both\"}");
  return role;
}

Status RemoveRoleRequest(const std::string& dir, std::string_view unit_id) {
  return RemoveUnitFile(dir, unit_id, kRoleRequestSuffix);
}

Status RemoveLease(const std::string& dir, std::string_view unit_id) { return RemoveUnitFile(dir, unit_id, kLeaseSuffix); }

Result<LeaseScan> ScanLeases(const std::string& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return Status::IoError("reading " + dir + ": " + ec.message());
  LeaseScan scan;
  size_t files = 0;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return Status::IoError("reading " + dir + ": " + ec.message());
    const std::string name = it->path().filename().string();
    if (name.size() <= kLeaseSuffix.size() || name.substr(name.size() - kLeaseSuffix.size()) != kLeaseSuffix ||
        name[0] == '.')
      continue;
    if (++files > kMaxLeaseFiles) {
      scan.errors.push_back(dir + ": more than " + std::to_string(kMaxLeaseFiles) + " lease files; the rest skipped");
      break;
    }
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
      scan.errors.push_back(name + ": " + std::strerror(errno));
      continue;
    }
    const std::string text = ReadAndClose(fd, kMaxLeaseBytes);
    auto lease = ParseLease(text);
    if (!lease.ok()) {
      scan.errors.push_back(name + ": " + lease.status().message());
      continue;
    }
    if (lease->unit_id + std::string(kLeaseSuffix) != name) {
      scan.errors.push_back(name + ": unit_id does not match the file name");
      continue;
    }
    scan.leases.push_back(std::move(*lease));
  }
  std::sort(scan.leases.begin(), scan.leases.end(),
            [](const UnitLease& a, const UnitLease& b) { return a.unit_id < b.unit_id; });
  return scan;
}

}  // namespace deepinfer::router
