// The DeepSeek-V4.1 sequence state as bytes (CausalLM::ExportState / ImportState, model/common/state_bytes.h):
// the position and floors, the compressors' raw-projection rings, the Engram id ring, and with DSpark its
// context rings, draft step count and open block's hidden rows. Everything else lives in blocks.
#include <algorithm>

#include "model/common/state_bytes.h"
#include "model/deepseek_v41/v41_model.h"
#include "model/deepseek_v41/v41_state.h"

namespace deepinfer::model {
namespace {

constexpr uint32_t kV41StateTag = 0x31533134;  // "41S1"

}  // namespace

Result<std::vector<uint8_t>> V41Model::ExportState(const SequenceState& s) const {
  if (s.owner() != this) return Status::InvalidArgument("ExportState: not a sequence state of this model");
  const auto& state = static_cast<const V41SequenceState&>(s);
  StateWriter w(kV41StateTag);
  for (int64_t v : {state.num_tokens(), state.floor, state.window_floor, state.engram_floor, state.draft_steps})
    w.Scalar(v);
  for (const std::vector<float>& rows : state.compressor_rows) w.Vector(rows);
  w.Vector(state.engram_ids);
  for (const std::vector<uint8_t>& kv : state.draft_kv) w.Vector(kv);
  w.Vector(state.draft_hidden);
  return w.Take();
}

Status V41Model::ImportState(SequenceState& s, std::span<const uint8_t> bytes) {
  if (s.owner() != this) return Status::InvalidArgument("ImportState: not a sequence state of this model");
  auto& state = static_cast<V41SequenceState&>(s);
  // A fresh state has every ring at its size: the import must match them.
  const auto fresh_base = NewSequence();
  const auto& fresh = static_cast<const V41SequenceState&>(*fresh_base);
  StateReader r(bytes, "DeepSeek-V4.1 sequence state");
  DI_RETURN_IF_ERROR(r.ExpectTag(kV41StateTag));
  int64_t n = 0, floor = 0, window_floor = 0, engram_floor = 0, draft_steps = 0;
  for (int64_t* v : {&n, &floor, &window_floor, &engram_floor, &draft_steps}) DI_RETURN_IF_ERROR(r.Scalar(v));
  const int64_t limit = std::max<int64_t>(config_.max_position_embeddings, 1);
  auto within = [](int64_t v, int64_t hi) { return v >= 0 && v <= hi; };
  if (!within(n, limit) || !within(floor, n) || !within(window_floor, n) || !within(engram_floor, n) ||
      !within(draft_steps, std::max<int64_t>(info_.max_draft_steps, 0)))
    return Status::InvalidArgument("DeepSeek-V4.1 sequence state: positions out of range");
  std::vector<std::vector<float>> compressor_rows(fresh.compressor_rows.size());
  for (size_t i = 0; i < compressor_rows.size(); ++i)
    DI_RETURN_IF_ERROR(r.Vector(&compressor_rows[i], fresh.compressor_rows[i].size()));
  std::vector<int32_t> engram_ids;
  DI_RETURN_IF_ERROR(r.Vector(&engram_ids, fresh.engram_ids.size()));
  std::vector<std::vector<uint8_t>> draft_kv(fresh.draft_kv.size());
  for (size_t i = 0; i < draft_kv.size(); ++i) DI_RETURN_IF_ERROR(r.Vector(&draft_kv[i], fresh.draft_kv[i].size()));
  std::vector<float> draft_hidden;
  const size_t d = fresh.draft_kv.empty() ? 0 : static_cast<size_t>(config_.hidden_size);
  DI_RETURN_IF_ERROR(r.VectorOfUnits(&draft_hidden, d, d * static_cast<size_t>(limit)));
  DI_RETURN_IF_ERROR(r.ExpectEnd());
  // Validated: replace the state.
  state.compressor_rows = std::move(compressor_rows);
  state.compressor_capacity = fresh.compressor_capacity;
  state.engram_ids = std::move(engram_ids);
  state.engram_capacity = fresh.engram_capacity;
  state.draft_kv = std::move(draft_kv);
  state.draft_capacity = fresh.draft_capacity;
  state.draft_hidden = std::move(draft_hidden);
  state.floor = floor;
  state.window_floor = window_floor;
  state.engram_floor = engram_floor;
  state.SetTokens(n);
  state.draft_steps = draft_steps;
  return Status::Ok();
}

}  // namespace deepinfer::model
