#include "parallel/live_placement.h"

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace deepinfer::parallel {
namespace {

// One layer of 4 experts, 6 physical copies on 2 ranks, expert 0 carrying nearly all the load. By hand:
// replicate gives expert 0 a second copy (100 per copy → 50) and a third (50 → 33.3); packing the copies
// heaviest first onto the lightest rank with room puts 33.3 on rank 0, rank 1, rank 0 (ties to the lower
// rank), then experts 1 and 2 on rank 1 (the lighter) and expert 3 on rank 0 (rank 1 is full).
ExpertPlacement SkewedPlacement() {
  ExpertLoads loads(1, 4);
  loads.at(0, 0) = 100;
  loads.at(0, 1) = loads.at(0, 2) = loads.at(0, 3) = 1;
  auto placed = RebalanceExperts(loads, EplbShape{.replicas = 6, .ranks = 2});
  EXPECT_TRUE(placed.ok()) << placed.status().message();
  return std::move(placed).value();
}

TEST(LivePlacement, RanksHoldTheCopiesTheBalancerPlaced) {
  const ExpertPlacement p = SkewedPlacement();
  EXPECT_EQ(p.logcnt, (std::vector<int64_t>{3, 1, 1, 1}));
  EXPECT_EQ(ExpertsOnRank(p, 0, 0), (std::vector<uint8_t>{1, 0, 0, 1}));
  EXPECT_EQ(ExpertsOnRank(p, 0, 1), (std::vector<uint8_t>{1, 1, 1, 0}));
}

TEST(LivePlacement, AnExpertsPairsAreSplitEvenlyOverItsCopies) {
  const ExpertPlacement p = SkewedPlacement();
  // Six pairs for expert 0 from one sender: two to each copy, and rank 0 holds two of the three copies.
  const std::vector<int32_t> ids = {0, 0, 0, 0, 0, 0, 1, 3};
  for (int sender = 0; sender < 2; ++sender) {
    std::vector<int32_t> ranks(ids.size(), -1);
    AssignPairsToRanks(p, 0, sender, ids, ranks);
    EXPECT_EQ(std::count(ranks.begin(), ranks.begin() + 6, 0), 4) << "sender " << sender;
    EXPECT_EQ(std::count(ranks.begin(), ranks.begin() + 6, 1), 2) << "sender " << sender;
    EXPECT_EQ(ranks[6], 1);  // expert 1 lives on rank 1 only, expert 3 on rank 0 only
    EXPECT_EQ(ranks[7], 0);
  }
  // One pair from each sender: they start on different copies, so two senders' single pairs do not pile onto
  // one copy (sender s's first pair goes to copy s).
  std::vector<int32_t> first(1), second(1);
  AssignPairsToRanks(p, 0, 0, std::vector<int32_t>{0}, first);
  AssignPairsToRanks(p, 0, 1, std::vector<int32_t>{0}, second);
  const int64_t copy0 = p.log2phy[0], copy1 = p.log2phy[1];
  EXPECT_EQ(first[0], p.RankOfPhysical(copy0));
  EXPECT_EQ(second[0], p.RankOfPhysical(copy1));
}

TEST(LivePlacement, APlacementIsSwappedInOnlyWhenItBeatsTheOneInUseByTheMargin) {
  const ExpertPlacement skewed = SkewedPlacement();
  auto shard = IdentityPlacement(1, 4, 2);
  ASSERT_TRUE(shard.ok());
  ExpertLoads heavy(1, 4);  // the loads SkewedPlacement was made for
  heavy.at(0, 0) = 100;
  heavy.at(0, 1) = heavy.at(0, 2) = heavy.at(0, 3) = 1;
  // By hand. Static shard: rank 0 holds experts 0 and 1 (101), rank 1 experts 2 and 3 (2): max 101 over
  // mean 51.5. Skewed: rank 0 two copies of expert 0 and expert 3 (33.3 + 33.3 + 1), rank 1 the third copy
  // and experts 1 and 2 (33.3 + 1 + 1): max 67.67 over mean 51.5.
  EXPECT_NEAR(WindowImbalance(*shard, heavy), 101 / 51.5, 1e-12);
  EXPECT_NEAR(WindowImbalance(skewed, heavy), (200.0 / 3 + 1) / 51.5, 1e-12);
  EXPECT_TRUE(PlacementWorthSwapping(*shard, skewed, heavy, 0.01));
  EXPECT_FALSE(PlacementWorthSwapping(skewed, skewed, heavy, 0.01));  // the same placement again: no gain
  // Even loads: the static shard is exact (1), the skewed placement is not (rank 1: 1/3 + 1 + 1 over a mean
  // of 2): keep the shard.
  ExpertLoads even(1, 4);
  for (double& v : even.values) v = 1;
  EXPECT_NEAR(WindowImbalance(skewed, even), (1.0 / 3 + 2) / 2, 1e-12);
  EXPECT_FALSE(PlacementWorthSwapping(*shard, skewed, even, 0.01));
  // Nothing routed: every placement is even.
  EXPECT_EQ(WindowImbalance(skewed, ExpertLoads(1, 4)), 1.0);
  // Two layers, the skewed one and an even one: the slowest rank of each, summed, over the means summed,
  // (101 + 2) / (51.5 + 2), not the mean of the layers' ratios ((1.961 + 1) / 2): a layer weighs by its work.
  auto two_shard = IdentityPlacement(2, 4, 2);
  ASSERT_TRUE(two_shard.ok());
  ExpertLoads two(2, 4);
  for (int64_t e = 0; e < 4; ++e) {
    two.at(0, e) = heavy.at(0, e);
    two.at(1, e) = 1;
  }
  EXPECT_NEAR(WindowImbalance(*two_shard, two), 103 / 53.5, 1e-12);
}

TEST(LivePlacement, EveryPairGoesToARankHoldingItsExpert) {
  std::mt19937 rng(7);
  ExpertLoads loads(3, 16);
  for (double& v : loads.values) v = static_cast<double>(rng() % 1000);
  auto placed = RebalanceExperts(loads, EplbShape{.replicas = 20, .ranks = 4});
  ASSERT_TRUE(placed.ok()) << placed.status().message();
  std::vector<int32_t> ids(500);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 16);
  for (int64_t layer = 0; layer < 3; ++layer) {
    std::vector<std::vector<uint8_t>> on;
    for (int r = 0; r < 4; ++r) on.push_back(ExpertsOnRank(*placed, layer, r));
    for (int sender = 0; sender < 4; ++sender) {
      std::vector<int32_t> ranks(ids.size(), -1);
      AssignPairsToRanks(*placed, layer, sender, ids, ranks);
      for (size_t i = 0; i < ids.size(); ++i) {
        ASSERT_GE(ranks[i], 0);
        ASSERT_LT(ranks[i], 4);
        EXPECT_EQ(on[static_cast<size_t>(ranks[i])][static_cast<size_t>(ids[i])], 1) << "expert " << ids[i];
      }
    }
  }
}

TEST(LivePlacement, TheIdentityPlacementIsTheStaticShard) {
  auto identity = IdentityPlacement(2, 8, 4);
  ASSERT_TRUE(identity.ok());
  const std::vector<int32_t> ids = {0, 1, 2, 3, 4, 5, 6, 7, 7, 0};
  std::vector<int32_t> ranks(ids.size());
  AssignPairsToRanks(*identity, 1, 3, ids, ranks);
  EXPECT_EQ(ranks, (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3, 3, 0}));
  EXPECT_EQ(ExpertsOnRank(*identity, 1, 2), (std::vector<uint8_t>{0, 0, 0, 0, 1, 1, 0, 0}));
}

TEST(LivePlacement, SettingsTellOptionsApart) {
  EplbOptions a, b;
  b.redundant_experts = 2;
  EXPECT_NE(EplbSettings(a), EplbSettings(b));
  b = a;
  b.step_interval = 7;
  EXPECT_NE(EplbSettings(a), EplbSettings(b));
  EXPECT_EQ(EplbSettings(a), EplbSettings(EplbOptions{}));
}

}  // namespace
}  // namespace deepinfer::parallel
