// What speculative decoding needs of the block manager: lookahead slots for draft positions, commits of
// accepted positions only, rollback of rejected drafts, and window blocks kept for max_rollback positions.
#include <numeric>

#include <gtest/gtest.h>

#include "kvcache/block_manager.h"

namespace deepinfer::kvcache {
namespace {

std::vector<int32_t> Positions(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  return t;
}

BlockManagerOptions DraftingOptions(int64_t max_rollback = 0) {
  return {.prefix_blocks = 16, .window_blocks = 8, .window = 128, .window_ttl_s = 180, .max_rollback = max_rollback};
}

SequenceBlocks EmptySequence() {
  SequenceBlocks s;
  s.root = RootHash({}, "exact", "f32", "");
  return s;
}

TEST(BlockManagerDrafting, LookaheadSlotsCoverTheDraftPositionsAcrossABlockBoundary) {
  BlockManager m(DraftingOptions());
  SequenceBlocks s = EmptySequence();
  const std::vector<int32_t> tokens = Positions(126);
  ASSERT_TRUE(m.Grow(&s, 0, 126));
  m.Commit(&s, tokens, 126, 0);
  EXPECT_EQ(s.prefix.size(), 1u);
  const int64_t used = m.prefix().num_used();
  ASSERT_TRUE(m.AllocateLookahead(&s, 126, 4));  // positions 126..129 reach into block 1
  EXPECT_EQ(s.prefix.size(), 2u);
  EXPECT_EQ(m.prefix().num_used(), used + 1);
  EXPECT_NE(s.window[1], kNoBlock);
  ASSERT_TRUE(m.AllocateLookahead(&s, 126, 2));  // within what is held: nothing new
  EXPECT_EQ(m.prefix().num_used(), used + 1);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerDrafting, OnlyBlocksFullOfAcceptedPositionsAreRegistered) {
  BlockManager m(DraftingOptions());
  SequenceBlocks s = EmptySequence();
  std::vector<int32_t> tokens = Positions(126);
  ASSERT_TRUE(m.Grow(&s, 0, 126));
  m.Commit(&s, tokens, 126, 0);
  // Four drafts computed (126..129), one accepted: 127 positions, block 0 not yet full.
  ASSERT_TRUE(m.AllocateLookahead(&s, 126, 4));
  tokens.push_back(126);
  m.Commit(&s, tokens, 127, 0);
  EXPECT_EQ(s.hashes.size(), 0u);
  EXPECT_FALSE(m.prefix().hashed(s.prefix[0]));
  ASSERT_TRUE(m.Rollback(&s, 127, 0).ok());
  EXPECT_EQ(s.prefix.size(), 1u);  // the lookahead block of the rejected drafts went back
  // The next step accepts one more: block 0 is full of accepted positions and is registered.
  ASSERT_TRUE(m.AllocateLookahead(&s, 127, 3));
  tokens.push_back(127);
  m.Commit(&s, tokens, 128, 0);
  ASSERT_EQ(s.hashes.size(), 1u);
  EXPECT_EQ(m.prefix().Find(s.hashes[0]), s.prefix[0]);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerDrafting, RollbackReleasesLookaheadBlocksAndRefusesRegisteredOnes) {
  BlockManager m(DraftingOptions());
  SequenceBlocks s = EmptySequence();
  const std::vector<int32_t> tokens = Positions(200);
  ASSERT_TRUE(m.Grow(&s, 0, 200));
  m.Commit(&s, tokens, 200, 0);
  const int64_t used = m.prefix().num_used();
  ASSERT_TRUE(m.AllocateLookahead(&s, 200, 100));  // into block 2
  EXPECT_EQ(m.prefix().num_used(), used + 1);
  ASSERT_TRUE(m.Rollback(&s, 200, 0).ok());
  EXPECT_EQ(m.prefix().num_used(), used);
  EXPECT_EQ(s.prefix.size(), 2u);
  // Block 0 is registered: positions inside it are immutable.
  const Status inside = m.Rollback(&s, 100, 0);
  EXPECT_EQ(inside.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.prefix.size(), 2u);  // nothing changed
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerDrafting, WindowBlocksAreKeptForMaxRollbackPositions) {
  // Window 128: a query at 260 sees positions 133..260 (blocks 1 and 2); one at 250 sees 123..250, which
  // reaches into block 0.
  for (const int64_t rollback : {int64_t{0}, int64_t{16}}) {
    BlockManager m(DraftingOptions(rollback));
    SequenceBlocks s = EmptySequence();
    s.register_limit = 0;  // keep every block the sequence's own (rollback into them is allowed)
    s.window_register_limit = 0;
    const std::vector<int32_t> tokens = Positions(260);
    ASSERT_TRUE(m.Grow(&s, 0, 260));
    m.Commit(&s, tokens, 260, 0);
    const bool kept = s.window[0] != kNoBlock;
    EXPECT_EQ(kept, rollback == 16) << rollback;
    const Status back = m.Rollback(&s, 250, 0);
    EXPECT_EQ(back.ok(), rollback == 16) << rollback << " " << back.ToString();
    EXPECT_TRUE(m.CheckInvariants().ok());
  }
}

}  // namespace
}  // namespace deepinfer::kvcache
