// The KV block manager: which blocks each sequence holds, in two classes that live and die separately —
// prefix blocks (every kPrefix cache group of the model: shared by reference once full, kept after the
// sequence ends, evicted LRU) and window blocks (the kWindow groups: needed by a running sequence for its
// last `window` positions, and, once full, the exact resume point of a prefix hit ending at the block's
// end; cached in RAM only, evicted LRU under the window pool's byte budget (optionally also after a TTL),
// and released by a sequence as soon as they fall out of its window). It knows no model: the engine turns the model's cache spec into Options and mirrors
// SequenceBlocks into the model's block tables. Not thread-safe (the step thread owns it).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kvcache/block_allocator.h"
#include "kvcache/block_hash.h"

namespace deepinfer::kvcache {

// Block indices [first, end).
struct BlockRange {
  int64_t first = 0, end = 0;
};

struct BlockManagerOptions {
  int64_t prefix_blocks = 0;  // ids per prefix group (0: the model has no prefix groups)
  int64_t window_blocks = 0;  // ids per window group (0: no window groups)
  int64_t window = 0;         // positions a query sees in the window groups (its own included)
  int64_t window_max_cached = -1;  // cached window blocks kept (the byte budget in blocks); -1: no bound
  // A byte budget the cached window blocks share with other caches (LruBudget: the least recently used
  // entry of any of them is evicted first), each block counting window_block_bytes; null: none.
  LruBudget* window_budget = nullptr;
  int64_t window_block_bytes = 0;
  double window_ttl_s = 0;    // 0: cached window blocks never expire (only LRU eviction)
  double prefix_ttl_s = 0;    // 0: prefix blocks never expire (only LRU eviction)
  bool prefix_caching = true;  // register full blocks and find them again
  // Positions a sequence may roll back (rejected draft tokens): Commit keeps the window blocks a query at
  // num_tokens − max_rollback would see, so the window survives a rollback that far.
  int64_t max_rollback = 0;
};

// One sequence's blocks: entry i covers positions [128·i, 128·(i+1)).
struct SequenceBlocks {
  std::vector<int32_t> prefix;   // every index below the sequence's extent
  std::vector<int32_t> window;   // kNoBlock where released (behind the window) or not restored
  std::vector<BlockHash> hashes;  // of the sequence's full blocks, chained from `root`
  BlockHash root;
  int64_t registered = 0;         // leading full prefix blocks already registered (and offered)
  int64_t window_registered = 0;  // leading full window blocks already registered
  // Blocks from this index on are not registered: their contents follow a bounded replay, which is not
  // bit-exact, so other requests must not find them under the exact names.
  int64_t register_limit = INT64_MAX;
  int64_t window_register_limit = INT64_MAX;
};

class BlockManager {
 public:
  explicit BlockManager(const BlockManagerOptions& options);

  bool has_prefix() const { return prefix_.num_blocks() > 0; }
  bool has_window() const { return window_.num_blocks() > 0; }
  int64_t window() const { return window_size_; }

  // Leading blocks of `hashes` (at most max_blocks) cached in the prefix class.
  int64_t MatchPrefix(std::span<const BlockHash> hashes, int64_t max_blocks) const;
  // Whether the window blocks a sequence needs to resume exactly at boundary block `b` (position 128·b)
  // are cached: those holding positions [128·b − window + 1, 128·b). True for b = 0 and without window
  // groups.
  bool HasWindowAt(std::span<const BlockHash> hashes, int64_t b) const;
  // When HasWindowAt(hashes, b) is false, why: kExpired if one of the missing window blocks expired, else
  // kEvicted if one was evicted for room, else kNever (never cached, or forgotten too long ago to tell).
  Forgotten WhyNoWindowAt(std::span<const BlockHash> hashes, int64_t b) const;
  // Indices of the window blocks holding positions [from, end) (from clipped at 0).
  BlockRange WindowRange(int64_t from, int64_t end) const;

  // Gives an empty sequence (its hashes set) references to its first n prefix blocks, and to the window
  // blocks at boundary window_at when window_at >= 0 (HasWindowAt must hold). Both must be cached.
  void Attach(SequenceBlocks* seq, int64_t n, int64_t window_at);

  struct Need {
    int64_t prefix = 0, window = 0;
  };
  // New blocks a chunk over positions [start, end) needs: prefix blocks up to `end`, window blocks over
  // [start − window + 1, end).
  Need NeedFor(const SequenceBlocks& seq, int64_t start, int64_t end) const;
  bool CanAllocate(const Need& need) const;
  // Allocates what NeedFor says; false (and nothing changed) when a class has too few blocks.
  bool Grow(SequenceBlocks* seq, int64_t start, int64_t end);

  // The sequence now holds `num_tokens` positions (of `tokens`, the prompt and output so far): extends its
  // hashes, registers the blocks that became full (prefix and window classes; calling on_full(index, id)
  // for each newly registered prefix block), and releases window blocks no later query can see.
  void Commit(SequenceBlocks* seq, std::span<const int32_t> tokens, int64_t num_tokens, int64_t now_nanos,
              const std::function<void(int64_t index, int32_t block)>& on_full = {});
  // Releases every block of the sequence (full ones stay cached).
  void Free(SequenceBlocks* seq, int64_t now_nanos);

  // Speculative decoding. A verify step computes k draft positions past a sequence's num_tokens; of them
  // only the accepted ones are committed (Commit with the accepted count registers only blocks full of
  // accepted positions), and the sequence then rolls back to what it accepted.
  //
  // Blocks for the k lookahead positions [num_tokens, num_tokens + k) (Grow over them); false (nothing
  // changed) when a class has too few blocks.
  bool AllocateLookahead(SequenceBlocks* seq, int64_t num_tokens, int64_t k);
  // The sequence holds num_tokens positions again: the blocks wholly past them (lookahead slots of
  // rejected drafts) are released and the hashes of blocks no longer full are dropped; the window blocks
  // covering the positions a query at num_tokens sees stay. FailedPrecondition (nothing changed) when that
  // would go back into a registered (immutable, shared) block or a window block already released (more
  // than max_rollback positions back).
  Status Rollback(SequenceBlocks* seq, int64_t num_tokens, int64_t now_nanos);

  // A second sequence over the same num_tokens positions (n > 1): full blocks are shared by reference, a
  // partial last block gets a new block that the caller fills with a copy of the parent's (`copies`:
  // {window class?, from, to}). False (nothing changed) when blocks run out.
  struct Copy {
    bool window = false;
    int32_t from = kNoBlock, to = kNoBlock;
  };
  bool Fork(const SequenceBlocks& parent, int64_t num_tokens, SequenceBlocks* child, std::vector<Copy>* copies);

  // TTL expiry of cached blocks.
  void Expire(int64_t now_nanos);

  BlockAllocator& prefix() { return prefix_; }
  BlockAllocator& window_class() { return window_; }
  const BlockAllocator& prefix() const { return prefix_; }
  const BlockAllocator& window_class() const { return window_; }
  Status CheckInvariants() const;

 private:
  BlockAllocator prefix_;
  BlockAllocator window_;
  int64_t window_size_;
  bool caching_;
  int64_t max_rollback_;
};

}  // namespace deepinfer::kvcache
