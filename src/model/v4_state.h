// Per-sequence DeepSeek-V4 state kept between Forward calls, apart from the block-addressed entries
// (compressed entries, indexer keys, the window's K=V vectors and the compressors' state at each block's
// end): each compressor's recent raw projections, enough for the open window, an overlapping compressor's
// previous window and kV4MaxRollback positions of rollback; the MTP layer's window ring; the floors a
// restore sets.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/causal_lm.h"

namespace deepinfer::model {

// How far Truncate reaches back from the per-sequence state alone.
inline constexpr int64_t kV4MaxRollback = 16;

// A compressor's recent raw projections: row q (kv then gate, coff · head_dim each, before `ape`) of
// position q sits in slot q % capacity, capacity = kV4MaxRollback + coff · ratio positions (allocated on
// first use).
struct V4CompressorState {
  std::vector<float> rows;
};

struct V4LayerState {
  std::vector<float> ring;  // MTP layers only: [sliding_window, head_dim]; position p in slot p % window
  V4CompressorState compressor;
  V4CompressorState index_compressor;
};

class V4SequenceState : public SequenceState {
 public:
  V4SequenceState(const void* owner, size_t num_groups) : SequenceState(owner, num_groups) {}
  V4SequenceState(const V4SequenceState&) = default;  // Fork

  std::vector<V4LayerState> layers;
  std::vector<V4LayerState> mtp_layers;
  int64_t mtp_tokens = 0;  // positions the MTP layer has consumed; -1 after a Truncate cut into them

  int64_t window_floor = 0;    // window attention sees no position below this (RestoreAt kNoWindow)
  int64_t compress_floor = 0;  // the compressors' first window starts here, with no previous window
  int64_t rollback_floor = 0;  // Truncate goes no lower (where the state was restored)
  int64_t high_water = 0;      // the most positions held since made or restored (Truncate's reference)

  void Advance(int64_t n) {
    num_tokens_ += n;
    high_water = std::max(high_water, num_tokens_);
  }
  void SetPosition(int64_t n) { num_tokens_ = n; }
};

}  // namespace deepinfer::model
