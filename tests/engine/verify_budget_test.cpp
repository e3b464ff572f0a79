// Scheduled verification's budget table on a known machine: each step's time and predicted tokens are set
// by the test, so the budget with the most tokens per second is derived by hand.
#include "engine/verify_budget.h"

#include <gtest/gtest.h>

#include <vector>

namespace deepinfer::engine {
namespace {

// Runs `steps` decisions for `decoders` outputs on a machine whose step with budget b takes seconds(b).
template <typename Seconds>
std::vector<int> Decide(VerifyBudgets* t, int64_t decoders, const std::vector<double>& expected, Seconds seconds,
                     int steps, double min_gain = 0) {
  std::vector<int> chosen;
  for (int i = 0; i < steps; ++i) {
    const int b = t->Choose(decoders, expected, min_gain);
    chosen.push_back(b);
    t->Observe(decoders, b, seconds(b));
  }
  return chosen;
}

TEST(VerifyBudgets, ClassesDoubleInBatchSize) {
  EXPECT_EQ(VerifyBudgets::ClassOf(1), 0);
  EXPECT_EQ(VerifyBudgets::ClassOf(2), 1);
  EXPECT_EQ(VerifyBudgets::ClassOf(3), 1);
  EXPECT_EQ(VerifyBudgets::ClassOf(4), 2);
  EXPECT_EQ(VerifyBudgets::ClassOf(63), 5);
  EXPECT_EQ(VerifyBudgets::ClassOf(64), 6);
  EXPECT_EQ(VerifyBudgets::ClassOf(1 << 20), VerifyBudgets::kClasses - 1);
}

TEST(VerifyBudgets, MeasuresEveryBudgetTwiceRoundRobinFullBlockFirst) {
  VerifyBudgets t(3);
  const std::vector<int> chosen = Decide(&t, 4, {4, 6, 7, 8}, [](int b) { return 1.0 + b; }, 8);
  // Fewest samples first; among equals the full block (3), then 0, 1, 2.
  EXPECT_EQ(chosen, (std::vector<int>{3, 0, 1, 2, 3, 0, 1, 2}));
  EXPECT_EQ(t.FastestSeconds(4, 2), 3.0);
  EXPECT_EQ(t.FastestSeconds(5, 2), 3.0);   // the same class (4-7)
  EXPECT_EQ(t.FastestSeconds(8, 2), 0.0);   // another, unmeasured
}

TEST(VerifyBudgets, ChoosesTheMostTokensPerSecond) {
  // One output: 0.74, 0.48, 0.26 survive (expected 1, 1.74, 2.22, 2.48 tokens); a step costs 10 ms plus
  // 2 ms per verified token: rates 100, 145, 158.6, 155 tokens/s, so budget 2.
  VerifyBudgets t(3);
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  const std::vector<int> chosen = Decide(&t, 1, expected, [](int b) { return 0.010 + 0.002 * b; }, 8 + 7);
  for (size_t i = 8; i < chosen.size(); ++i) EXPECT_EQ(chosen[i], 2) << "step " << i;
}

TEST(VerifyBudgets, FallsBackToPlainDecodingWhenNoBudgetGains) {
  // 64 outputs on a compute-bound machine: a verified token costs as much as a decoded one (1 ms each, no
  // fixed part), so tokens per second is 1000 × expected / (64 + 64 b) = 1000 × 64 × {1, 1.74, 2.22,
  // 2.48} / {64, 128, 192, 256} = 1000, 870, 740, 620 for budgets 0..3: plain decoding.
  VerifyBudgets t(3);
  const std::vector<double> expected = {64, 64 * 1.74, 64 * 2.22, 64 * 2.48};
  const std::vector<int> chosen = Decide(&t, 64, expected, [](int b) { return 0.001 * (64 + 64 * b); }, 8 + 7);
  for (size_t i = 8; i < chosen.size(); ++i) EXPECT_EQ(chosen[i], 0) << "step " << i;
}

TEST(VerifyBudgets, VerificationMustBeatPlainDecodingByTheMargin) {
  // Rates: plain decoding 1 / 0.010 = 100 tokens/s; budgets 1..3: 1.74 / 0.0171 = 101.75, 2.22 / 0.0218 =
  // 101.83, 2.48 / 0.0243 = 102.06, the best 2.06% above plain decoding: under a 4% margin (plain decoding
  // stays) and over a 1% one (the full block).
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  auto seconds = [](int b) { return b == 0 ? 0.010 : b == 1 ? 0.0171 : b == 2 ? 0.0218 : 0.0243; };
  VerifyBudgets wide(3), narrow(3);
  const std::vector<int> a = Decide(&wide, 1, expected, seconds, 8 + 7, 0.04);
  const std::vector<int> b = Decide(&narrow, 1, expected, seconds, 8 + 7, 0.01);
  for (size_t i = 8; i < a.size(); ++i) {
    if (i % VerifyBudgets::kProbeEvery == VerifyBudgets::kProbeEvery - 1) continue;  // a probe
    EXPECT_EQ(a[i], 0) << "step " << i;
    EXPECT_EQ(b[i], 3) << "step " << i;
  }
}

TEST(VerifyBudgets, ATrimmedBudgetMustBeatTheFullBlockByTheMargin) {
  // Rates: budget 2 gives 2.22 / 0.0148 = 150 tokens/s, the full block 2.48 / 0.0168 = 147.6: 1.6% better,
  // under a 4% margin (the full block stays) and over a 1% one.
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  auto seconds = [](int b) { return b == 0 ? 0.0125 : b == 1 ? 0.0135 : b == 2 ? 0.0148 : 0.0168; };
  VerifyBudgets wide(3), narrow(3);
  const std::vector<int> a = Decide(&wide, 1, expected, seconds, 8 + 7, 0.04);
  const std::vector<int> b = Decide(&narrow, 1, expected, seconds, 8 + 7, 0.01);
  EXPECT_EQ(a.back(), 3);
  EXPECT_EQ(b.back(), 2);
}

TEST(VerifyBudgets, ProbesTheBestsNeighboursAndFollowsAChangedMachine) {
  VerifyBudgets t(3);
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  // First every verified token is nearly free (budget 3 wins), then compute-bound (plain decoding wins).
  // Rates 100, 172, 218, 241 tokens/s.
  std::vector<int> chosen = Decide(&t, 1, expected, [](int b) { return 0.010 + 0.0001 * b; }, 41);
  EXPECT_EQ(chosen.back(), 3);
  // Every kProbeEvery-th decision measures another budget: a neighbour of the best, alternately above and
  // below (only 2 exists: decisions 23 and 39), and every fourth time the one measured longest ago
  // (decision 31: plain decoding, last measured in the sixth decision).
  int probes = 0;
  for (size_t i = 8; i < chosen.size(); ++i) probes += chosen[i] != 3;
  EXPECT_EQ(probes, 3);
  EXPECT_EQ(chosen[31], 0);
  // Rates 1000, 870, 740, 620: each budget's fastest step moves with its first new sample, and the probes
  // walk the choice down to plain decoding.
  chosen = Decide(&t, 1, expected, [](int b) { return 0.001 * (1 + b); }, 400);
  EXPECT_EQ(chosen.back(), 0);
}

TEST(VerifyBudgets, TheFastestRecentStepIgnoresSlowOnesAndForgetsOldOnes) {
  VerifyBudgets t(1);
  for (double s : {0.010, 0.011, 0.5, 0.012, 0.013}) t.Observe(1, 1, s);
  EXPECT_EQ(t.FastestSeconds(1, 1), 0.010);
  // The ring keeps the last five: 0.010 drops out once a sixth arrives.
  t.Observe(1, 1, 0.014);
  EXPECT_EQ(t.FastestSeconds(1, 1), 0.011);
}

}  // namespace
}  // namespace deepinfer::engine
