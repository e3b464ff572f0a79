// Random-initialised DeepSeek-V3 checkpoints in the released Hugging Face layout (config.json, sharded
// safetensors with model.safetensors.index.json, transformers' tensor names), seeded and reproducible: the
// presets behind `deepinfer init-model --arch v3`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer::model {

enum class V3InitFormat {
  kF32,
  kBF16,
  // As released: FP8 E4M3 dense and expert matrices in 128×128 blocks with fp32 `weight_scale_inv` (the
  // last blocks of a side that is not a multiple of 128 partial); embedding, head and router BF16.
  kFp8,
};

Result<V3InitFormat> ParseV3InitFormat(const std::string& name);  // "f32", "bf16", "fp8"

// The config.json of a preset, with the released routing, YaRN and token constants: "tiny" (tests), "small"
// (~100 M parameters) or "bench" (~1 B parameters). Every preset keeps V3's first dense layer, grouped
// routing, one MTP layer (num_nextn_predict_layers 1, written after the main layers) and the 129,280-token
// vocabulary.
Result<nlohmann::ordered_json> V3PresetConfig(const std::string& preset);
// V3.2's: the V3 preset as model_type deepseek_v32 with the indexer (the released 64 heads of 128 on bench,
// 8 of 64 on small, 4 of 32 on tiny; index_topk 2048, 256, 64), its MTP layer with an indexer too.
Result<nlohmann::ordered_json> V32PresetConfig(const std::string& preset);

// Writes config.json and the weights for `config` into `dir` (created if needed). Values are uniform with
// the variance of N(0, 1/in) (norms near 1, router biases of the scores' spread), from `seed` alone.
Status WriteRandomV3Checkpoint(const nlohmann::ordered_json& config, const std::string& dir, uint64_t seed,
                               V3InitFormat format, const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace deepinfer::model
