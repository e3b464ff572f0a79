// The ModelInfo both DeepSeek families describe themselves with: what comes from the config, the checkpoint
// and the cache spec, and what they support (both restore and fork; drafting where the family loaded draft
// layers, named by `draft_kind`).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/safetensors.h"
#include "core/status.h"
#include "model/causal_lm.h"
#include "model/common/checkpoint_io.h"

namespace deepinfer::model {

template <class Config>
Result<ModelInfo> ModelInfoFromConfig(const std::string& architecture, const Config& c, const std::string& dir,
                                      const Checkpoint& checkpoint, const kvcache::KvCacheSpec& spec,
                                      std::string draft_kind) {
  ModelInfo info;
  info.architecture = architecture;
  info.vocab_size = c.vocab_size;
  info.hidden_size = c.hidden_size;
  info.hidden_width = c.hc_mult * c.hidden_size;  // the hc_mult residual streams
  info.max_position_embeddings = c.max_position_embeddings;
  info.bos_token_id = c.bos_token_id;
  for (int64_t id : c.eos_token_ids) info.eos_token_ids.push_back(static_cast<int32_t>(id));
  info.draft_kind = std::move(draft_kind);
  info.supports_restore = info.supports_fork = true;
  info.supports_draft = !info.draft_kind.empty();
  info.exact_replay_positions = WindowReplayPositions(spec);
  DI_ASSIGN_OR_RETURN(info.weights_fingerprint, WeightsFingerprint(dir, checkpoint));
  return info;
}

}  // namespace deepinfer::model
