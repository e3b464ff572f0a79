// The embedded default model that `deepinfer serve` and the Python package run when given no model
// directory: the `small` DeepSeek-V4 preset with random weights (seed 0), written once into the user's
// cache directory. Also what tells a checkpoint's prompt encoding from its config.json.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "core/hf_config.h"
#include "core/status.h"
#include "recipe/model_version.h"

namespace deepinfer::pipeline {

// $DEEPINFER_CACHE_DIR, else $XDG_CACHE_HOME/deepinfer, else ~/.cache/deepinfer, else a temporary directory.
std::filesystem::path CacheDir();

// The embedded default's directory, created on first use (into a temporary directory renamed into place,
// so an interrupted first run leaves nothing half-written behind).
Result<std::string> DefaultModelDir();

// The prompt encoding of a checkpoint's model_type; none when it is not a DeepSeek family this renders.
std::optional<recipe::ModelVersion> ModelVersionFromConfig(const HfConfig& config);

}  // namespace deepinfer::pipeline
