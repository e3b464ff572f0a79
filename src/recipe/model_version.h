// Which DeepSeek model a conversation is rendered for and its output parsed as. One type for both sides of
// the codec: the prompt format (render.h), the request rules that depend on it (images, namespaced tool
// names) and the output grammar (output_parser.h) always agree on the version.
#pragma once

#include <string_view>

#include "core/status.h"

namespace deepinfer::recipe {

enum class ModelVersion { kV32, kV4, kV41 };
std::string_view ModelVersionName(ModelVersion version);  // "v3.2", "v4", "v4.1"
Result<ModelVersion> ParseModelVersion(std::string_view name);

}  // namespace deepinfer::recipe
