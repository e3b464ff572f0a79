// A finished sequence's state at its last computed position, kept so that a prompt extending its tokens
// resumes there, to the token: the model's state outside the blocks and copies of the blocks a
// continuation reads besides the shared full prefix blocks (the partial prefix block, the window blocks
// the next position sees). The engine's executor makes it and fills a sequence's fresh blocks from it;
// to the scheduler and the persistent tier (lower_tier.h) it is opaque bytes.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::kvcache {

struct SequenceSnapshot {
  int64_t num_tokens = 0;
  // Carried blocks of each class: `count` consecutive block indices from `first`.
  int64_t prefix_first = 0, prefix_count = 0;
  int64_t window_first = 0, window_count = 0;
  std::vector<uint8_t> state;   // the model's export of the per-sequence state
  // Each carried prefix block (every prefix group's bytes, in spec order), then each carried window block
  // (every window group's bytes).
  std::vector<uint8_t> blocks;
  int64_t bytes() const { return static_cast<int64_t>(sizeof(*this) + state.size() + blocks.size()); }
};

}  // namespace deepinfer::kvcache
