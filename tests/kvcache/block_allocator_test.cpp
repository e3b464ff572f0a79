#include "kvcache/block_allocator.h"

#include <gtest/gtest.h>

namespace deepinfer::kvcache {
namespace {

BlockHash H(uint64_t n) { return BlockHash{n * 0x9E3779B97F4A7C15ull, n}; }

TEST(BlockAllocator, AllocatesEveryBlockOnceThenRefuses) {
  BlockAllocator a({.num_blocks = 3});
  EXPECT_EQ(a.Allocate(), 0);
  EXPECT_EQ(a.Allocate(), 1);
  EXPECT_EQ(a.Allocate(), 2);
  EXPECT_EQ(a.Allocate(), kNoBlock);
  EXPECT_EQ(a.num_used(), 3);
  EXPECT_TRUE(a.CheckInvariants().ok());
}

TEST(BlockAllocator, ReleasedHashedBlocksStayFindableUntilEvictedLeastRecentlyUsedFirst) {
  BlockAllocator a({.num_blocks = 3});
  const int32_t b0 = a.Allocate(), b1 = a.Allocate(), b2 = a.Allocate();
  EXPECT_EQ(a.Register(b0, H(10)), b0);
  EXPECT_EQ(a.Register(b1, H(11)), b1);
  a.Release(b1, 100);  // b1 cached first: oldest
  a.Release(b0, 200);
  a.Release(b2, 300);  // unhashed: free
  EXPECT_EQ(a.num_cached(), 2);
  EXPECT_EQ(a.num_free(), 1);
  EXPECT_EQ(a.Find(H(11)), b1);
  // The free block goes first, then the LRU cached one (b1), which is forgotten.
  EXPECT_EQ(a.Allocate(), b2);
  EXPECT_EQ(a.Allocate(), b1);
  EXPECT_EQ(a.Find(H(11)), kNoBlock);
  EXPECT_EQ(a.evictions(), 1u);
  EXPECT_EQ(a.Find(H(10)), b0);
  EXPECT_TRUE(a.CheckInvariants().ok());
}

TEST(BlockAllocator, AcquireTakesACachedBlockBackAndSharesAUsedOne) {
  BlockAllocator a({.num_blocks = 2});
  const int32_t b = a.Allocate();
  a.Register(b, H(1));
  EXPECT_EQ(a.Acquire(H(1)), b);  // used: shared
  EXPECT_EQ(a.refcount(b), 2);
  a.Release(b, 1);
  a.Release(b, 2);
  EXPECT_EQ(a.num_cached(), 1);
  EXPECT_EQ(a.Acquire(H(1)), b);  // cached: back in use, off the LRU list
  EXPECT_EQ(a.num_cached(), 0);
  EXPECT_EQ(a.refcount(b), 1);
  EXPECT_EQ(a.Acquire(H(2)), kNoBlock);
  EXPECT_TRUE(a.CheckInvariants().ok());
}

TEST(BlockAllocator, RegisteringADuplicateNameKeepsTheFirstBlock) {
  BlockAllocator a({.num_blocks = 2});
  const int32_t x = a.Allocate(), y = a.Allocate();
  EXPECT_EQ(a.Register(x, H(5)), x);
  EXPECT_EQ(a.Register(y, H(5)), x);
  EXPECT_FALSE(a.hashed(y));
  a.Release(y, 1);  // unhashed duplicate: freed, not cached
  EXPECT_EQ(a.num_free(), 1);
  EXPECT_TRUE(a.CheckInvariants().ok());
}

TEST(BlockAllocator, CachedBoundEvictsTheOldest) {
  BlockAllocator a({.num_blocks = 4, .max_cached = 2});
  for (uint64_t i = 0; i < 4; ++i) {
    const int32_t b = a.Allocate();
    a.Register(b, H(i));
    a.Release(b, static_cast<int64_t>(i));
  }
  EXPECT_EQ(a.num_cached(), 2);
  EXPECT_EQ(a.Find(H(0)), kNoBlock);
  EXPECT_EQ(a.Find(H(1)), kNoBlock);
  EXPECT_NE(a.Find(H(3)), kNoBlock);
  EXPECT_TRUE(a.CheckInvariants().ok());
}

TEST(BlockAllocator, TtlExpiresOnlyBlocksUnusedForLongEnough) {
  BlockAllocator a({.num_blocks = 3, .ttl_seconds = 10});
  const int64_t s = 1'000'000'000;
  for (uint64_t i = 0; i < 3; ++i) {
    const int32_t b = a.Allocate();
    a.Register(b, H(i));
    a.Release(b, static_cast<int64_t>(i) * 5 * s);  // last used at 0 s, 5 s, 10 s
  }
  EXPECT_EQ(a.Expire(9 * s), 0);  // cut at −1 s: nothing
  EXPECT_EQ(a.num_cached(), 3);
  EXPECT_EQ(a.Expire(16 * s), 2);  // cut at 6 s: the 0 s and 5 s blocks
  EXPECT_EQ(a.Find(H(2)), 2);
  EXPECT_EQ(a.expirations(), 2u);
  EXPECT_TRUE(a.CheckInvariants().ok());
}

TEST(BlockAllocator, RemembersWhyANameWasForgottenUntilItIsRegisteredAgain) {
  BlockAllocator a({.num_blocks = 2, .ttl_seconds = 10});
  const int64_t s = 1'000'000'000;
  for (uint64_t i = 0; i < 2; ++i) {
    const int32_t b = a.Allocate();
    a.Register(b, H(i));
    a.Release(b, static_cast<int64_t>(i) * 20 * s);  // last used at 0 s and 20 s
  }
  EXPECT_EQ(a.Expire(15 * s), 1);  // H(0) expired
  a.Allocate();                    // the free block (H(0)'s)
  a.Allocate();                    // no free block: H(1), the only cached one, is evicted for room
  EXPECT_EQ(a.WhyForgotten(H(0)), Forgotten::kExpired);
  EXPECT_EQ(a.WhyForgotten(H(1)), Forgotten::kEvicted);
  EXPECT_EQ(a.WhyForgotten(H(7)), Forgotten::kNever);
  a.Register(0, H(0));  // computed again: cached (used) now, nothing forgotten
  EXPECT_EQ(a.WhyForgotten(H(0)), Forgotten::kNever);
  EXPECT_TRUE(a.CheckInvariants().ok());
}

TEST(BlockAllocator, RemembersAsManyForgottenNamesAsThePoolHasBlocksButAtLeast1024) {
  BlockAllocator a({.num_blocks = 1});
  for (uint64_t i = 0; i < 1025; ++i) {
    const int32_t b = a.Allocate();  // evicts the previous name
    a.Register(b, H(i));
    a.Release(b, static_cast<int64_t>(i));
  }
  // Names 0 .. 1023 were evicted; the memory holds the last 1024 of them.
  EXPECT_EQ(a.WhyForgotten(H(0)), Forgotten::kEvicted);
  EXPECT_EQ(a.WhyForgotten(H(1023)), Forgotten::kEvicted);
  const int32_t b = a.Allocate();  // evicts 1024: 0 leaves the memory
  a.Release(b, 2000);
  EXPECT_EQ(a.WhyForgotten(H(0)), Forgotten::kNever);
  EXPECT_EQ(a.WhyForgotten(H(1)), Forgotten::kEvicted);
  EXPECT_EQ(a.WhyForgotten(H(1024)), Forgotten::kEvicted);
}

TEST(BlockAllocator, DoubleReleaseIsReported) {
  BlockAllocator a({.num_blocks = 1});
  const int32_t b = a.Allocate();
  a.Release(b, 0);
  a.Release(b, 0);
  EXPECT_FALSE(a.CheckInvariants().ok());
}

}  // namespace
}  // namespace deepinfer::kvcache
