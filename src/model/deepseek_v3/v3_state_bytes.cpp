// The DeepSeek-V3 / V3.2 sequence state as bytes (CausalLM::ExportState / ImportState, model/common/state_bytes.h):
// the position, the floors and the high-water mark, and with drafting the main model's recent hidden states
// and the last draft output. Everything else a continuation reads lives in prefix blocks (the MLA latents
// and rope keys, V3.2's indexer keys, the MTP entries), which a snapshot carries as copies of its partial
// block.
#include <algorithm>

#include "model/common/state_bytes.h"
#include "model/deepseek_v3/v3_model.h"

namespace deepinfer::model {
namespace {

constexpr uint32_t kV3StateTag = 0x31533356;  // "V3S1"

}  // namespace

Result<std::vector<uint8_t>> V3Model::ExportState(const SequenceState& base) const {
  if (base.owner() != this) return Status::InvalidArgument("ExportState: not a sequence state of this model");
  const auto& state = static_cast<const V3SequenceState&>(base);
  StateWriter w(kV3StateTag);
  for (int64_t v : {state.num_tokens(), state.high_water, state.draft_steps, state.window_floor, state.rollback_floor})
    w.Scalar(v);
  w.Vector(state.hidden);
  w.Vector(state.draft_hidden);
  return w.Take();
}

Status V3Model::ImportState(SequenceState& base, std::span<const uint8_t> bytes) {
  if (base.owner() != this) return Status::InvalidArgument("ImportState: not a sequence state of this model");
  auto& state = static_cast<V3SequenceState&>(base);
  StateReader r(bytes, "DeepSeek-V3 sequence state");
  DI_RETURN_IF_ERROR(r.ExpectTag(kV3StateTag));
  int64_t n = 0, high_water = 0, draft_steps = 0, window_floor = 0, rollback_floor = 0;
  for (int64_t* v : {&n, &high_water, &draft_steps, &window_floor, &rollback_floor}) DI_RETURN_IF_ERROR(r.Scalar(v));
  const int64_t limit = std::max<int64_t>(config_.max_position_embeddings, 1);
  auto within = [&](int64_t v, int64_t hi) { return v >= 0 && v <= hi; };
  if (!within(n, limit) || !within(high_water, limit) || high_water < n || !within(window_floor, n) ||
      !within(rollback_floor, n) || !within(draft_steps, limit))
    return Status::InvalidArgument("DeepSeek-V3 sequence state: positions out of range");
  const size_t width = drafting_ ? static_cast<size_t>(config_.hidden_size) : 0;
  std::vector<float> hidden, draft_hidden;
  DI_RETURN_IF_ERROR(r.Vector(&hidden, width * (kV3DraftRollback + 1)));
  DI_RETURN_IF_ERROR(r.Vector(&draft_hidden, width));
  DI_RETURN_IF_ERROR(r.ExpectEnd());
  // Validated: replace the state.
  state.hidden = std::move(hidden);
  state.draft_hidden = std::move(draft_hidden);
  state.SetPosition(n);
  state.high_water = high_water;
  state.draft_steps = draft_steps;
  state.window_floor = window_floor;
  state.rollback_floor = rollback_floor;
  return Status::Ok();
}

}  // namespace deepinfer::model
