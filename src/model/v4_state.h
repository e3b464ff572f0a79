// Per-sequence DeepSeek-V4 state kept between Forward calls, apart from the block-addressed entries
// (compressed entries, indexer keys and the window's K=V vectors): each compressor's partial window, and
// the MTP layer's window ring.
#pragma once

#include <cstdint>
#include <vector>

#include "model/causal_lm.h"

namespace deepinfer::model {

// A compressor's state between calls: the raw projections of the tokens of the window being filled, and
// (overlapping compressors) the previous complete window's first-series kv and gate (ape already added).
struct V4CompressorState {
  std::vector<float> window_kv, window_gate;  // [ratio, coff · head_dim]
  std::vector<float> prev_kv, prev_gate;      // [ratio, head_dim], overlapping only
  bool has_prev = false;
};

struct V4LayerState {
  std::vector<float> ring;  // MTP layers only: [sliding_window, head_dim]; position p in slot p % window
  V4CompressorState compressor;
  V4CompressorState index_compressor;
};

class V4SequenceState : public SequenceState {
 public:
  V4SequenceState(const void* owner, size_t num_groups) : SequenceState(owner, num_groups) {}

  std::vector<V4LayerState> layers;
  std::vector<V4LayerState> mtp_layers;
  int64_t mtp_tokens = 0;  // positions the MTP layer has consumed

  void Advance(int64_t n) { num_tokens_ += n; }
};

}  // namespace deepinfer::model
