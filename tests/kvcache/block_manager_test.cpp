#include "kvcache/block_manager.h"

#include <numeric>

#include <gtest/gtest.h>

namespace deepinfer::kvcache {
namespace {

std::vector<int32_t> Tokens(int64_t n, int32_t base = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), base);
  return t;
}

BlockManagerOptions Options(int64_t prefix = 16, int64_t window = 8) {
  return {.prefix_blocks = prefix, .window_blocks = window, .window = 128, .window_ttl_s = 180};
}

// Runs a sequence over `tokens` in chunks of `chunk`, as the engine does: Grow, then Commit.
void RunSequence(BlockManager& m, SequenceBlocks* seq, const std::vector<int32_t>& tokens, int64_t from,
                 int64_t chunk) {
  for (int64_t start = from; start < static_cast<int64_t>(tokens.size()); start += chunk) {
    const int64_t end = std::min<int64_t>(start + chunk, static_cast<int64_t>(tokens.size()));
    ASSERT_TRUE(m.Grow(seq, start, end));
    m.Commit(seq, tokens, end, end);
  }
}

TEST(BlockHash, ChainsDependOnEveryTokenTheRootAndTheOrder) {
  const BlockHash root = RootHash({1, 2}, "exact", "f32", "");
  std::vector<BlockHash> a, b, c;
  std::vector<int32_t> t = Tokens(300);
  ExtendBlockHashes(root, t, &a);
  ASSERT_EQ(a.size(), 2u);  // 300 tokens: two full blocks
  t[200] = 7;               // inside block 1
  ExtendBlockHashes(root, t, &b);
  EXPECT_EQ(a[0], b[0]);
  EXPECT_NE(a[1], b[1]);
  ExtendBlockHashes(RootHash({1, 2}, "exact", "f32", "tenant"), Tokens(300), &c);
  EXPECT_NE(a[0], c[0]);  // the salt isolates
  EXPECT_NE(RootHash({1, 2}, "exact", "bf16", ""), root);
  EXPECT_NE(RootHash({1, 3}, "exact", "f32", ""), root);
  // Incremental extension equals one-shot hashing.
  std::vector<BlockHash> inc;
  std::vector<int32_t> grow = Tokens(300);
  ExtendBlockHashes(root, std::span(grow).first(130), &inc);
  ExtendBlockHashes(root, grow, &inc);
  EXPECT_EQ(inc, a);
}

TEST(BlockManager, FinishedSequenceLeavesItsFullBlocksForALaterHit) {
  BlockManager m(Options());
  const std::vector<int32_t> tokens = Tokens(300);
  SequenceBlocks a;
  a.root = RootHash({}, "exact", "f32", "");
  RunSequence(m, &a, tokens, 0, 100);
  EXPECT_EQ(a.hashes.size(), 2u);
  m.Free(&a, 1000);
  EXPECT_EQ(m.prefix().num_cached(), 2);  // the partial third block was freed
  EXPECT_TRUE(m.CheckInvariants().ok());

  SequenceBlocks b;
  b.root = a.root;
  ExtendBlockHashes(b.root, tokens, &b.hashes);
  EXPECT_EQ(m.MatchPrefix(b.hashes, 10), 2);
  EXPECT_EQ(m.MatchPrefix(b.hashes, 1), 1);
  // The last window block (positions 128..255) was in the window when `a` finished: cached, so a hit at
  // boundary 2 resumes exactly; boundary 1's window block fell out of the window and was cached too.
  EXPECT_TRUE(m.HasWindowAt(b.hashes, 2));
  EXPECT_TRUE(m.HasWindowAt(b.hashes, 1));
  m.Attach(&b, 2, 2);
  EXPECT_EQ(m.prefix().num_cached(), 0);
  EXPECT_EQ(b.window[1], m.window_class().Find(b.hashes[1]));
  EXPECT_EQ(b.window[0], kNoBlock);
  RunSequence(m, &b, tokens, 256, 64);
  m.Free(&b, 2000);
  EXPECT_TRUE(m.CheckInvariants().ok());
  EXPECT_EQ(m.prefix().num_used(), 0);
  EXPECT_EQ(m.window_class().num_used(), 0);
}

TEST(BlockManager, WindowBlocksAreReleasedOnceBehindTheWindow) {
  BlockManager m(Options(16, 8));
  SequenceBlocks s;
  const std::vector<int32_t> tokens = Tokens(1000);
  RunSequence(m, &s, tokens, 0, 1);  // decode-like: one position at a time
  // At 1000 positions the next query sees [873, 1000]: window blocks 6 (768..895) and 7 only.
  int64_t held = 0;
  for (int32_t b : s.window) held += b != kNoBlock;
  EXPECT_EQ(held, 2);
  EXPECT_EQ(m.window_class().num_used(), 2);
  EXPECT_EQ(m.window_class().num_cached(), 6);  // full blocks 0..5, cached as they left the window
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManager, NeedCountsOnlyMissingBlocksAndGrowIsAllOrNothing) {
  BlockManager m(Options(3, 2));
  SequenceBlocks s;
  const BlockManager::Need need = m.NeedFor(s, 0, 300);
  EXPECT_EQ(need.prefix, 3);
  EXPECT_EQ(need.window, 3);  // a 300-token chunk writes window entries over three blocks
  EXPECT_FALSE(m.Grow(&s, 0, 300));
  EXPECT_TRUE(s.prefix.empty());
  EXPECT_EQ(m.prefix().num_used(), 0);
  EXPECT_TRUE(m.Grow(&s, 0, 200));
  EXPECT_EQ(m.NeedFor(s, 200, 201).prefix, 0);
}

TEST(BlockManager, ForkSharesFullBlocksAndCopiesThePartialOne) {
  BlockManager m(Options());
  SequenceBlocks p;
  const std::vector<int32_t> tokens = Tokens(200);
  RunSequence(m, &p, tokens, 0, 200);
  SequenceBlocks c;
  std::vector<BlockManager::Copy> copies;
  ASSERT_TRUE(m.Fork(p, 200, &c, &copies));
  EXPECT_EQ(c.prefix[0], p.prefix[0]);
  EXPECT_NE(c.prefix[1], p.prefix[1]);
  EXPECT_EQ(m.prefix().refcount(p.prefix[0]), 2);
  ASSERT_EQ(copies.size(), 2u);  // the partial prefix block and the partial window block
  EXPECT_FALSE(copies[0].window);
  EXPECT_EQ(copies[0].from, p.prefix[1]);
  EXPECT_TRUE(copies[1].window);
  m.Free(&p, 1);
  m.Free(&c, 2);
  EXPECT_TRUE(m.CheckInvariants().ok());
  EXPECT_EQ(m.prefix().num_used(), 0);
}

TEST(BlockManager, BlocksPastTheRegisterLimitAreNeverFound) {
  BlockManager m(Options());
  SequenceBlocks s;
  s.register_limit = 1;
  RunSequence(m, &s, Tokens(300), 0, 300);
  m.Free(&s, 1);
  EXPECT_EQ(m.prefix().num_cached(), 1);
  std::vector<BlockHash> hashes;
  ExtendBlockHashes(s.root, Tokens(300), &hashes);
  EXPECT_EQ(m.MatchPrefix(hashes, 10), 1);
}

TEST(BlockManager, WindowBlocksStayUntilThePoolNeedsThemAndMissesSayWhy) {
  // Default options: no TTL. Resuming at boundary 3 with a window of 128 needs positions
  // [3·128 − 127, 384) = [257, 384): window block 2 alone.
  BlockManagerOptions o{.prefix_blocks = 16, .window_blocks = 4, .window = 128};
  BlockManager m(o);
  const std::vector<int32_t> tokens = Tokens(400);
  SequenceBlocks a;
  a.root = RootHash({}, "exact", "f32", "");
  RunSequence(m, &a, tokens, 0, 128);
  const std::vector<BlockHash> hashes = a.hashes;
  m.Free(&a, 0);
  const int64_t year = int64_t{365} * 86400 * 1'000'000'000;
  m.Expire(year);
  EXPECT_TRUE(m.HasWindowAt(hashes, 3));  // a year later, the pool never needed the room
  EXPECT_EQ(m.WhyNoWindowAt(hashes, 3), Forgotten::kNever);
  // Another sequence takes every window block: the cached ones are evicted.
  SequenceBlocks b;
  b.root = RootHash({}, "exact", "f32", "other");
  ASSERT_TRUE(m.Grow(&b, 0, 4 * 128));
  EXPECT_FALSE(m.HasWindowAt(hashes, 3));
  EXPECT_EQ(m.WhyNoWindowAt(hashes, 3), Forgotten::kEvicted);
  m.Free(&b, year);
  // An operator's TTL expires them instead.
  o.window_ttl_s = 10;
  BlockManager capped(o);
  SequenceBlocks c;
  c.root = a.root;
  RunSequence(capped, &c, tokens, 0, 128);
  capped.Free(&c, 0);
  capped.Expire(int64_t{11} * 1'000'000'000);
  EXPECT_FALSE(capped.HasWindowAt(hashes, 3));
  EXPECT_EQ(capped.WhyNoWindowAt(hashes, 3), Forgotten::kExpired);
  // A boundary past what was ever computed: never cached.
  std::vector<BlockHash> longer = hashes;
  ExtendBlockHashes(a.root, Tokens(600), &longer);
  EXPECT_EQ(capped.WhyNoWindowAt(longer, 4), Forgotten::kNever);
  EXPECT_TRUE(m.CheckInvariants().ok());
  EXPECT_TRUE(capped.CheckInvariants().ok());
}

TEST(BlockManager, CachingOffFindsNothing) {
  BlockManagerOptions o = Options();
  o.prefix_caching = false;
  BlockManager m(o);
  SequenceBlocks s;
  RunSequence(m, &s, Tokens(300), 0, 300);
  m.Free(&s, 1);
  EXPECT_EQ(m.prefix().num_cached(), 0);
  EXPECT_EQ(m.prefix().num_free(), 16);
}

}  // namespace
}  // namespace deepinfer::kvcache
