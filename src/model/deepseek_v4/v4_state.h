// Per-sequence DeepSeek-V4 state kept between Forward calls, apart from the block-addressed entries
// (compressed entries, indexer keys, the window's K=V vectors, and at each block's end the compressors'
// state and the final hidden state): each compressor's recent raw projections, enough for the open
// window, an overlapping compressor's previous window and kV4MaxRollback positions of rollback; with
// drafting, the last kV4MaxRollback + 1 final hidden states and the draft's own; the floors a restore sets.
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
  V4CompressorState compressor;
  V4CompressorState index_compressor;
};

class V4SequenceState : public SequenceState {
 public:
  V4SequenceState(const void* owner, size_t num_groups) : SequenceState(owner, num_groups) {}
  V4SequenceState(const V4SequenceState&) = default;  // Fork

  std::vector<V4LayerState> layers;

  // Drafting (the MTP layer). Its entry for position p needs the final hidden state at p and the token at
  // p + 1; the main model's hidden state of position p sits in hidden[p % (kV4MaxRollback + 1)].
  std::vector<float> hidden;        // [kV4MaxRollback + 1, hc_mult · hidden_size], allocated when drafting
  std::vector<float> draft_hidden;  // the last draft step's output streams
  int64_t draft_steps = 0;          // draft steps since the last Forward / Truncate / RestoreAt
  int64_t mtp_floor = 0;            // the first position the MTP layer has (or can make) an entry for

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
