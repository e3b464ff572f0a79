// The cache spec helpers and the block pools.
#include "kvcache/kv_cache_spec.h"

#include <cstring>

#include <gtest/gtest.h>

namespace deepinfer::kvcache {
namespace {

CacheGroupSpec Prefix(int64_t bytes) {
  CacheGroupSpec g;
  g.name = "prefix";
  g.bytes_per_block = bytes;
  return g;
}

CacheGroupSpec Window(int64_t window, int64_t bytes) {
  CacheGroupSpec g;
  g.name = "window";
  g.kind = CacheKind::kSlidingWindow;
  g.retention = CacheRetention::kWindow;
  g.window = window;
  g.bytes_per_block = bytes;
  return g;
}

TEST(KvCacheSpec, BlocksNeededCoversWhatAChunkReadsAndWrites) {
  const CacheGroupSpec prefix = Prefix(64), window = Window(128, 64);
  // A prefix group needs every block up to the chunk's end.
  EXPECT_EQ(BlocksNeeded(prefix, 0, 1).first, 0);
  EXPECT_EQ(BlocksNeeded(prefix, 0, 1).end, 1);
  EXPECT_EQ(BlocksNeeded(prefix, 300, 301).first, 0);
  EXPECT_EQ(BlocksNeeded(prefix, 300, 301).end, 3);
  EXPECT_EQ(BlocksNeeded(prefix, 0, 256).end, 2);  // positions 0..255: blocks 0 and 1
  EXPECT_EQ(BlocksNeeded(prefix, 0, 257).end, 3);
  // A window group: positions [start - 127, end). Decode at 300 sees 173..300: blocks 1 and 2.
  EXPECT_EQ(BlocksNeeded(window, 300, 301).first, 1);
  EXPECT_EQ(BlocksNeeded(window, 300, 301).end, 3);
  // At 255 the window starts at 128: block 1 only; at 256 it starts at 129, still block 1, plus block 2.
  EXPECT_EQ(BlocksNeeded(window, 255, 256).first, 1);
  EXPECT_EQ(BlocksNeeded(window, 255, 256).end, 2);
  EXPECT_EQ(BlocksNeeded(window, 254, 255).first, 0);  // 254 - 127 = 127 lies in block 0
  EXPECT_EQ(BlocksNeeded(window, 0, 10).first, 0);
  EXPECT_TRUE(BlocksNeeded(window, 300, 301).contains(2));
  EXPECT_FALSE(BlocksNeeded(window, 300, 301).contains(0));
}

TEST(KvCacheSpec, BytesPerTokenSumsTheGroups) {
  KvCacheSpec spec;
  spec.groups = {Prefix(128 * 6), Window(128, 128 * 10)};
  EXPECT_DOUBLE_EQ(spec.BytesPerToken(), 16.0);
}

TEST(KvBlockPool, CreateReportsErrorsInsteadOfThrowing) {
  EXPECT_EQ(KvBlockPool::Create(-1, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(KvBlockPool::Create(64, -4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(KvBlockPool::Create(int64_t{1} << 40, int64_t{1} << 30).status().code(), StatusCode::kInvalidArgument);
  // 2^50 bytes (a petabyte) cannot be reserved on any machine this runs on.
  EXPECT_EQ(KvBlockPool::Create(int64_t{1} << 30, int64_t{1} << 20).status().code(), StatusCode::kResourceExhausted);
  auto empty = KvBlockPool::Create(0, 8);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->num_blocks(), 8);
}

TEST(KvBlockPool, BlocksAreAlignedZeroAndSeparate) {
  auto pool = KvBlockPool::Create(100, 3);  // not a multiple of 64: blocks are still 64-byte aligned
  ASSERT_TRUE(pool.ok());
  for (int32_t b = 0; b < 3; ++b) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pool->block(b)) % 64, 0u);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(pool->block(b)[i], 0);
  }
  std::memset(pool->block(1), 0xAB, 100);
  EXPECT_EQ(pool->block(0)[99], 0);
  EXPECT_EQ(pool->block(2)[0], 0);
  pool->CopyBlock(1, 2);
  EXPECT_EQ(std::memcmp(pool->block(1), pool->block(2), 100), 0);
  EXPECT_TRUE(pool->contains(2));
  EXPECT_FALSE(pool->contains(3));
  EXPECT_FALSE(pool->contains(kNoBlock));
  KvBlockPool moved = std::move(*pool);
  EXPECT_EQ(moved.block(2)[5], 0xAB);
  EXPECT_EQ(moved.bytes_per_block(), 100);
}

TEST(KvPools, OnePoolPerGroup) {
  KvCacheSpec spec;
  spec.groups = {Prefix(64), Window(128, 192)};
  const int64_t counts[] = {3, 5};
  auto pools = KvPools::Create(spec, counts);
  ASSERT_TRUE(pools.ok());
  ASSERT_EQ(pools->num_groups(), 2u);
  EXPECT_EQ(pools->group(0).num_blocks(), 3);
  EXPECT_EQ(pools->group(1).num_blocks(), 5);
  EXPECT_EQ(pools->group(1).bytes_per_block(), 192);
  const int64_t wrong[] = {3};
  EXPECT_EQ(KvPools::Create(spec, wrong).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer::kvcache
