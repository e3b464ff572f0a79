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
