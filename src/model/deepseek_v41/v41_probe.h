// Test instrumentation of DeepSeek-V4.1's discrete decisions. The model is not continuous in its inputs: its
// quantizers round to a grid (FP8/FP4 values and their scales) and its top-k selections pick sets (experts,
// indexer top-k, candidate blocks), so two fp32 implementations that differ by a few ulps — ours and
// transformers', or transformers' own runs of different shapes — take an occasional decision differently
// whenever a value lies within that noise of its boundary, and every later position that reads the result
// differs. A probe lists the decisions of a forward pass that lie within `epsilon` (relative) of their
// boundary, and makes chosen ones go the other way, so that a test can tell "equal but for decisions
// within fp32 noise of a tie" from a real difference. Unused (null) outside tests; costs nothing then.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::model {

enum class V41DecisionKind {
  kWindow,      // window K=V FP8 rounding: layer, position, channel
  kLatent,      // latent FP4 rounding: KV-source layer, latent index, channel
  kKey,         // indexer key FP4 rounding: KV-source layer, latent index, channel
  kQuery,       // indexer query FP4 rounding: index-source layer, position, head · index_head_dim + channel
  kExperts,     // expert top-k: layer, position
  kIndexTopK,   // indexer top-k: index-source layer, position
  kCandidates,  // candidate blocks: candidate-source layer, position
};

struct V41Decision {
  V41DecisionKind kind = V41DecisionKind::kWindow;
  int64_t layer = 0;
  int64_t position = 0;  // token position, or latent index for kLatent / kKey
  int64_t element = 0;   // channel for the quantizers (−1: the block's scale, element = first channel)
  bool scale = false;    // the decision is a block's scale, not one value's rounding
  double margin = 0;     // relative distance from the boundary (recorded)

  bool Same(const V41Decision& o) const {
    return kind == o.kind && layer == o.layer && position == o.position && element == o.element && scale == o.scale;
  }
  std::string ToString() const;
};

struct V41Probe {
  double epsilon = 0;               // record decisions closer than this to their boundary
  std::vector<V41Decision> near;    // out: in the order met
  std::vector<V41Decision> flips;   // in: decisions to take the other way
  bool IsFlipped(const V41Decision& d) const {
    for (const V41Decision& f : flips)
      if (f.Same(d)) return true;
    return false;
  }
};

}  // namespace deepinfer::model
