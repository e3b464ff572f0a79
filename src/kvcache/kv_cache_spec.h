// What a model keeps in block-addressed KV storage, declared by the model so that a KV manager (block_manager.h)
// can size and share pools with no model knowledge, and the pools themselves.
//
// A model's cache is a list of groups. Every group cuts a sequence's positions into blocks of kBlockTokens
// positions; block i of every group covers positions [128·i, 128·(i+1)), so one chained block hash (of the
// tokens up to the block's end) names the same 128 positions in every group. Each group has its own pool of
// equal-sized blocks and each sequence one block table per group. What a block holds (layers, entries,
// their layout and element format) is the model's business; the manager sees bytes.
//
// Retention says what a manager may do with a full block:
//   kPrefix  immutable once full (the model never writes it again for positions the sequence has passed),
//            so it may be shared by reference among sequences with the same prefix, kept after the sequence
//            ends, and written to a persistent tier. Everything a query at a later position reads of
//            positions < p lives here, except the window.
//   kWindow  needed by a running sequence for its last `window` positions only; a full block additionally
//            holds the model's per-sequence state at the block's end boundary, so it is the exact resume
//            point of a prefix hit that ends there (see CausalLM::RestoreAt). RAM only, never persisted.
//
// How the DeepSeek architectures map onto groups (bytes are for fp32 storage unless said):
//   V3 / V3.1 (MLA)  one kCompressed group of ratio 1: per layer and position the 512-d latent plus the
//                    64-d rope key (576 values); no window.
//   V3.2 (DSA)       V3's group plus a kIndexerKeys group of ratio 1 (the lightning indexer's 128-d keys).
//   V4 / V4-Flash    kCompressed ratio 4 (CSA layers: 32 entries of 512 per block and layer), kCompressed
//                    ratio 128 (HCA layers: 1 entry of 512), kIndexerKeys ratio 4 (CSA layers: 32 keys of
//                    128), and one kSlidingWindow group of window 128 shared by every layer (and the MTP
//                    layer when drafting): 128 K=V vectors of 512 per layer, plus the compressors' state at
//                    the block's end (the overlapping compressors' previous window).
//   V4.1-Flash       kSharedLatent groups (ratio 2 for the encoder's KV sources, ratio 1 for the decoder's;
//                    FP4 E2M1 with E4M3 scales per 16 values inside the block), kIndexerKeys (FP4 with
//                    power-of-two scales per 32), and the window group (FP8 E4M3 with power-of-two scales
//                    per 32) shared by all layers; bytes_per_block counts values and scales.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kvcache/block_size.h"

namespace deepinfer::kvcache {

enum class CacheKind {
  kCompressed,     // one entry per `ratio` positions (ratio 1: one per position, as MLA's latents)
  kIndexerKeys,    // a sparse-attention indexer's keys, one per `ratio` positions
  kSharedLatent,   // V4.1: latents one KV-source layer publishes for the layers after it, one per `ratio`
  kSlidingWindow,  // K/V of every position, of which a query sees its own and the `window - 1` before it
};

enum class CacheRetention { kPrefix, kWindow };

// How values are stored in a group's blocks. The formats with scales keep them inside the block.
enum class CacheElement {
  kF32,
  kBF16,
  kFP8E4M3,  // with power-of-two scales (V4.1 window)
  kFP4E2M1,  // with E4M3 or power-of-two scales (V4.1 latents and indexer keys)
};

const char* CacheKindName(CacheKind kind);
const char* CacheElementName(CacheElement element);

struct CacheGroupSpec {
  std::string name;  // for messages and metrics, e.g. "csa_kv"
  CacheKind kind = CacheKind::kCompressed;
  CacheRetention retention = CacheRetention::kPrefix;
  int64_t ratio = 1;   // positions per entry (kSlidingWindow: 1)
  int64_t window = 0;  // kSlidingWindow only: positions a query sees, its own included
  int64_t tokens_per_block = kBlockTokens;
  int64_t bytes_per_block = 0;  // everything a block holds (values, scales, boundary state)
  CacheElement element = CacheElement::kF32;
  int64_t num_layers = 0;  // layers with entries in this group
};

struct KvCacheSpec {
  std::vector<CacheGroupSpec> groups;
  // An upper bound on the bytes a model keeps per sequence outside the blocks (SequenceState's own
  // members: the compressors' open groups, rollback history, draft state), so that a manager can budget
  // for its running sequences. Each model's header says what it is.
  int64_t sequence_state_bytes = 0;

  // Pool bytes one position costs across the groups (bytes_per_block / tokens_per_block, summed).
  double BytesPerToken() const;
};

// Block indices [first, end) of one group that a chunk over positions [start, end) needs valid in its
// sequence's table (every block it reads or writes); kNoBlock is fine everywhere else. kPrefix groups:
// every block up to the chunk's end. kWindow groups: the blocks holding positions [start - window + 1,
// end) (clipped at 0). Truncate, RestoreAt and Draft have their own needs (see causal_lm.h).
struct BlockSpan {
  int64_t first = 0, end = 0;
  bool contains(int64_t block) const { return block >= first && block < end; }
};
BlockSpan BlocksNeeded(const CacheGroupSpec& group, int64_t start, int64_t end);

// Storage for one group's blocks: `num_blocks` blocks of `bytes_per_block` bytes, each 64-byte aligned,
// zero when created. Pages are committed as blocks are first written. Which sequence uses which block is
// the caller's decision, made through the sequences' block tables. Move-only.
class KvBlockPool {
 public:
  KvBlockPool() = default;
  // ResourceExhausted (never an exception) if the memory cannot be reserved; InvalidArgument for negative
  // sizes or a size that overflows.
  static Result<KvBlockPool> Create(int64_t bytes_per_block, int64_t num_blocks);
  ~KvBlockPool();
  KvBlockPool(KvBlockPool&& other) noexcept;
  KvBlockPool& operator=(KvBlockPool&& other) noexcept;
  KvBlockPool(const KvBlockPool&) = delete;
  KvBlockPool& operator=(const KvBlockPool&) = delete;

  int64_t num_blocks() const { return num_blocks_; }
  int64_t bytes_per_block() const { return bytes_per_block_; }
  bool contains(int32_t id) const { return id >= 0 && id < num_blocks_; }
  uint8_t* block(int32_t id) { return data_ + static_cast<int64_t>(id) * stride_; }
  const uint8_t* block(int32_t id) const { return data_ + static_cast<int64_t>(id) * stride_; }
  // Copies a whole block (copy-on-write of a shared partial block before a sequence writes it).
  void CopyBlock(int32_t from, int32_t to);

 private:
  uint8_t* data_ = nullptr;
  int64_t bytes_per_block_ = 0, stride_ = 0, num_blocks_ = 0;
  size_t mapped_bytes_ = 0;
};

// One pool per group of a spec, in the spec's order.
class KvPools {
 public:
  KvPools() = default;
  // blocks_per_group[g] blocks for group g (its size must equal spec.groups.size()).
  static Result<KvPools> Create(const KvCacheSpec& spec, std::span<const int64_t> blocks_per_group);
  // The same number of blocks in every group (tests, benchmarks, single-request tools).
  static Result<KvPools> Create(const KvCacheSpec& spec, int64_t blocks_each);

  size_t num_groups() const { return pools_.size(); }
  KvBlockPool& group(size_t g) { return pools_[g]; }
  const KvBlockPool& group(size_t g) const { return pools_[g]; }

 private:
  std::vector<KvBlockPool> pools_;
};

}  // namespace deepinfer::kvcache
