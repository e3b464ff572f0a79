#include "router/placement.h"

#include <gtest/gtest.h>

namespace deepinfer::router {
namespace {

// Step cost: 1 ms per step, 0.1 ms per token, nothing else: easy to work out by hand.
PlacementLoad Unit(int64_t running, int64_t queued) {
  PlacementLoad l;
  l.published.running = running;
  l.published.queued_prefill_tokens = queued;
  l.published.step_cost = {1e-3, 1e-4, 0, 0, 0};
  l.published.calibrated = true;
  return l;
}

TEST(Placement, PredictsFromTheStepCostModel) {
  // 2 decodes, 1024 queued tokens (2 chunks of 512), a 100-token prompt (1 chunk):
  // ahead: 2 steps × (1 ms + 0.1 ms × (2 + 512)) = 2 × 52.4 ms; own: 1 ms + 0.1 ms × (2 + 100) = 11.2 ms.
  const Prediction p = Predict(Unit(2, 1024), 100);
  EXPECT_NEAR(p.ttft_s, 2 * 0.0524 + 0.0112, 1e-9);
  // One decode step with the new request in the batch: 1 ms + 0.1 ms × 3.
  EXPECT_NEAR(p.tbt_s, 0.0013, 1e-9);
}

TEST(Placement, CountsWhatTheRouterPlacedBeyondThePublishedLoad) {
  PlacementLoad l = Unit(0, 0);
  l.placed_prefill_tokens = 512;
  l.placed_streams = 4;
  // ahead: 1 step × (1 ms + 0.1 ms × (4 + 512)); own: 1 ms + 0.1 ms × (4 + 10).
  EXPECT_NEAR(Predict(l, 10).ttft_s, 0.0526 + 0.0024, 1e-9);
}

TEST(Placement, PicksTheLeastTtftWithinTheTbtBudget) {
  std::vector<PlacementLoad> units = {Unit(0, 4096), Unit(0, 0), Unit(40, 0)};
  PlacementDecision d = Place(units, 100, {});
  ASSERT_EQ(d.order.size(), 3u);
  // Unit 1 is idle; unit 2 (40 decodes: 1 ms + 4 ms + 10 ms own) beats unit 0 (8 queued chunks of 52 ms).
  EXPECT_EQ(d.order, (std::vector<int>{1, 2, 0}));
  // A TBT budget of 2 ms: unit 2's next step (1 ms + 0.1 ms × 41 = 5.1 ms) is over it, so it goes last.
  units[1].usable = false;
  d = Place(units, 100, {.ttft_s = 0, .tbt_s = 0.002});
  EXPECT_EQ(d.order, (std::vector<int>{0, 2}));
}

TEST(Placement, RefusesWhenNoUnitMeetsTheSloAndSaysWhenToRetry) {
  std::vector<PlacementLoad> units = {Unit(0, 51200), Unit(0, 102400)};
  // Unit 0: 100 chunks × 52.2 ms ahead + 11 ms own ≈ 5.23 s; an SLO of 1 s is missed by ≈ 4.23 s.
  const PlacementDecision d = Place(units, 100, {.ttft_s = 1.0, .tbt_s = 0});
  EXPECT_TRUE(d.order.empty());
  EXPECT_NEAR(d.retry_after_s, 100 * 0.0522 + 0.011 - 1.0, 1e-6);
  // No usable unit at all: refused with nothing to wait for (the router answers 503, not 429).
  units[0].usable = units[1].usable = false;
  const PlacementDecision none = Place(units, 100, {});
  EXPECT_TRUE(none.order.empty());
  EXPECT_EQ(none.retry_after_s, 0);
}

TEST(Placement, UncalibratedUnitsUseTheDefaultCost) {
  PlacementLoad l;
  EXPECT_NEAR(Predict(l, 1).tbt_s, kDefaultStepCost[0] + kDefaultStepCost[1] + kDefaultStepCost[2] +
                                       kDefaultStepCost[3] * 1 + kDefaultStepCost[4], 1e-12);
}

}  // namespace
}  // namespace deepinfer::router
