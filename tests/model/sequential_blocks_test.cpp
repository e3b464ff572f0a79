// The sequential block filling of tools and tests.
#include "model/sequential_blocks.h"

#include <gtest/gtest.h>

#include "kvcache/kv_cache_spec.h"
#include "model/causal_lm.h"

namespace deepinfer::model {
namespace {

kvcache::CacheGroupSpec Prefix(int64_t bytes) {
  kvcache::CacheGroupSpec g;
  g.name = "prefix";
  g.bytes_per_block = bytes;
  return g;
}

kvcache::CacheGroupSpec Window(int64_t window, int64_t bytes) {
  kvcache::CacheGroupSpec g;
  g.name = "window";
  g.kind = kvcache::CacheKind::kSlidingWindow;
  g.retention = kvcache::CacheRetention::kWindow;
  g.window = window;
  g.bytes_per_block = bytes;
  return g;
}

// A state with the spec's tables, for the allocator (no model needed).
class PlainState : public SequenceState {
 public:
  explicit PlainState(size_t groups) : SequenceState(nullptr, groups) {}
  void Advance(int64_t n) { num_tokens_ += n; }
};

TEST(SequentialBlocks, GivesEachNeededBlockOnceAndSkipsWindowBlocksOutOfReach) {
  kvcache::KvCacheSpec spec;
  spec.groups = {Prefix(64), Window(128, 64)};
  auto pools = kvcache::KvPools::Create(spec, 8);
  ASSERT_TRUE(pools.ok());
  SequentialBlocks blocks(spec, *pools);
  PlainState s(2);
  ASSERT_TRUE(blocks.Reserve(s, 100).ok());
  EXPECT_EQ(s.block_table(0), (std::vector<int32_t>{0}));
  EXPECT_EQ(s.block_table(1), (std::vector<int32_t>{0}));
  s.Advance(100);
  ASSERT_TRUE(blocks.Reserve(s, 400).ok());  // to 500: blocks 0..3
  EXPECT_EQ(s.block_table(0), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(s.block_table(1), (std::vector<int32_t>{0, 1, 2, 3}));
  s.Advance(400);
  // A decode at 1000 needs prefix blocks 4..7 and window blocks for 873..1000 (6 and 7) only.
  for (int i = 0; i < 500; ++i) s.Advance(1);
  ASSERT_TRUE(blocks.Reserve(s, 1).ok());
  EXPECT_EQ(s.block_table(0), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(s.block_table(1), (std::vector<int32_t>{0, 1, 2, 3, kvcache::kNoBlock, kvcache::kNoBlock, 4, 5}));
  EXPECT_EQ(blocks.used(0), 8);
  EXPECT_EQ(blocks.used(1), 6);
  // The prefix pool is used up: refused, and nothing changes.
  s.Advance(24);
  const auto before0 = s.block_table(0), before1 = s.block_table(1);
  EXPECT_EQ(blocks.Reserve(s, 1).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.block_table(0), before0);
  EXPECT_EQ(s.block_table(1), before1);
}

}  // namespace
}  // namespace deepinfer::model
