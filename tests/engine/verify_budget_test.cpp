// Scheduled verification's budget costs on a known machine: each step's time and predicted tokens are set
// by the test, so the budget with the most tokens per second is derived by hand.
#include "engine/verify_budget.h"

#include <gtest/gtest.h>

#include <vector>

namespace deepinfer::engine {
namespace {

// Decisions of a class spent on exploration: kExploreSamples probes of each of the K budgets besides the
// full block, each after a reference step, and one more reference step to price the last probe.
constexpr int ExploreSteps(int k) { return 2 * VerifyBudgets::kExploreSamples * k + 1; }
bool ProbeSlot(size_t step) { return step % VerifyBudgets::kProbeEvery == VerifyBudgets::kProbeEvery - 1; }

// Runs `steps` decisions for `decoders` outputs on a machine whose step `i` with budget b takes
// seconds(b, i).
template <typename Seconds>
std::vector<int> Decide(VerifyBudgets* t, int64_t decoders, const std::vector<double>& expected, Seconds seconds,
                        int steps, double min_gain = 0) {
  std::vector<int> chosen;
  for (int i = 0; i < steps; ++i) {
    const int b = t->Choose(decoders, expected, min_gain);
    chosen.push_back(b);
    t->Observe(decoders, b, seconds(b, i));
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

TEST(VerifyBudgets, ProbesEveryBudgetTwiceBetweenFullBlockSteps) {
  VerifyBudgets t(3);
  auto seconds = [](int b, int) { return 1.0 + b; };
  const std::vector<int> chosen = Decide(&t, 4, {4, 6, 7, 8}, seconds, ExploreSteps(3));
  // The full block (3) is the first reference; the others in turn between its steps, plain decoding first.
  EXPECT_EQ(chosen, (std::vector<int>{3, 0, 3, 1, 3, 2, 3, 0, 3, 1, 3, 2, 3}));
  // Each in units of the full block's 4 s: 1/4, 2/4, 3/4.
  EXPECT_EQ(t.Reference(4), 3);
  EXPECT_EQ(t.RelativeSeconds(4, 0), 0.25);
  EXPECT_EQ(t.RelativeSeconds(4, 2), 0.75);
  EXPECT_EQ(t.RelativeSeconds(4, 3), 1.0);
  EXPECT_EQ(t.RelativeSeconds(5, 2), 0.75);  // the same class (4-7)
  EXPECT_EQ(t.RelativeSeconds(8, 2), 0.0);   // another, unpriced
  // Rates 4 / 0.25 = 16, 6 / 0.5 = 12, 7 / 0.75 = 9.3, 8 / 1 = 8: plain decoding becomes the reference, and
  // the others' costs are restated in its 1 s.
  EXPECT_EQ(t.Choose(4, std::vector<double>{4, 6, 7, 8}, 0), 0);
  EXPECT_EQ(t.Reference(4), 0);
  EXPECT_EQ(t.RelativeSeconds(4, 0), 1.0);
  EXPECT_EQ(t.RelativeSeconds(4, 2), 3.0);
  EXPECT_EQ(t.RelativeSeconds(4, 3), 4.0);
}

TEST(VerifyBudgets, AProbeIsPricedByTheReferenceStepsAroundIt) {
  VerifyBudgets t(3);  // the full block is the reference
  // 4 ms between reference steps of 9 and 7 ms: 4 / 8.
  t.Observe(1, 3, 0.009);
  t.Observe(1, 0, 0.004);
  t.Observe(1, 3, 0.007);
  EXPECT_DOUBLE_EQ(t.RelativeSeconds(1, 0), 0.5);
  // The reference steps around this one differ by more than kSteadyLoad (7 and 25 ms: the load moved
  // during the probe): unpriced.
  t.Observe(1, 0, 0.001);
  t.Observe(1, 3, 0.025);
  EXPECT_DOUBLE_EQ(t.RelativeSeconds(1, 0), 0.5);
  t.Observe(1, 3, 0.012);
  // Of two probes in a row only the later is priced: 6 / 12, then 3 / 12.
  t.Observe(1, 0, 0.0001);
  t.Observe(1, 0, 0.006);
  t.Observe(1, 3, 0.012);
  t.Observe(1, 0, 0.003);
  t.Observe(1, 3, 0.012);
  // The median of 0.5, 0.5 and 0.25.
  EXPECT_DOUBLE_EQ(t.RelativeSeconds(1, 0), 0.5);
  t.Observe(1, 0, 0.003);
  t.Observe(1, 3, 0.012);
  // Of 0.5, 0.5, 0.25, 0.25: the mean of the middle two.
  EXPECT_DOUBLE_EQ(t.RelativeSeconds(1, 0), 0.375);
}

TEST(VerifyBudgets, ChoosesTheMostTokensPerSecond) {
  // One output: 0.74, 0.48, 0.26 survive (expected 1, 1.74, 2.22, 2.48 tokens); a step costs 10 ms plus
  // 2 ms per verified token: rates 100, 145, 158.6, 155 tokens/s, so budget 2.
  VerifyBudgets t(3);
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  const std::vector<int> chosen =
      Decide(&t, 1, expected, [](int b, int) { return 0.010 + 0.002 * b; }, ExploreSteps(3) + 40);
  for (size_t i = ExploreSteps(3); i < chosen.size(); ++i) {
    if (!ProbeSlot(i)) {
      EXPECT_EQ(chosen[i], 2) << "step " << i;
    }
  }
  EXPECT_EQ(t.Reference(1), 2);
}

TEST(VerifyBudgets, FallsBackToPlainDecodingWhenNoBudgetGains) {
  // 64 outputs on a compute-bound machine: a verified token costs as much as a decoded one (1 ms each, no
  // fixed part), so tokens per second is 1000 × expected / (64 + 64 b) = 1000 × 64 × {1, 1.74, 2.22,
  // 2.48} / {64, 128, 192, 256} = 1000, 870, 740, 620 for budgets 0..3: plain decoding.
  VerifyBudgets t(3);
  const std::vector<double> expected = {64, 64 * 1.74, 64 * 2.22, 64 * 2.48};
  const std::vector<int> chosen =
      Decide(&t, 64, expected, [](int b, int) { return 0.001 * (64 + 64 * b); }, ExploreSteps(3) + 40);
  for (size_t i = ExploreSteps(3); i < chosen.size(); ++i) {
    if (!ProbeSlot(i)) {
      EXPECT_EQ(chosen[i], 0) << "step " << i;
    }
  }
}

TEST(VerifyBudgets, VerificationMustBeatPlainDecodingByTheMargin) {
  // Rates: plain decoding 1 / 0.010 = 100 tokens/s; budgets 1..3: 1.74 / 0.0171 = 101.75, 2.22 / 0.0218 =
  // 101.83, 2.48 / 0.0243 = 102.06, the best 2.06% above plain decoding: under a 4% margin (plain decoding
  // stays) and over a 1% one (the full block).
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  auto seconds = [](int b, int) { return b == 0 ? 0.010 : b == 1 ? 0.0171 : b == 2 ? 0.0218 : 0.0243; };
  VerifyBudgets wide(3), narrow(3);
  const std::vector<int> a = Decide(&wide, 1, expected, seconds, ExploreSteps(3) + 20, 0.04);
  const std::vector<int> b = Decide(&narrow, 1, expected, seconds, ExploreSteps(3) + 20, 0.01);
  for (size_t i = ExploreSteps(3); i < a.size(); ++i) {
    if (ProbeSlot(i)) continue;
    EXPECT_EQ(a[i], 0) << "step " << i;
    EXPECT_EQ(b[i], 3) << "step " << i;
  }
}

TEST(VerifyBudgets, ATrimmedBudgetMustBeatTheFullBlockByTheMargin) {
  // Rates: budget 2 gives 2.22 / 0.0148 = 150 tokens/s, the full block 2.48 / 0.0168 = 147.6: 1.6% better,
  // under a 4% margin (the full block stays) and over a 1% one.
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  auto seconds = [](int b, int) { return b == 0 ? 0.0125 : b == 1 ? 0.0135 : b == 2 ? 0.0148 : 0.0168; };
  VerifyBudgets wide(3), narrow(3);
  Decide(&wide, 1, expected, seconds, ExploreSteps(3) + 20, 0.04);
  Decide(&narrow, 1, expected, seconds, ExploreSteps(3) + 20, 0.01);
  EXPECT_EQ(wide.Reference(1), 3);
  EXPECT_EQ(narrow.Reference(1), 2);
}

TEST(VerifyBudgets, ALoadThatSwingsDoesNotMoveTheChoice) {
  // A step costs 10 ms plus 6 ms per verified token: rates 1 / 0.010 = 100, 1.74 / 0.016 = 108.75,
  // 2.22 / 0.022 = 100.9, 2.48 / 0.028 = 88.6 tokens/s, so budget 1 (8.75% above plain decoding; the full
  // block gains nothing). The machine's other load slows every step 1.6-fold for 12 steps of every 24. A
  // table of each budget's fastest recent times keeps a rarely measured budget's quiet-moment time against
  // the chosen one's loaded recent ones and leaves budget 1 on about one step in four; priced against the
  // reference steps around them, the probes see the same ratios in either phase.
  VerifyBudgets t(3);
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  auto seconds = [](int b, int i) { return (0.010 + 0.006 * b) * ((i / 12) % 2 ? 1.6 : 1.0); };
  const std::vector<int> chosen = Decide(&t, 1, expected, seconds, 1000, 0.01);
  int off_choice = 0;
  for (size_t i = 100; i < chosen.size(); ++i) off_choice += !ProbeSlot(i) && chosen[i] != 1;
  EXPECT_EQ(off_choice, 0);
}

TEST(VerifyBudgets, ProbesCostAtMostTheirShareOfTheTime) {
  // The compute-bound machine above: budgets 1..3 cost 2, 3, 4 plain steps for 1.74, 2.22, 2.48 plain
  // steps' tokens, so a probe loses 0.26, 0.78 or 1.52 plain steps. Probing every eighth step whatever it
  // costs would lose about 0.5 / 8 of the time; priced, the probes lose at most kProbeShare of the steps'
  // time plus one probe's loss.
  VerifyBudgets t(3);
  const std::vector<double> expected = {64, 64 * 1.74, 64 * 2.22, 64 * 2.48};
  const std::vector<double> loss = {0, 0.26, 0.78, 1.52};
  const int steps = 4000;
  const std::vector<int> chosen =
      Decide(&t, 64, expected, [](int b, int) { return 0.001 * (64 + 64 * b); }, ExploreSteps(3) + steps);
  double lost = 0;
  int probes = 0;
  for (size_t i = ExploreSteps(3); i < chosen.size(); ++i) {
    lost += loss[static_cast<size_t>(chosen[i])];
    probes += chosen[i] != 0;
  }
  EXPECT_LE(lost, VerifyBudgets::kProbeShare * (steps + lost) + 1.52);
  EXPECT_GT(probes, 0);  // still probed
}

TEST(VerifyBudgets, FollowsAChangedMachine) {
  VerifyBudgets t(3);
  const std::vector<double> expected = {1, 1.74, 2.22, 2.48};
  // First every verified token is nearly free (rates 100, 172, 218, 241 tokens/s: the full block), then
  // compute-bound (rates 1000, 870, 740, 620: plain decoding): the neighbours' probes walk the choice down.
  Decide(&t, 1, expected, [](int b, int) { return 0.010 + 0.0001 * b; }, ExploreSteps(3) + 40);
  EXPECT_EQ(t.Reference(1), 3);
  const std::vector<int> chosen = Decide(&t, 1, expected, [](int b, int) { return 0.001 * (1 + b); }, 3000);
  EXPECT_EQ(t.Reference(1), 0);
  EXPECT_EQ(chosen.back(), 0);
}

}  // namespace
}  // namespace deepinfer::engine
