// The block-table filling of tools and tests that run a few sequences in pools sized for all of them
// (`deepinfer generate`, `bench model`, the model tests): each group's blocks are handed out in order and
// never reused. The engine's block manager (src/kvcache) is the real allocator: sharing, freeing, eviction.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/causal_lm.h"

namespace deepinfer::model {

class SequentialBlocks {
 public:
  // Blocks [0, num_blocks[g]) of each group g are handed out.
  SequentialBlocks(const kvcache::KvCacheSpec& spec, const kvcache::KvPools& pools);

  // Grows the state's tables so that a chunk of `extra` more positions finds every block it needs
  // (kvcache::BlocksNeeded); blocks a window group no longer needs are never given (kvcache::kNoBlock).
  // ResourceExhausted, with nothing changed, when a group's pool is used up.
  Status Reserve(SequenceState& state, int64_t extra);

  // Blocks handed out so far in group g.
  int64_t used(size_t group) const { return next_[group]; }

 private:
  const kvcache::KvCacheSpec* spec_;
  std::vector<int64_t> capacity_, next_;
};

}  // namespace deepinfer::model
