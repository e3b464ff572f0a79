// A Hugging Face config.json: the raw JSON plus typed, error-checked access to its fields. Model code
// builds its own typed config from this (model/ for each architecture).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer {

class HfConfig {
 public:
  // `path` is config.json or the directory holding it.
  static Result<HfConfig> Load(const std::string& path);
  static Result<HfConfig> Parse(std::string_view text, std::string source = "config.json");

  const nlohmann::json& raw() const { return raw_; }
  const std::string& source() const { return source_; }
  std::string model_type() const { return GetString("model_type", ""); }
  std::vector<std::string> architectures() const;
  bool Has(std::string_view key) const { return raw_.contains(key); }

  // Typed getters: a missing key, or a value of the wrong type, is an error naming the file and the key.
  Result<int64_t> Int(std::string_view key) const;
  Result<double> Float(std::string_view key) const;
  Result<bool> Bool(std::string_view key) const;
  Result<std::string> String(std::string_view key) const;
  Result<std::vector<int64_t>> IntList(std::string_view key) const;

  // With defaults for optional keys (a present key of the wrong type still falls back to the default).
  int64_t GetInt(std::string_view key, int64_t fallback) const;
  double GetFloat(std::string_view key, double fallback) const;
  bool GetBool(std::string_view key, bool fallback) const;
  std::string GetString(std::string_view key, std::string fallback) const;

 private:
  Status Missing(std::string_view key, std::string_view expected) const;
  nlohmann::json raw_;
  std::string source_;
};

}  // namespace deepinfer
