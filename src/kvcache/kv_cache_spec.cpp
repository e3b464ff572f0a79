#include "kvcache/kv_cache_spec.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

namespace deepinfer::kvcache {

const char* CacheKindName(CacheKind kind) {
  switch (kind) {
    case CacheKind::kCompressed: return "compressed";
    case CacheKind::kIndexerKeys: return "indexer_keys";
    case CacheKind::kSharedLatent: return "shared_latent";
    case CacheKind::kSlidingWindow: return "sliding_window";
  }
  return "?";
}

const char* CacheElementName(CacheElement element) {
  switch (element) {
    case CacheElement::kF32: return "f32";
    case CacheElement::kBF16: return "bf16";
    case CacheElement::kFP8E4M3: return "fp8_e4m3";
    case CacheElement::kFP4E2M1: return "fp4_e2m1";
  }
  return "?";
}

double KvCacheSpec::BytesPerToken() const {
  double bytes = 0;
  for (const CacheGroupSpec& g : groups) bytes += static_cast<double>(g.bytes_per_block) / g.tokens_per_block;
  return bytes;
}

BlockSpan BlocksNeeded(const CacheGroupSpec& group, int64_t start, int64_t end) {
  const int64_t tokens = group.tokens_per_block;
  BlockSpan span;
  span.end = (end + tokens - 1) / tokens;
  if (group.retention == CacheRetention::kWindow) span.first = std::max<int64_t>(0, start - group.window + 1) / tokens;
  span.first = std::min(span.first, span.end);
  return span;
}

Result<KvBlockPool> KvBlockPool::Create(int64_t bytes_per_block, int64_t num_blocks) {
  if (bytes_per_block < 0 || num_blocks < 0)
    return Status::InvalidArgument("KV block pool: negative size (" + std::to_string(bytes_per_block) +
                                   " bytes × " + std::to_string(num_blocks) + " blocks)");
  if (num_blocks > std::numeric_limits<int32_t>::max())
    return Status::InvalidArgument("KV block pool: " + std::to_string(num_blocks) + " blocks do not fit block ids");
  KvBlockPool pool;
  pool.bytes_per_block_ = bytes_per_block;
  pool.num_blocks_ = num_blocks;
  pool.stride_ = (bytes_per_block + 63) / 64 * 64;
  if (pool.stride_ > 0 && num_blocks > std::numeric_limits<int64_t>::max() / pool.stride_)
    return Status::InvalidArgument("KV block pool: size overflows");
  const size_t bytes = static_cast<size_t>(pool.stride_ * num_blocks);
  if (bytes == 0) return pool;
  // Anonymous memory: page-aligned, zero, committed as it is first written, and a clean error (not an
  // exception) when the system refuses the reservation.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return Status::ResourceExhausted("KV block pool: cannot reserve " + std::to_string(bytes >> 20) + " MiB (" +
                                     std::to_string(num_blocks) + " blocks of " + std::to_string(bytes_per_block) +
                                     " bytes)");
  pool.data_ = static_cast<uint8_t*>(p);
  pool.mapped_bytes_ = bytes;
  return pool;
}

KvBlockPool::~KvBlockPool() {
  if (data_ != nullptr) munmap(data_, mapped_bytes_);
}

KvBlockPool::KvBlockPool(KvBlockPool&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_per_block_(std::exchange(other.bytes_per_block_, 0)),
      stride_(std::exchange(other.stride_, 0)),
      num_blocks_(std::exchange(other.num_blocks_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

KvBlockPool& KvBlockPool::operator=(KvBlockPool&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, mapped_bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_per_block_ = std::exchange(other.bytes_per_block_, 0);
    stride_ = std::exchange(other.stride_, 0);
    num_blocks_ = std::exchange(other.num_blocks_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

void KvBlockPool::CopyBlock(int32_t from, int32_t to) {
  if (from == to || bytes_per_block_ == 0) return;
  std::memcpy(block(to), block(from), static_cast<size_t>(bytes_per_block_));
}

Result<KvPools> KvPools::Create(const KvCacheSpec& spec, std::span<const int64_t> blocks_per_group) {
  if (blocks_per_group.size() != spec.groups.size())
    return Status::InvalidArgument("KV pools: " + std::to_string(blocks_per_group.size()) + " block counts for " +
                                   std::to_string(spec.groups.size()) + " cache groups");
  KvPools pools;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    auto pool = KvBlockPool::Create(spec.groups[g].bytes_per_block, blocks_per_group[g]);
    if (!pool.ok()) return pool.status().WithContext("cache group '" + spec.groups[g].name + "'");
    pools.pools_.push_back(std::move(*pool));
  }
  return pools;
}

Result<KvPools> KvPools::Create(const KvCacheSpec& spec, int64_t blocks_each) {
  std::vector<int64_t> counts(spec.groups.size(), blocks_each);
  return Create(spec, counts);
}

}  // namespace deepinfer::kvcache
