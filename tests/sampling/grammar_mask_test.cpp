// The grammar adapter on the logits-mask hook: free tokens until the start token (thinking), then exactly
// the grammar's tokens, termination on the stop token, rollback across the start.
#include <gtest/gtest.h>

#include "grammar/constraint.h"
#include "sampling/grammar_mask.h"

namespace deepinfer::sampling {
namespace {

TEST(GrammarLogitsMask, ThinkingThenConstrained) {
  // ids: 0 "a", 1 "b", 2 "</think>" (added), 3 "<eos>" (added, stop)
  auto vocab = grammar::TokenIndex::FromTokens({"a", "b", "</think>", "<eos>"}, {2, 3}, {3}, 4);
  ASSERT_TRUE(vocab.ok());
  grammar::ConstraintCache cache;
  auto bound = cache.Get({grammar::ConstraintSpec::Kind::kRegex, "ab", {}, {}}, *vocab);
  ASSERT_TRUE(bound.ok());
  GrammarLogitsMask m(*bound, /*start_after_token=*/2);
  TokenBitmask bits(4);
  bool all = false;
  ASSERT_TRUE(m.FillAllowed(&bits, &all).ok());
  EXPECT_TRUE(all);  // reasoning is free
  ASSERT_TRUE(m.Accept(1).ok());
  ASSERT_TRUE(m.Accept(2).ok());  // </think>: the constraint starts
  ASSERT_TRUE(m.FillAllowed(&bits, &all).ok());
  EXPECT_FALSE(all);
  EXPECT_TRUE(bits.allowed(0));
  EXPECT_FALSE(bits.allowed(1));
  EXPECT_FALSE(bits.allowed(2));
  EXPECT_FALSE(bits.allowed(3));
  ASSERT_TRUE(m.Accept(0).ok());
  EXPECT_FALSE(m.Accept(0).ok());  // "aa" is not a prefix of "ab"
  ASSERT_TRUE(m.Accept(1).ok());
  ASSERT_TRUE(m.FillAllowed(&bits, &all).ok());
  EXPECT_EQ(bits.CountAllowed(), 1);
  EXPECT_TRUE(bits.allowed(3));
  ASSERT_TRUE(m.Rollback(3).ok());  // back before </think>
  ASSERT_TRUE(m.FillAllowed(&bits, &all).ok());
  EXPECT_TRUE(all);
  ASSERT_TRUE(m.Accept(2).ok());
  ASSERT_TRUE(m.Accept(0).ok());
  ASSERT_TRUE(m.Accept(1).ok());
  ASSERT_TRUE(m.Accept(3).ok());
  EXPECT_TRUE(m.Terminated());
}

}  // namespace
}  // namespace deepinfer::sampling
