// Random-initialised DeepSeek-V4.1 checkpoints in the released Hugging Face layout (composite config.json
// with text_config and vision_config, sharded safetensors with model.safetensors.index.json, the released
// tensor names), seeded and reproducible: the presets behind `deepinfer init-model --arch v4.1`. The caller
// puts the V4.1 tokenizer beside them (the Engram layers hash its compressed token ids, so the presets'
// engram_compressed_vocab_size is the V4.1 tokenizer's 99,092).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer::model {

enum class V41InitFormat {
  kBF16,
  // As released: FP8 E4M3 with 32×32 UE8M0 block scales for the dense matrices, packed FP4 E2M1 (I8, the even
  // element in the low nibble, an E8M0 scale per 32 inputs) for the routed experts, FP8 Engram tables with an
  // E8M0 scale per 32 values; embedding, head, router, compressor, indexer keys and norms BF16.
  kQuantized,
};

Result<V41InitFormat> ParseV41InitFormat(const std::string& name);  // "bf16", "fp8"

// The config.json of a preset: "tiny" (tests: a few MB of layers beside the real 129,280-token vocabulary),
// "small" (~0.1 B parameters) or "bench" (the largest V4.1 shape that runs comfortably in 24 GiB: ~1.3 B
// parameters plus two 2.4 M-row Engram tables). Small Engram tables throughout (the real ones have 384 M rows).
Result<nlohmann::ordered_json> V41PresetConfig(const std::string& preset);

// Writes config.json and the weights for `config` (the composite layout V41Config reads) into `dir`.
// Values are uniform with the variance of N(0, 1/in) (norms near 1), from `seed` alone. `progress(done,
// total)` after each shard.
Status WriteRandomV41Checkpoint(const nlohmann::ordered_json& config, const std::string& dir, uint64_t seed,
                                V41InitFormat format, const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace deepinfer::model
