#include "model/causal_lm.h"

#include "core/hf_config.h"
#include "model/v4_model.h"

namespace deepinfer::model {

KvBlockPool::KvBlockPool(int64_t block_floats, int64_t num_blocks)
    : block_floats_(block_floats),
      num_blocks_(num_blocks),
      storage_(static_cast<size_t>(std::max<int64_t>(block_floats * num_blocks, 0)) * sizeof(float)) {}

Result<std::unique_ptr<CausalLM>> LoadCausalLM(const std::string& dir) {
  DI_ASSIGN_OR_RETURN(HfConfig hf, HfConfig::Load(dir));
  const std::string type = hf.model_type();
  if (type == "deepseek_v4") {
    DI_ASSIGN_OR_RETURN(std::unique_ptr<V4Model> model, V4Model::Load(dir));
    return std::unique_ptr<CausalLM>(std::move(model));
  }
  return Status::Unimplemented(hf.source() + ": model_type '" + type + "' is not supported (deepseek_v4)");
}

}  // namespace deepinfer::model
