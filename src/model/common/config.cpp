#include "model/common/config.h"

namespace deepinfer::model {

const nlohmann::json* NestedRopeParameters(const HfConfig& hf) {
  if (hf.Has("rope_parameters") && hf.raw()["rope_parameters"].is_object() &&
      hf.raw()["rope_parameters"].contains("main") && hf.raw()["rope_parameters"].contains("compress"))
    return &hf.raw()["rope_parameters"];
  return nullptr;
}

}  // namespace deepinfer::model
