// From OutputConstraint to masks: scripts are ready at once, grammars compile on the compile threads (which
// then call on_ready), each output gets a mask of its own, compile errors and a missing compiler come back
// as the request's error, and a compiler shared with the validating side compiles each grammar once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "sampling/constraint_masks.h"

namespace deepinfer::sampling {
namespace {

// ids: 0 "a", 1 "b", 2 "</think>" (added), 3 "<eos>" (added, stop)
std::shared_ptr<ConstraintCompiler> Compiler() {
  auto vocab = grammar::TokenIndex::FromTokens({"a", "b", "</think>", "<eos>"}, {2, 3}, {3}, 4);
  EXPECT_TRUE(vocab.ok());
  return std::make_shared<ConstraintCompiler>(*vocab);
}

void WaitReady(const PreparedConstraint& p, const std::atomic<int>& calls, int want) {
  for (int i = 0; i < 5000 && (!p.ready() || calls.load() < want); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(p.ready());
  ASSERT_EQ(calls.load(), want);
}

TEST(ConstraintMasks, NoConstraintIsNoMask) {
  ConstraintMasks masks(Compiler());
  EXPECT_EQ(masks.Prepare(OutputConstraint{}, nullptr), nullptr);
}

TEST(ConstraintMasks, ScriptsAreReadyAtOnceWithAMaskPerOutput) {
  ConstraintMasks masks(nullptr);
  OutputConstraint c;
  c.scripted_tokens = std::vector<int32_t>{1, 0};
  std::atomic<int> calls{0};
  auto p = masks.Prepare(c, [&] { ++calls; });
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(p->ready());
  auto made = p->MakeMasks(2);
  ASSERT_TRUE(made.ok());
  ASSERT_EQ(made->size(), 2u);
  TokenBitmask bits(4);
  bool all = true;
  // Output 0 advancing leaves output 1 where it was.
  ASSERT_TRUE((*made)[0]->Accept(1).ok());
  ASSERT_TRUE((*made)[0]->FillAllowed(&bits, &all).ok());
  EXPECT_TRUE(bits.allowed(0));
  ASSERT_TRUE((*made)[1]->FillAllowed(&bits, &all).ok());
  EXPECT_FALSE(all);
  EXPECT_TRUE(bits.allowed(1));
  EXPECT_EQ(bits.CountAllowed(), 1);
  EXPECT_EQ(calls.load(), 0);
}

TEST(ConstraintMasks, GrammarsCompileOnTheCompileThreadsAndThenCallOnReady) {
  auto compiler = Compiler();
  ConstraintMasks masks(compiler);
  OutputConstraint c;
  c.grammar = grammar::ConstraintSpec{grammar::ConstraintSpec::Kind::kRegex, "ab", {}, {}};
  c.grammar_start_after_token = 2;
  std::atomic<int> calls{0};
  std::thread::id compiled_on;
  auto p = masks.Prepare(c, [&] {
    compiled_on = std::this_thread::get_id();
    ++calls;
  });
  ASSERT_NE(p, nullptr);
  WaitReady(*p, calls, 1);
  EXPECT_NE(compiled_on, std::this_thread::get_id());
  auto made = p->MakeMasks(1);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  LogitsMask& m = *(*made)[0];
  TokenBitmask bits(4);
  bool all = false;
  ASSERT_TRUE(m.FillAllowed(&bits, &all).ok());
  EXPECT_TRUE(all);  // free until </think>
  ASSERT_TRUE(m.Accept(2).ok());
  ASSERT_TRUE(m.FillAllowed(&bits, &all).ok());
  EXPECT_FALSE(all);
  EXPECT_TRUE(bits.allowed(0));
  EXPECT_EQ(bits.CountAllowed(), 1);

  // The same spec again: a cache hit, still through the compile threads.
  const size_t hits = compiler->hits();
  auto again = masks.Prepare(c, [&] { ++calls; });
  WaitReady(*again, calls, 2);
  EXPECT_EQ(compiler->hits(), hits + 1);
  EXPECT_EQ(compiler->cached(), 1u);
}

TEST(ConstraintMasks, CompileErrorsAndAMissingCompilerAreTheRequestsError) {
  ConstraintMasks masks(Compiler());
  OutputConstraint c;
  c.grammar = grammar::ConstraintSpec{grammar::ConstraintSpec::Kind::kRegex, "(a", {}, {}};
  std::atomic<int> calls{0};
  auto p = masks.Prepare(c, [&] { ++calls; });
  WaitReady(*p, calls, 1);
  EXPECT_FALSE(p->MakeMasks(1).ok());

  ConstraintMasks none(nullptr);
  EXPECT_FALSE(none.can_compile());
  auto q = none.Prepare(c, [&] { ++calls; });
  ASSERT_TRUE(q->ready());
  auto made = q->MakeMasks(1);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kFailedPrecondition);
}

TEST(ConstraintMasks, ShuttingDownWithCompilesQueuedIsClean) {
  auto compiler = Compiler();
  std::atomic<int> calls{0};
  std::vector<std::shared_ptr<PreparedConstraint>> prepared;
  {
    ConstraintMasks masks(compiler, 1);
    for (int i = 0; i < 50; ++i) {
      OutputConstraint c;
      c.grammar = grammar::ConstraintSpec{grammar::ConstraintSpec::Kind::kRegex, "a{" + std::to_string(i) + "}", {}, {}};
      prepared.push_back(masks.Prepare(c, [&] { ++calls; }));
    }
  }
  // Each compile that ran called on_ready once; those dropped never became ready.
  int ready = 0;
  for (const auto& p : prepared) ready += p->ready();
  EXPECT_EQ(ready, calls.load());
}

}  // namespace
}  // namespace deepinfer::sampling
