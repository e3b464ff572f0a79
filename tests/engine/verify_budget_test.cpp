// Scheduled verification's budget table on a known machine: each step's cost and predicted tokens are set
// by the test, so the budget with the most tokens per second, and what its probes lose, are derived by hand.
#include "engine/verify_budget.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace deepinfer::engine {
namespace {

// Runs `steps` decisions for `decoders` outputs on a machine whose step with budget b costs seconds(b).
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

// How often each budget was chosen from decision `from` on.
std::map<int, int> Counts(const std::vector<int>& chosen, size_t from) {
  std::map<int, int> n;
  for (size_t i = from; i < chosen.size(); ++i) ++n[chosen[i]];
  return n;
}

constexpr int kExplore = 4 * VerifyBudgets::kExploreSamples;  // every budget of K = 3, kExploreSamples times

TEST(VerifyBudgets, ClassesDoubleInBatchSize) {
  EXPECT_EQ(VerifyBudgets::ClassOf(1), 0);
  EXPECT_EQ(VerifyBudgets::ClassOf(2), 1);
  EXPECT_EQ(VerifyBudgets::ClassOf(3), 1);
  EXPECT_EQ(VerifyBudgets::ClassOf(4), 2);
  EXPECT_EQ(VerifyBudgets::ClassOf(63), 5);
  EXPECT_EQ(VerifyBudgets::ClassOf(64), 6);
  EXPECT_EQ(VerifyBudgets::ClassOf(1 << 20), VerifyBudgets::kClasses - 1);
}

TEST(VerifyBudgets, MeasuresEveryBudgetRoundRobinFullBlockFirst) {
  VerifyBudgets t(3);
  const std::vector<int> chosen = Decide(&t, 4, {4, 6, 7, 8}, [](int b) { return 1.0 + b; }, kExplore);
  // Fewest samples first; among equals the full block (3), then 0, 1, 2.
  EXPECT_EQ(chosen, (std::vector<int>{3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2}));
  EXPECT_EQ(t.CostSeconds(4, 2), 3.0);
  EXPECT_EQ(t.CostSeconds(5, 2), 3.0);  // the same class (4-7)
  EXPECT_EQ(t.CostSeconds(8, 2), 0.0);  // another, unmeasured
}

TEST(VerifyBudgets, AClassBeingMeasuredTakesTheNearestMeasuredClasssChoiceMeanwhile) {
  // One output: rates 100, 145, 158.6, 155 tokens/s (10 ms + 2 ms per verified token), budget 2. Two
  // outputs (the next class) then explore on every fourth decision only: the full block, plain decoding,
  // budget 1 (budget 2, the one output's choice, is measured by the decisions between).
  VerifyBudgets t(3);
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  auto seconds = [](int b) { return 0.010 + 0.002 * b; };
  Decide(&t, 1, expected, seconds, kExplore);
  const std::vector<double> expected2 = {2, 2 * 1.74, 2 * 2.22, 2 * 2.48};
  const std::vector<int> chosen = Decide(&t, 2, expected2, [](int b) { return 0.012 + 0.004 * b; }, 12);
  EXPECT_EQ(chosen, (std::vector<int>{3, 2, 2, 2, 0, 2, 2, 2, 1, 2, 2, 2}));
}

TEST(VerifyBudgets, ChoosesTheMostTokensPerSecond) {
  // One output: 0.74, 0.48, 0.26 survive (expected 1, 1.74, 2.22, 2.48 tokens); a step costs 10 ms plus
  // 2 ms per verified token: rates 100, 145, 158.6, 155 tokens/s, so budget 2. The closest other budget
  // (3) loses 2.3% of a step, which its credit (0.4% / 3 a decision) covers only at the 18th decision.
  VerifyBudgets t(3);
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  const std::vector<int> chosen = Decide(&t, 1, expected, [](int b) { return 0.010 + 0.002 * b; }, kExplore + 16);
  for (size_t i = kExplore; i < chosen.size(); ++i) EXPECT_EQ(chosen[i], 2) << "step " << i;
}

TEST(VerifyBudgets, FallsBackToPlainDecodingWhenNoBudgetGains) {
  // 64 outputs on a compute-bound machine: a verified token costs as much as a decoded one (1 ms each, no
  // fixed part), so tokens per second is 1000 × expected / (64 + 64 b) = 1000 × 64 × {1, 1.74, 2.22,
  // 2.48} / {64, 128, 192, 256} = 1000, 870, 740, 620 for budgets 0..3: plain decoding.
  VerifyBudgets t(3);
  const std::vector<double> expected = {64, 64 * 1.74, 64 * 2.22, 64 * 2.48};
  const std::vector<int> chosen = Decide(&t, 64, expected, [](int b) { return 0.001 * (64 + 64 * b); }, kExplore + 16);
  for (size_t i = kExplore; i < chosen.size(); ++i) EXPECT_EQ(chosen[i], 0) << "step " << i;
}

TEST(VerifyBudgets, AStepIsCostedByTheMedianOfItsRecentSamples) {
  VerifyBudgets t(1);
  // One preempted step (0.5 s) among seven does not move the cost; the ring keeps the last seven.
  for (double s : {0.010, 0.011, 0.5, 0.012, 0.013, 0.014, 0.015}) t.Observe(1, 1, s);
  EXPECT_EQ(t.CostSeconds(1, 1), 0.013);  // sorted: 10, 11, 12, 13, 14, 15, 500 ms
  t.Observe(1, 1, 0.016);                 // 0.010 drops out: 11, 12, 13, 14, 15, 16, 500 ms
  EXPECT_EQ(t.CostSeconds(1, 1), 0.014);
}

TEST(VerifyBudgets, VerificationMustBeatPlainDecodingByTheMargin) {
  // Rates: plain decoding 1 / 0.010 = 100 tokens/s; budgets 1..3: 1.74 / 0.0171 = 101.75, 2.22 / 0.0218 =
  // 101.83, 2.48 / 0.0243 = 102.06, the best 2.06% above plain decoding: under a 4% margin (plain decoding
  // stays) and over a 1% one (the full block). Budgets predicted to lose nothing are probed every
  // kProbeGap decisions at most.
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  auto seconds = [](int b) { return b == 0 ? 0.010 : b == 1 ? 0.0171 : b == 2 ? 0.0218 : 0.0243; };
  VerifyBudgets wide(3), narrow(3);
  const int steps = kExplore + 40;
  const std::map<int, int> a = Counts(Decide(&wide, 1, expected, seconds, steps, 0.04), kExplore);
  const std::map<int, int> b = Counts(Decide(&narrow, 1, expected, seconds, steps, 0.01), kExplore);
  EXPECT_GE(a.at(0), 40 * (VerifyBudgets::kProbeGap - 1) / VerifyBudgets::kProbeGap);
  EXPECT_GE(b.at(3), 40 * (VerifyBudgets::kProbeGap - 1) / VerifyBudgets::kProbeGap);
}

TEST(VerifyBudgets, ATrimmedBudgetMustBeatTheFullBlockByTheMargin) {
  // Rates: budget 2 gives 2.22 / 0.0148 = 150 tokens/s, the full block 2.48 / 0.0168 = 147.6: 1.6% better,
  // under a 4% margin (the full block stays) and over a 1% one.
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  auto seconds = [](int b) { return b == 0 ? 0.0125 : b == 1 ? 0.0135 : b == 2 ? 0.0148 : 0.0168; };
  VerifyBudgets wide(3), narrow(3);
  const int steps = kExplore + 40;
  const std::map<int, int> a = Counts(Decide(&wide, 1, expected, seconds, steps, 0.04), kExplore);
  const std::map<int, int> b = Counts(Decide(&narrow, 1, expected, seconds, steps, 0.01), kExplore);
  EXPECT_GE(a.at(3), 40 * (VerifyBudgets::kProbeGap - 1) / VerifyBudgets::kProbeGap);
  EXPECT_GE(b.at(2), 40 * (VerifyBudgets::kProbeGap - 1) / VerifyBudgets::kProbeGap);
}

TEST(VerifyBudgets, ProbesLoseAtMostTheirShareOfTheTokens) {
  // Rates 100, 145, 158.6, 155 tokens/s (10 ms + 2 ms per verified token): budget 2 is the best; a probe of
  // b loses 1 - rate(b) / 158.6 of a step's tokens: 0.369, 0.086 and 0.023 for budgets 0, 1, 3. Each
  // decision adds kProbeShare / 3 to each one's credit, so over 3,000 decisions each earns 4 steps' worth:
  // about 10 probes of 0, 46 of 1 and 175 of 3 (one at most every kProbeGap decisions), and all the
  // probes together lose at most kProbeShare of the 3,000 steps, 12 steps' tokens.
  VerifyBudgets t(3);
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  auto seconds = [](int b) { return 0.010 + 0.002 * b; };
  const int steps = 3000;
  const std::vector<int> chosen = Decide(&t, 1, expected, seconds, kExplore + steps);
  const std::map<int, int> n = Counts(chosen, kExplore);
  const double rate[] = {100, 145, 2.22 / 0.014, 2.48 / 0.016};
  double lost = 0;
  for (const auto& [b, count] : n) lost += count * (1 - rate[b] / rate[2]);
  EXPECT_LE(lost, VerifyBudgets::kProbeShare * steps + 1);
  // Every other budget is measured again, the cheapest to probe most often.
  EXPECT_GE(n.at(0), 5);
  EXPECT_GT(n.at(1), n.at(0));
  EXPECT_GT(n.at(3), n.at(1));
  EXPECT_GT(n.at(2), steps * 9 / 10);
}

TEST(VerifyBudgets, FollowsVerifyTokensThatBecomeExpensive) {
  VerifyBudgets t(3);
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  // First every verified token is nearly free (rates 100, 172, 218, 241 tokens/s: the full block), then
  // each costs as much as the step (10 ms; rates 100, 87, 74, 62: plain decoding). The budget in use is
  // measured at every step: its median moves after four new samples, and the choice steps down.
  std::vector<int> chosen = Decide(&t, 1, expected, [](int b) { return 0.010 + 0.0001 * b; }, kExplore + 20);
  EXPECT_EQ(chosen.back(), 3);
  chosen = Decide(&t, 1, expected, [](int b) { return 0.010 * (1 + b); }, 40);
  EXPECT_EQ(chosen.back(), 0);
}

TEST(VerifyBudgets, ABudgetFoundCheaperThanItsTableIsMeasuredAgainAtOnce) {
  // Budget 1 is measured at 20 ms (rate 87 tokens/s against plain decoding's 100: it loses 13% of a step,
  // credit for one probe 0.13 / kProbeShare = 33 decisions after the exploration, 14 of them in the first
  // part). Then it costs 10 ms (rate 174): its first probe finds it under 0.9 × its median, so it is probed
  // again (unpaid) kProbeGap decisions later, and so on until its median follows (three new samples against
  // three old ones: 15 ms, rate 116) and it is chosen.
  VerifyBudgets t(1);
  const std::vector<double> expected = {1, 1.74};
  std::vector<int> chosen = Decide(&t, 1, expected, [](int b) { return b == 0 ? 0.010 : 0.020; }, 20);
  EXPECT_EQ(chosen.back(), 0);
  chosen = Decide(&t, 1, expected, [](int) { return 0.010; }, 33 + 4 * VerifyBudgets::kProbeGap + 1);
  EXPECT_EQ(chosen.back(), 1);
}

}  // namespace
}  // namespace deepinfer::engine
