// Reference counts, the hash index and LRU eviction over one class of KV blocks (ids 0 .. n-1): what the
// scheduler uses to share full blocks among sequences and to keep them after their sequences end. It holds
// no block bytes and knows no model: every group whose blocks live and die together (all of a model's
// prefix groups, or all its window groups) shares one allocator, and a block id names the same slot in
// each of those groups' pools.
//
// A block is in one of three states:
//   used    referenced by at least one sequence (hashed once full, or still being written);
//   cached  unreferenced but hashed: its contents are a known prefix block that a later hit can reuse;
//           on the LRU list, evicted (forgotten and reused) when a block is needed and none is free;
//   free    neither.
// Not thread-safe: the engine's step thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kvcache/block_hash.h"
#include "kvcache/lru_budget.h"

namespace deepinfer::kvcache {

// Why a name is not cached: it never was (as far as the allocator remembers), or it was and was evicted
// for room, or it expired (the TTL).
enum class Forgotten { kNever, kEvicted, kExpired };

class BlockAllocator : private LruBudget::Member {
 public:
  struct Options {
    int64_t num_blocks = 0;
    // At most this many cached blocks; releasing one more evicts the least recently used. -1: no bound
    // but the pool (the window class's byte budget, in blocks).
    int64_t max_cached = -1;
    // Expire() frees cached blocks unused for this long; 0: they never expire.
    double ttl_seconds = 0;
    // A byte budget the cached blocks share with other caches (each cached block counts block_bytes;
    // releasing past it evicts the least recently used entry of any of them); null: none. It must outlive
    // the allocator.
    LruBudget* budget = nullptr;
    int64_t block_bytes = 0;
  };
  explicit BlockAllocator(const Options& options);
  // The budget holds a pointer to its members.
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  // A block with one reference and no hash: a free one if there is one, else the least recently used
  // cached block (forgotten). kNoBlock when every block is referenced.
  int32_t Allocate();
  // The block named `hash` (cached or used), with one more reference; kNoBlock if there is none.
  int32_t Acquire(const BlockHash& hash);
  // The block named `hash`, or kNoBlock; changes nothing.
  int32_t Find(const BlockHash& hash) const;
  void AddRef(int32_t block);
  // Drops one reference. At zero a hashed block becomes the most recently used cached block (as of
  // now_nanos), an unhashed one free.
  void Release(int32_t block, int64_t now_nanos);
  // Names a used, unhashed block once it is full and immutable, so later requests find it. When another
  // block already has that name (two sequences computed the same block at once), nothing changes and that
  // block's id is returned; otherwise `block`.
  int32_t Register(int32_t block, const BlockHash& hash);
  // Frees the cached blocks last used before now_nanos − ttl; returns how many.
  int64_t Expire(int64_t now_nanos);
  // Frees every cached block (tests; dropping the prefix cache).
  void DropCached();
  // Why `hash` is not cached now (kNever also when it is): remembered for the last few blocks forgotten,
  // as many as the pool has blocks (at least 1024), for the miss metrics.
  Forgotten WhyForgotten(const BlockHash& hash) const;

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_cached() const { return num_cached_; }
  int64_t num_used() const { return num_blocks() - num_free() - num_cached_; }
  // Blocks Allocate can still return (free + cached).
  int64_t num_available() const { return num_free() + num_cached_; }
  uint64_t evictions() const { return evictions_; }
  uint64_t expirations() const { return expirations_; }
  int32_t refcount(int32_t block) const { return blocks_[static_cast<size_t>(block)].refs; }
  bool hashed(int32_t block) const { return blocks_[static_cast<size_t>(block)].hashed; }
  const BlockHash& hash(int32_t block) const { return blocks_[static_cast<size_t>(block)].hash; }

  // Every structural invariant (states partition the blocks, the index and LRU list agree with them, the
  // LRU list is in last-use order); for tests and the fuzzer.
  Status CheckInvariants() const;

 private:
  struct Block {
    int32_t refs = 0;
    bool hashed = false;
    bool is_free = true;
    BlockHash hash;
    int64_t last_use = 0;
    uint64_t use = 0;  // the shared budget's use serial at the release that cached it
    int32_t prev = kNoBlock, next = kNoBlock;  // LRU links while cached
  };
  void LruPushNewest(int32_t b);
  void LruRemove(int32_t b);
  // Forgets a cached block and puts it on the free list, remembering why.
  void EvictCached(int32_t b, Forgotten why);
  // LruBudget::Member: the oldest cached block, evicted for room.
  uint64_t OldestUse() const override;
  void EvictOldest() override;

  std::vector<Block> blocks_;
  std::vector<int32_t> free_;
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> index_;
  int32_t lru_oldest_ = kNoBlock, lru_newest_ = kNoBlock;
  int64_t num_cached_ = 0;
  int64_t max_cached_;
  int64_t ttl_nanos_;
  LruBudget* budget_;
  int64_t block_bytes_;
  uint64_t evictions_ = 0, expirations_ = 0;
  uint64_t misuse_ = 0;
  // Names forgotten lately: why, and the serial of the latest time; the queue holds them oldest first, and
  // an entry leaves the map with the queue entry of its latest serial (a name registered again leaves the
  // map at once; its queue entries then match nothing).
  struct ForgottenEntry {
    Forgotten why = Forgotten::kNever;
    uint64_t serial = 0;
  };
  std::unordered_map<BlockHash, ForgottenEntry, BlockHashHasher> forgotten_;
  std::deque<std::pair<BlockHash, uint64_t>> forgotten_order_;
  uint64_t forgotten_serial_ = 0;
};

}  // namespace deepinfer::kvcache
