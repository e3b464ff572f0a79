#include "core/hf_config.h"

#include <filesystem>

#include "core/json.h"
#include "core/mapped_file.h"

namespace deepinfer {

Result<HfConfig> HfConfig::Load(const std::string& path) {
  std::string file = path;
  if (std::filesystem::is_directory(path)) file = (std::filesystem::path(path) / "config.json").string();
  DI_ASSIGN_OR_RETURN(std::string text, ReadFileToString(file));
  return Parse(text, file);
}

Result<HfConfig> HfConfig::Parse(std::string_view text, std::string source) {
  HfConfig config;
  config.source_ = std::move(source);
  // A config.json is a few KB; 16 MiB and 64 levels leave room for any real one (nested rope_scaling,
  // quantization_config) while keeping a hostile file's parse and every later walk over it small.
  JsonLimits limits;
  limits.max_bytes = size_t{16} << 20;
  limits.max_depth = 64;
  auto parsed = ParseJson(text, limits);
  if (!parsed.ok()) return Status(parsed.status().code(), config.source_ + ": " + parsed.status().message());
  config.raw_ = std::move(parsed).value();
  if (!config.raw_.is_object()) return Status::InvalidArgument(config.source_ + ": not a JSON object");
  return config;
}

std::vector<std::string> HfConfig::architectures() const {
  std::vector<std::string> out;
  auto it = raw_.find("architectures");
  if (it == raw_.end() || !it->is_array()) return out;
  for (const auto& a : *it)
    if (a.is_string()) out.push_back(a.get<std::string>());
  return out;
}

Status HfConfig::Missing(std::string_view key, std::string_view expected) const {
  if (!raw_.contains(key)) return Status::NotFound(source_ + ": missing key '" + std::string(key) + "'");
  return Status::InvalidArgument(source_ + ": key '" + std::string(key) + "' is not " + std::string(expected));
}

Result<int64_t> HfConfig::Int(std::string_view key) const {
  auto it = raw_.find(key);
  if (it == raw_.end() || !it->is_number_integer()) return Missing(key, "an integer");
  return it->get<int64_t>();
}

Result<double> HfConfig::Float(std::string_view key) const {
  auto it = raw_.find(key);
  if (it == raw_.end() || !it->is_number()) return Missing(key, "a number");
  return it->get<double>();
}

Result<bool> HfConfig::Bool(std::string_view key) const {
  auto it = raw_.find(key);
  if (it == raw_.end() || !it->is_boolean()) return Missing(key, "a boolean");
  return it->get<bool>();
}

Result<std::string> HfConfig::String(std::string_view key) const {
  auto it = raw_.find(key);
  if (it == raw_.end() || !it->is_string()) return Missing(key, "a string");
  return it->get<std::string>();
}

Result<std::vector<int64_t>> HfConfig::IntList(std::string_view key) const {
  auto it = raw_.find(key);
  if (it == raw_.end() || !it->is_array()) return Missing(key, "a list of integers");
  std::vector<int64_t> out;
  for (const auto& v : *it) {
    if (!v.is_number_integer()) return Missing(key, "a list of integers");
    out.push_back(v.get<int64_t>());
  }
  return out;
}

int64_t HfConfig::GetInt(std::string_view key, int64_t fallback) const {
  auto r = Int(key);
  return r.ok() ? *r : fallback;
}
double HfConfig::GetFloat(std::string_view key, double fallback) const {
  auto r = Float(key);
  return r.ok() ? *r : fallback;
}
bool HfConfig::GetBool(std::string_view key, bool fallback) const {
  auto r = Bool(key);
  return r.ok() ? *r : fallback;
}
std::string HfConfig::GetString(std::string_view key, std::string fallback) const {
  auto r = String(key);
  return r.ok() ? *r : fallback;
}

}  // namespace deepinfer
