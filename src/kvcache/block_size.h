// The block: the unit in which every KV cache group, the prefix cache, block hashes and the persistent
// store cut a sequence's positions. One size for all of them, so that one chained hash names the same
// positions in every group and every tier.
#pragma once

#include <cstdint>

namespace deepinfer::kvcache {

// Token positions per block, the same in every group: the prefix-cache unit.
inline constexpr int64_t kBlockTokens = 128;

// A block table entry (or allocator link) for a block that is not held (e.g. window blocks that fell out
// of the window, or were never restored).
inline constexpr int32_t kNoBlock = -1;

// Blocks a sequence of `num_tokens` positions spans.
inline int64_t BlocksFor(int64_t num_tokens) { return (num_tokens + kBlockTokens - 1) / kBlockTokens; }

}  // namespace deepinfer::kvcache
