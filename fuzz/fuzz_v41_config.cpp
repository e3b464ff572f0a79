// Feeds arbitrary bytes to the DeepSeek-V4.1 configuration reader as a config.json: whatever it accepts must
// be self-consistent (a plan entry per layer whose groups and index layers point at real sources of the same
// ratio, sizes in bounds), and whatever it rejects is one line.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/hf_config.h"
#include "model/deepseek_v41/v41_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto hf = deepinfer::HfConfig::Parse(text);
  if (!hf.ok()) return 0;
  auto config = deepinfer::model::V41Config::FromHf(*hf);
  if (!config.ok()) {
    if (config.status().message().find('\n') != std::string_view::npos) __builtin_trap();
    return 0;
  }
  const auto& c = *config;
  const auto layers = static_cast<size_t>(c.num_layers);
  if (c.num_layers <= 0 || c.layers.size() != layers || c.compress_ratios.size() != layers) __builtin_trap();
  for (size_t l = 0; l < layers; ++l) {
    const auto& p = c.layers[l];
    if (p.ratio < 0 || (p.ratio > 0 && 128 % p.ratio)) __builtin_trap();
    if (p.ratio > 0) {
      if (p.group < 0 || static_cast<size_t>(p.group) >= c.kv_source_layer_ids.size()) __builtin_trap();
      const int64_t source = c.kv_source_layer_ids[p.group];
      if (source > static_cast<int64_t>(l) || c.compress_ratios[source] != p.ratio) __builtin_trap();
      if (p.index_layer >= 0 && (p.index_layer < source || p.index_layer > static_cast<int64_t>(l))) __builtin_trap();
    }
    if (p.engram >= 0 && static_cast<size_t>(p.engram) >= c.engram.layer_ids.size()) __builtin_trap();
  }
  if (c.engram.num_embeddings.size() != c.engram.layer_ids.size() && c.engram.enabled()) __builtin_trap();
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.eos_token_ids.empty()) __builtin_trap();
  (void)deepinfer::model::RopeInverseFrequencies(c.main_rope, c.rope_dim);
  (void)deepinfer::model::RopeInverseFrequencies(c.compress_rope, c.rope_dim);
  return 0;
}
