#include "recipe/model_version.h"

#include <string>

namespace deepinfer::recipe {

std::string_view ModelVersionName(ModelVersion version) {
  switch (version) {
    case ModelVersion::kV32: return "v3.2";
    case ModelVersion::kV4: return "v4";
    case ModelVersion::kV41: return "v4.1";
  }
  return "?";
}

Result<ModelVersion> ParseModelVersion(std::string_view name) {
  if (name == "v3.2" || name == "V3.2") return ModelVersion::kV32;
  if (name == "v4" || name == "V4") return ModelVersion::kV4;
  if (name == "v4.1" || name == "V4.1") return ModelVersion::kV41;
  return Status::InvalidArgument("unknown model version '" + std::string(name) + "' (expected v3.2, v4 or v4.1)");
}

}  // namespace deepinfer::recipe
