#include "router/planner.h"

#include <gtest/gtest.h>

#include "router/placement.h"
#include "router/recent_mix.h"

namespace deepinfer::router {
namespace {

PlannerOptions PlanOptions(int64_t total_units) {
  PlannerOptions o;
  o.step_cost = {0.01, 0.001, 0, 0, 0};  // 10 ms a step, 1 ms a token
  o.chunk_tokens = 512;
  o.max_num_seqs = 64;
  o.tbt_slo_s = 0.05;
  o.total_units = total_units;
  return o;
}

TEST(Planner, SplitsUnitsInProportionToEachPoolsLoad) {
  // 10 requests in 10 s, each a 1024-token prompt (none cached) and 101 output tokens.
  std::vector<MixRequest> mix(10, MixRequest{1024, 0, 101});
  auto plan = PlanPrefillDecode(mix, 10, PlanOptions(10));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // Decode batch: 10 ms + 1 ms × B <= 50 ms → B = 40.
  EXPECT_EQ(plan->decode_batch, 40);
  // Prefill: 2 chunks × (10 ms + 512 ms) = 1.044 s a request → 10.44 s / 10 s = 1.044 units.
  EXPECT_NEAR(plan->prefill_load, 1.044, 1e-9);
  // Decode: 100 tokens × (10 ms / 40 + 1 ms) = 0.125 s a request → 0.125 units.
  EXPECT_NEAR(plan->decode_load, 0.125, 1e-9);
  // 10 units × 1.044 / 1.169 = 8.93 → 9 prefill, 1 decode.
  EXPECT_EQ(plan->prefill_units, 9);
  EXPECT_EQ(plan->decode_units, 1);
  EXPECT_TRUE(plan->tbt_feasible);
}

TEST(Planner, CachedPrefixesShiftUnitsToDecode) {
  // Half of each prompt in the store: one chunk of 512 at position 512 → 0.522 s a request.
  std::vector<MixRequest> mix(10, MixRequest{1024, 512, 101});
  auto plan = PlanPrefillDecode(mix, 10, PlanOptions(10));
  ASSERT_TRUE(plan.ok());
  EXPECT_NEAR(plan->prefill_load, 0.522, 1e-9);
  // 10 × 0.522 / 0.647 = 8.07 → 8:2.
  EXPECT_EQ(plan->prefill_units, 8);
  EXPECT_EQ(plan->decode_units, 2);
  // Without a unit count: each pool's load rounded up.
  auto sized = PlanPrefillDecode(mix, 10, PlanOptions(0));
  ASSERT_TRUE(sized.ok());
  EXPECT_EQ(sized->prefill_units, 1);
  EXPECT_EQ(sized->decode_units, 1);
}

TEST(Planner, KeepsOneUnitInEachPoolAndReportsAnInfeasibleSlo) {
  // Decode-heavy: 1-token prompts, long outputs; a TBT SLO below one sequence's 11 ms step.
  std::vector<MixRequest> mix(10, MixRequest{1, 0, 1000});
  PlannerOptions o = PlanOptions(4);
  o.tbt_slo_s = 0.005;
  auto plan = PlanPrefillDecode(mix, 10, o);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->tbt_feasible);
  EXPECT_EQ(plan->decode_batch, 1);
  EXPECT_EQ(plan->prefill_units, 1);
  EXPECT_EQ(plan->decode_units, 3);
}

TEST(Planner, RejectsBadInput) {
  std::vector<MixRequest> mix(1, MixRequest{10, 0, 10});
  EXPECT_FALSE(PlanPrefillDecode({}, 10, PlanOptions(4)).ok());
  EXPECT_FALSE(PlanPrefillDecode(mix, 0, PlanOptions(4)).ok());
  EXPECT_FALSE(PlanPrefillDecode(mix, 10, PlanOptions(1)).ok());
  EXPECT_FALSE(PlanPrefillDecode({MixRequest{10, 10, 1}}, 10, PlanOptions(4)).ok());
}

TEST(Planner, SwitchesOneUnitOfTheOverProvisionedPoolAtATime) {
  PdPlan plan;
  plan.prefill_units = 3;
  plan.decode_units = 1;
  using R = UnitRole;
  // 1 prefill : 3 decode, 3 : 1 recommended: the idlest decode unit (index 2) becomes a prefill unit.
  std::vector<UnitRoleState> units = {{R::kPrefill, false, 0}, {R::kDecode, false, 4}, {R::kDecode, false, 1},
                                      {R::kDecode, false, 3}};
  auto next = NextRoleSwitch(units, plan);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->unit, 2u);
  EXPECT_EQ(next->to, R::kPrefill);
  // While it drains, nothing else moves.
  units[2].draining = true;
  EXPECT_FALSE(NextRoleSwitch(units, plan).has_value());
  // Switched: 2 : 2, one more to go.
  units[2] = {R::kPrefill, false, 0};
  next = NextRoleSwitch(units, plan);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->unit, 3u);
  units[3] = {R::kPrefill, false, 0};
  EXPECT_FALSE(NextRoleSwitch(units, plan).has_value());  // 3 : 1 as recommended
  // The other way: too many prefill units for 1 : 3.
  plan.prefill_units = 1;
  plan.decode_units = 3;
  next = NextRoleSwitch(units, plan);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->to, R::kDecode);
  EXPECT_EQ(units[next->unit].role, R::kPrefill);
  // A unit of both roles, or a plan for another number of units: no split to apply.
  units[0].role = R::kBoth;
  EXPECT_FALSE(NextRoleSwitch(units, plan).has_value());
  units[0].role = R::kPrefill;
  plan.decode_units = 5;
  EXPECT_FALSE(NextRoleSwitch(units, plan).has_value());
}

TEST(Planner, TheRecentMixKeepsTheNewestRequestsOfItsWindow) {
  RecentMix recent(/*max_requests=*/3, /*window_ms=*/15'000);
  EXPECT_TRUE(recent.Mix(50'000).requests.empty());
  recent.Add(30'000, 100, 10);  // pushed out by the fourth
  recent.Add(38'000, 0, 0);     // counted as one token each
  recent.Add(44'000, 300, 30);
  recent.Add(46'000, 400, 40);
  TraceMix mix = recent.Mix(50'000);
  ASSERT_EQ(mix.requests.size(), 3u);
  EXPECT_EQ(mix.requests[0].prompt_tokens, 1);
  EXPECT_EQ(mix.requests[0].output_tokens, 1);
  EXPECT_EQ(mix.requests[2].prompt_tokens, 400);
  EXPECT_EQ(mix.duration_s, 12);  // from 38 s to 50 s
  // Later: only the requests of the last 15 s; a span under a second counts as one.
  mix = recent.Mix(54'500);
  ASSERT_EQ(mix.requests.size(), 2u);
  EXPECT_EQ(mix.duration_s, 10.5);
  recent.Add(54'500, 5, 5);
  EXPECT_EQ(recent.Mix(65'000).duration_s, 10.5);
  EXPECT_EQ(recent.Mix(58'000).requests.size(), 3u);  // 44 s, 46 s and 54.5 s
  RecentMix one(4, 1000);
  one.Add(1000, 5, 5);
  EXPECT_EQ(one.Mix(1200).duration_s, 1);
}

}  // namespace
}  // namespace deepinfer::router

namespace deepinfer::router {
namespace {

TEST(Planner, PlansWithTheCalibratedUnitsMeanCost) {
  std::vector<UnitLease> units(3);
  units[0].load.calibrated = true;
  units[0].load.step_cost = {0.01, 0.001, 0, 0, 0};
  units[1].load.calibrated = true;
  units[1].load.step_cost = {0.03, 0.003, 0, 0, 0};
  units[2].load.step_cost = {9, 9, 9, 9, 9};  // not calibrated: left out
  int64_t calibrated = 0;
  const auto cost = PlanningStepCost(units, &calibrated);
  EXPECT_EQ(calibrated, 2);
  EXPECT_NEAR(cost[0], 0.02, 1e-12);
  EXPECT_NEAR(cost[1], 0.002, 1e-12);
  EXPECT_EQ(PlanningStepCost({}, nullptr), kDefaultStepCost);
}

TEST(Planner, ATracesMixCachesWhatEarlierPromptsComputed) {
  Trace t;
  t.requests = {{0, 1024, 5, {1, 2}}, {4, 1100, 7, {1, 2, 3}}};
  const TraceMix mix = MixOfTrace(t);
  EXPECT_EQ(mix.duration_s, 4);
  ASSERT_EQ(mix.requests.size(), 2u);
  EXPECT_EQ(mix.requests[0].cached_tokens, 0);
  EXPECT_EQ(mix.requests[1].cached_tokens, 1024);  // blocks 1 and 2, 512 tokens each
  EXPECT_EQ(mix.requests[1].output_tokens, 7);
}

}  // namespace
}  // namespace deepinfer::router
