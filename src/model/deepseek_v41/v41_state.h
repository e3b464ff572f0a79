// Per-sequence DeepSeek-V4.1 state kept between Forward calls, apart from the block-addressed latents,
// indexer keys and window entries. Everything here is addressed by position in rings long enough for
// CausalLM::Truncate to step back max_rollback positions from the state alone:
//   * each ratio-r KV source's raw compressor projections (kv and gate) of its last positions, from which
//     the open group (positions [n − n mod r, n)) is read;
//   * the Engram compressed ids of the last positions (the n-grams reach back max_ngram_size − 1).
#pragma once

#include <cstdint>
#include <vector>

#include "model/causal_lm.h"

namespace deepinfer::model {

class V41SequenceState : public SequenceState {
 public:
  V41SequenceState(const void* owner, size_t num_groups) : SequenceState(owner, num_groups) {}

  // Per KV source of ratio > 1: [capacity, 2 · head_dim] rows (kv then gate), position p in slot p % capacity.
  std::vector<std::vector<float>> compressor_rows;
  int64_t compressor_capacity = 0;
  // The Engram compressed id of position p in slot p % capacity.
  std::vector<int32_t> engram_ids;
  int64_t engram_capacity = 0;
  // RestoreAt's position: the rings hold nothing before it, so Truncate cannot go below it.
  int64_t floor = 0;
  // Positions before this are invisible to window attention (RestoreAt from kNoWindow), and their Engram
  // ids are unknown (their slots take the padding id, as before a sequence's start).
  int64_t window_floor = 0;
  int64_t engram_floor = 0;

  // DSpark (loaded with drafting): per draft layer the window K=V of the context features (the projected
  // attention inputs of the target layers) of the last positions, stored FP8 ([capacity, window_bytes],
  // position p in slot p % capacity); the draft steps since the last Forward / Truncate / RestoreAt, and the
  // open block's final hidden rows ([block_size, hidden]).
  std::vector<std::vector<uint8_t>> draft_kv;
  int64_t draft_capacity = 0;
  int64_t draft_steps = 0;
  std::vector<float> draft_hidden;

  void SetTokens(int64_t n) {
    num_tokens_ = n;
    draft_steps = 0;
  }
};

}  // namespace deepinfer::model
