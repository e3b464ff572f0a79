// The DeepSeek-V4 sequence state as bytes (CausalLM::ExportState / ImportState, model/common/state_bytes.h):
// the position, the floors and rollback reference, every compressor's raw-projection ring, and with
// drafting the hidden-state rings. Everything else a continuation reads lives in blocks.
#include <algorithm>

#include "model/common/state_bytes.h"
#include "model/deepseek_v4/v4_internal.h"
#include "model/deepseek_v4/v4_model.h"
#include "model/deepseek_v4/v4_state.h"

namespace deepinfer::model {
namespace {

constexpr uint32_t kV4StateTag = 0x31533456;  // "V4S1"

// Floats of a compressor's ring once allocated (v4_compressor.cpp allocates it at the first position fed).
size_t V4CompressorRingFloats(const V4CompressorWeights* w) {
  if (w == nullptr) return 0;
  const int64_t width = (w->overlapping ? 2 : 1) * w->head_dim;
  return static_cast<size_t>(v4::CompressorCapacity(*w) * 2 * width);
}

}  // namespace

Result<std::vector<uint8_t>> V4Model::ExportState(const SequenceState& base) const {
  if (base.owner() != this) return Status::InvalidArgument("ExportState: not a sequence state of this model");
  const auto& state = static_cast<const V4SequenceState&>(base);
  StateWriter w(kV4StateTag);
  for (int64_t v : {state.num_tokens(), state.high_water, state.draft_steps, state.mtp_floor, state.window_floor,
                    state.compress_floor, state.rollback_floor})
    w.Scalar(v);
  for (const V4LayerState& ls : state.layers) {
    w.Vector(ls.compressor.rows);
    w.Vector(ls.index_compressor.rows);
  }
  w.Vector(state.hidden);
  w.Vector(state.draft_hidden);
  return w.Take();
}

Status V4Model::ImportState(SequenceState& base, std::span<const uint8_t> bytes) {
  if (base.owner() != this) return Status::InvalidArgument("ImportState: not a sequence state of this model");
  auto& state = static_cast<V4SequenceState&>(base);
  StateReader r(bytes, "DeepSeek-V4 sequence state");
  DI_RETURN_IF_ERROR(r.ExpectTag(kV4StateTag));
  int64_t n = 0, high_water = 0, draft_steps = 0, mtp_floor = 0, window_floor = 0, compress_floor = 0,
          rollback_floor = 0;
  for (int64_t* v : {&n, &high_water, &draft_steps, &mtp_floor, &window_floor, &compress_floor, &rollback_floor})
    DI_RETURN_IF_ERROR(r.Scalar(v));
  const int64_t limit = std::max<int64_t>(config_.max_position_embeddings, 1);
  auto within = [&](int64_t v, int64_t hi) { return v >= 0 && v <= hi; };
  if (!within(n, limit) || !within(high_water, limit) || high_water < n || !within(mtp_floor, n) ||
      !within(window_floor, n) || !within(compress_floor, n) || !within(rollback_floor, n) ||
      !within(draft_steps, limit))
    return Status::InvalidArgument("DeepSeek-V4 sequence state: positions out of range");
  std::vector<V4LayerState> layers(static_cast<size_t>(config_.num_layers));
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const V4AttentionWeights& a = weights_->layers[static_cast<size_t>(l)].attention;
    V4LayerState& ls = layers[static_cast<size_t>(l)];
    DI_RETURN_IF_ERROR(r.Vector(&ls.compressor.rows, V4CompressorRingFloats(a.compressor.get()), true));
    DI_RETURN_IF_ERROR(
        r.Vector(&ls.index_compressor.rows, V4CompressorRingFloats(a.indexer ? &a.indexer->compressor : nullptr), true));
  }
  const size_t width = drafting_ ? static_cast<size_t>(config_.hc_mult * config_.hidden_size) : 0;
  std::vector<float> hidden, draft_hidden;
  DI_RETURN_IF_ERROR(r.Vector(&hidden, width * (kV4MaxRollback + 1)));
  DI_RETURN_IF_ERROR(r.Vector(&draft_hidden, width));
  DI_RETURN_IF_ERROR(r.ExpectEnd());
  // Validated: replace the state.
  state.layers = std::move(layers);
  state.hidden = std::move(hidden);
  state.draft_hidden = std::move(draft_hidden);
  state.SetPosition(n);
  state.high_water = high_water;
  state.draft_steps = draft_steps;
  state.mtp_floor = mtp_floor;
  state.window_floor = window_floor;
  state.compress_floor = compress_floor;
  state.rollback_floor = rollback_floor;
  return Status::Ok();
}

}  // namespace deepinfer::model
