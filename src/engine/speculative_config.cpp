#include "engine/speculative_config.h"

#include <algorithm>

#include "core/json.h"
#include "core/mapped_file.h"

namespace deepinfer::engine {
namespace {

Status Bad(const std::string& message) { return Status::InvalidArgument(message); }

// An integer field in [lo, hi] (JSON numbers with a fraction, booleans and strings are refused).
Status ReadInt(const nlohmann::json& value, const char* key, int lo, int hi, int* out) {
  if (!value.is_number_integer())
    return Bad(std::string("\"") + key + "\" must be an integer");
  const int64_t v = value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX ? INT64_MAX : value.get<int64_t>();
  if (v < lo || v > hi)
    return Bad(std::string("\"") + key + "\" must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
               "], got " + std::to_string(v));
  *out = static_cast<int>(v);
  return Status::Ok();
}

}  // namespace

std::string_view DraftMethodName(DraftMethod method) {
  switch (method) {
    case DraftMethod::kNone: return "none";
    case DraftMethod::kNgram: return "ngram";
    case DraftMethod::kSynthetic: return "synthetic";
    case DraftMethod::kMtp: return "mtp";
    case DraftMethod::kDspark: return "dspark";
    case DraftMethod::kSuffix: return "suffix";
  }
  return "none";
}

Result<SpeculativeConfig> ParseSpeculativeConfig(std::string_view text) {
  if (text.size() > kMaxSpeculativeConfigBytes)
    return Bad("longer than " + std::to_string(kMaxSpeculativeConfigBytes) + " bytes");
  auto parsed = ParseJson(text, JsonLimits{.max_bytes = kMaxSpeculativeConfigBytes, .max_depth = 2});
  if (!parsed.ok()) return Bad(parsed.status().message());
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return Bad("must be a JSON object");
  SpeculativeConfig config;
  auto method = j.find("method");
  if (method == j.end()) return Bad("\"method\" is required (ngram, suffix, synthetic, mtp or dspark)");
  if (!method->is_string()) return Bad("\"method\" must be a string");
  const std::string& name = method->get_ref<const std::string&>();
  for (DraftMethod m :
       {DraftMethod::kNgram, DraftMethod::kSuffix, DraftMethod::kSynthetic, DraftMethod::kMtp, DraftMethod::kDspark}) {
    if (name == DraftMethodName(m)) config.method = m;
  }
  if (config.method == DraftMethod::kNone) {
    std::string shown = name.substr(0, 64);
    for (char& c : shown) c = (c < 0x20 || c == 0x7f) ? '?' : c;
    return Bad("unknown method \"" + shown + "\" (ngram, suffix, synthetic, mtp or dspark)");
  }
  auto k = j.find("num_speculative_tokens");
  if (k == j.end()) return Bad("\"num_speculative_tokens\" is required");
  DI_RETURN_IF_ERROR(ReadInt(*k, "num_speculative_tokens", 1, kMaxSpeculativeTokens, &config.num_speculative_tokens));

  bool has_min = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (key == "method" || key == "num_speculative_tokens") continue;
    const bool ngram_key = key == "prompt_lookup_max" || key == "prompt_lookup_min";
    if (ngram_key && config.method != DraftMethod::kNgram && config.method != DraftMethod::kSuffix)
      return Bad("\"" + key + "\" applies to the ngram and suffix methods only");
    if (key == "prompt_lookup_max") {
      DI_RETURN_IF_ERROR(ReadInt(*it, "prompt_lookup_max", 1, kMaxPromptLookup, &config.prompt_lookup_max));
    } else if (key == "prompt_lookup_min") {
      DI_RETURN_IF_ERROR(ReadInt(*it, "prompt_lookup_min", 1, kMaxPromptLookup, &config.prompt_lookup_min));
      has_min = true;
    } else if (key == "synthetic_acceptance_rates") {
      if (config.method != DraftMethod::kSynthetic)
        return Bad("\"synthetic_acceptance_rates\" applies to the synthetic method only");
      if (!it->is_array()) return Bad("\"synthetic_acceptance_rates\" must be an array of numbers");
      if (static_cast<int>(it->size()) != config.num_speculative_tokens)
        return Bad("\"synthetic_acceptance_rates\" must have num_speculative_tokens (" +
                   std::to_string(config.num_speculative_tokens) + ") entries, got " + std::to_string(it->size()));
      double previous = 1;
      for (const nlohmann::json& rate : *it) {
        if (!rate.is_number()) return Bad("\"synthetic_acceptance_rates\" must be an array of numbers");
        const double r = rate.get<double>();
        if (!(r >= 0 && r <= 1)) return Bad("\"synthetic_acceptance_rates\" entries must be in [0, 1]");
        if (r > previous) return Bad("\"synthetic_acceptance_rates\" must not increase (they are unconditional)");
        previous = r;
        config.synthetic_acceptance_rates.push_back(r);
      }
    } else if (key == "acceptance_method") {
      if (!it->is_string()) return Bad("\"acceptance_method\" must be a string");
      const std::string& v = it->get_ref<const std::string&>();
      if (v == "rejection_sampler" || v == "max_acceptance") {
        config.rejection_sampling = true;
      } else if (v != "reproducible") {
        std::string shown = v.substr(0, 64);
        for (char& ch : shown) ch = (ch < 0x20 || ch == 0x7f) ? '?' : ch;
        return Bad("unknown acceptance_method \"" + shown + "\" (reproducible, rejection_sampler or max_acceptance)");
      }
    } else if (key == "scheduled_verification") {
      if (!it->is_boolean()) return Bad("\"scheduled_verification\" must be true or false");
      config.scheduled_verification = it->get<bool>();
    } else if (key == "min_predicted_gain") {
      if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() <= 10))
        return Bad("\"min_predicted_gain\" must be a number in [0, 10]");
      config.min_predicted_gain = it->get<double>();
    } else if (key == "suffix_override_tokens") {
      if (!config.uses_draft_layers()) return Bad("\"suffix_override_tokens\" applies to the mtp and dspark methods only");
      DI_RETURN_IF_ERROR(ReadInt(*it, "suffix_override_tokens", 1, kMaxPromptLookup, &config.suffix_override_tokens));
    } else if (key == "calibration_path") {
      if (config.method != DraftMethod::kDspark) return Bad("\"calibration_path\" applies to the dspark method only");
      if (!it->is_string() || it->get_ref<const std::string&>().empty())
        return Bad("\"calibration_path\" must be a non-empty string");
      config.calibration_path = it->get<std::string>();
    } else {
      std::string shown = key.substr(0, 64);
      for (char& c : shown) c = (c < 0x20 || c == 0x7f) ? '?' : c;
      return Bad("unknown key \"" + shown + "\"");
    }
  }
  if (config.method == DraftMethod::kNgram || config.method == DraftMethod::kSuffix) {
    if (!has_min) config.prompt_lookup_min = std::min(config.prompt_lookup_min, config.prompt_lookup_max);
    if (config.prompt_lookup_min > config.prompt_lookup_max)
      return Bad("\"prompt_lookup_min\" must not exceed \"prompt_lookup_max\"");
  }
  return config;
}

Result<std::vector<double>> ReadCalibrationTemperatures(const std::string& path) {
  const std::string where = "calibration file " + path.substr(0, 256) + ": ";
  auto text = ReadFileToString(path, kMaxCalibrationBytes);
  if (!text.ok()) return Bad("calibration file " + text.status().message());
  auto parsed = ParseJson(*text, JsonLimits{.max_bytes = kMaxCalibrationBytes, .max_depth = 1});
  if (!parsed.ok()) return Bad(where + parsed.status().message());
  const nlohmann::json& j = *parsed;
  if (!j.is_array() || j.empty() || j.size() > static_cast<size_t>(kMaxSpeculativeTokens))
    return Bad(where + "must be a JSON array of 1 to " + std::to_string(kMaxSpeculativeTokens) +
               " per-position temperatures");
  std::vector<double> temperatures;
  for (const nlohmann::json& t : j) {
    if (!t.is_number()) return Bad(where + "temperatures must be numbers");
    const double v = t.get<double>();
    if (!(v >= 0.01 && v <= 100)) return Bad(where + "temperatures must be in [0.01, 100]");
    temperatures.push_back(v);
  }
  return temperatures;
}

}  // namespace deepinfer::engine
