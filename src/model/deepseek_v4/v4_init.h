// Random-initialised DeepSeek-V4 checkpoints in the released Hugging Face layout (config.json, sharded
// safetensors with model.safetensors.index.json, DeepSeek's tensor names), seeded and reproducible: the
// presets behind `deepinfer init-model`, and test checkpoints in every weight format.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer::model {

enum class V4InitFormat {
  kF32,
  kBF16,
  // As released: FP8 E4M3 with 128×128 UE8M0 block scales for the dense matrices, MXFP4 (E2M1 with an E8M0
  // scale per 32 inputs) for the routed experts; embedding, head, router and compressor matrices BF16.
  kQuantized,
};

Result<V4InitFormat> ParseV4InitFormat(const std::string& name);  // "f32", "bf16", "fp8"

// The config.json of a preset: "tiny" (tests; a few MB of layers beside the real 129,280-token vocabulary),
// "small" (the server's embedded default) or "bench" (~1.2 B parameters, the largest that runs comfortably in
// 24 GiB).
Result<nlohmann::ordered_json> V4PresetConfig(const std::string& preset);

// Writes config.json and the weights for `config` (released spelling, see V4Config) into `dir` (created if
// needed). Values are uniform with the variance of N(0, 1/in) (norms near 1), from `seed` alone.
// `progress(done, total)` is called after each shard.
Status WriteRandomV4Checkpoint(const nlohmann::ordered_json& config, const std::string& dir, uint64_t seed,
                               V4InitFormat format,
                               const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace deepinfer::model
