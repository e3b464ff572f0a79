// Feeds arbitrary bytes to the DeepSeek-V4 configuration reader as a config.json: whatever it accepts must
// be self-consistent (one schedule entry per layer, ratios that are 0 or positive, sizes in bounds), and
// whatever it rejects is one line.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/hf_config.h"
#include "model/deepseek_v4/v4_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto hf = deepinfer::HfConfig::Parse(text);
  if (!hf.ok()) return 0;
  auto config = deepinfer::model::V4Config::FromHf(*hf);
  if (!config.ok()) {
    if (config.status().message().find('\n') != std::string_view::npos) __builtin_trap();
    return 0;
  }
  const auto& c = *config;
  const auto layers = static_cast<size_t>(c.num_layers);
  if (c.num_layers <= 0 || c.attention_types.size() != layers || c.compress_ratios.size() != layers ||
      c.router_types.size() != layers)
    __builtin_trap();
  for (int64_t r : c.compress_ratios)
    if (r < 0) __builtin_trap();
  if (c.hidden_size <= 0 || c.head_dim <= 0 || c.vocab_size <= 0 || c.rope_dim < 0 || c.rope_dim > c.head_dim)
    __builtin_trap();
  if (c.eos_token_ids.empty() || c.eos_token_id != c.eos_token_ids[0]) __builtin_trap();
  // The rope tables are computed from accepted values at load: they must be computable.
  (void)deepinfer::model::RopeInverseFrequencies(c.main_rope, c.rope_dim);
  (void)deepinfer::model::RopeInverseFrequencies(c.compress_rope, c.rope_dim);
  return 0;
}
