// libFuzzer target for ParseSpeculativeConfig: arbitrary bytes as --speculative-config. Nothing may crash;
// a refusal is one kInvalidArgument line; an accepted config is within the documented bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/speculative_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = engine::ParseSpeculativeConfig(text);
  if (!config.ok()) {
    if (config.status().code() != StatusCode::kInvalidArgument) std::abort();
    if (config.status().message().find('\n') != std::string::npos) std::abort();
    return 0;
  }
  const engine::SpeculativeConfig& c = *config;
  if (!c.enabled()) std::abort();
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > engine::kMaxSpeculativeTokens) std::abort();
  if (c.prompt_lookup_min < 1 || c.prompt_lookup_min > c.prompt_lookup_max ||
      c.prompt_lookup_max > engine::kMaxPromptLookup)
    std::abort();
  if (!c.synthetic_acceptance_rates.empty()) {
    if (static_cast<int>(c.synthetic_acceptance_rates.size()) != c.num_speculative_tokens) std::abort();
    double previous = 1;
    for (double r : c.synthetic_acceptance_rates) {
      if (!(r >= 0 && r <= previous)) std::abort();
      previous = r;
    }
  }
  if (!(c.min_predicted_gain >= 0 && c.min_predicted_gain <= 10)) std::abort();
  if (c.suffix_override_tokens < 0 || c.suffix_override_tokens > engine::kMaxPromptLookup) std::abort();
  if (c.suffix_override_tokens > 0 && !c.uses_draft_layers()) std::abort();
  if (!c.calibration_path.empty() && c.method != engine::DraftMethod::kDspark) std::abort();
  return 0;
}
