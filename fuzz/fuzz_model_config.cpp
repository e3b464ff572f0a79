// Feeds arbitrary bytes to the DeepSeek configuration readers as a config.json (model_type "deepseek_v3" or
// "deepseek_v32" to V3's, anything else to V4's): whatever they accept must be self-consistent (V4: one
// schedule entry per layer, ratios that are 0 or positive; V3: MLA and routing shapes that fit together;
// V3.2: an indexer head of a power of two holding the rope channels, index_topk ≥ 1, the low-rank query;
// all: sizes in bounds), and whatever they reject is one line.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/hf_config.h"
#include "model/deepseek_v3/v3_config.h"
#include "model/deepseek_v4/v4_config.h"

namespace {

void CheckV3(const deepinfer::HfConfig& hf) {
  auto config = deepinfer::model::V3Config::FromHf(hf);
  if (!config.ok()) {
    if (config.status().message().find('\n') != std::string_view::npos) __builtin_trap();
    return;
  }
  const auto& c = *config;
  if (c.num_layers <= 0 || c.hidden_size <= 0 || c.vocab_size <= 0 || c.num_heads <= 0 || c.kv_lora_rank <= 0)
    __builtin_trap();
  if (c.rope_dim <= 0 || c.rope_dim % 2 != 0 || c.head_dim != c.qk_nope_head_dim + c.rope_dim) __builtin_trap();
  if (c.n_group <= 0 || c.topk_group > c.n_group || c.n_routed_experts % c.n_group != 0) __builtin_trap();
  if (c.num_experts_per_tok > c.topk_group * (c.n_routed_experts / c.n_group)) __builtin_trap();
  if (c.first_k_dense_replace < 0 || c.first_k_dense_replace > c.num_layers) __builtin_trap();
  if (!(c.softmax_scale > 0) || c.eos_token_ids.empty() || c.eos_token_id != c.eos_token_ids[0]) __builtin_trap();
  if (hf.model_type() == "deepseek_v32") {
    const int64_t dim = c.index_head_dim;
    if (c.index_topk < 1 || c.index_n_heads < 1 || dim < c.rope_dim || (dim & (dim - 1)) != 0 || c.q_lora_rank < 1)
      __builtin_trap();
  }
  (void)deepinfer::model::RopeInverseFrequencies(c.rope, c.rope_dim);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto hf = deepinfer::HfConfig::Parse(text);
  if (!hf.ok()) return 0;
  if (hf->model_type() == "deepseek_v3" || hf->model_type() == "deepseek_v32") {
    CheckV3(*hf);
    return 0;
  }
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
