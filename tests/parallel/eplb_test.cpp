#include "parallel/eplb.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include <gtest/gtest.h>

namespace deepinfer::parallel {
namespace {

ExpertLoads FromRows(const std::vector<std::vector<double>>& rows) {
  ExpertLoads loads(static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size()));
  for (size_t l = 0; l < rows.size(); ++l)
    for (size_t e = 0; e < rows[l].size(); ++e) loads.at(static_cast<int64_t>(l), static_cast<int64_t>(e)) = rows[l][e];
  return loads;
}

std::vector<int64_t> Layer(const std::vector<int64_t>& flat, int64_t layer, int64_t width) {
  return {flat.begin() + layer * width, flat.begin() + (layer + 1) * width};
}

// The example of deepseek-ai/EPLB's README: two layers of 12 experts, 16 replicas, 4 groups, 2 nodes,
// 8 GPUs (the hierarchical policy). phy2log is the README's printed output, copied as data.
TEST(Eplb, ReproducesTheReadmeExample) {
  const ExpertLoads loads = FromRows({{90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
                                      {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27}});
  const EplbShape shape{.replicas = 16, .groups = 4, .nodes = 2, .ranks = 8};
  ASSERT_TRUE(shape.hierarchical());
  auto placed = RebalanceExperts(loads, shape);
  ASSERT_TRUE(placed.ok()) << placed.status().message();
  EXPECT_EQ(Layer(placed->phy2log, 0, 16), (std::vector<int64_t>{5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1}));
  EXPECT_EQ(Layer(placed->phy2log, 1, 16), (std::vector<int64_t>{7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1}));
  // Counted by hand from the README's phy2log: layer 0 copies experts 1, 4, 5 and 10 twice, layer 1 experts
  // 1, 5, 6 and 8.
  EXPECT_EQ(Layer(placed->logcnt, 0, 12), (std::vector<int64_t>{1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1}));
  EXPECT_EQ(Layer(placed->logcnt, 1, 12), (std::vector<int64_t>{1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1}));
  // log2phy lists each expert's slots (the first copy's first), padded with -1 to the largest count, 2.
  ASSERT_EQ(placed->max_count, 2);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t e = 0; e < 12; ++e) {
      const int64_t count = placed->Count(l, e);
      for (int64_t r = 0; r < 2; ++r) {
        const int64_t slot = placed->log2phy[(l * 12 + e) * 2 + r];
        if (r < count) {
          ASSERT_GE(slot, 0);
          EXPECT_EQ(placed->Physical(l, slot), e) << "layer " << l << " expert " << e;
        } else {
          EXPECT_EQ(slot, -1);
        }
      }
    }
  // Layer 0, expert 5 (the heaviest, 165) sits in slots 0 and 2 of rank 0.
  EXPECT_EQ(placed->log2phy[(0 * 12 + 5) * 2 + 0] + placed->log2phy[(0 * 12 + 5) * 2 + 1], 0 + 2);
  const std::string json = placed->ToJson().dump();
  EXPECT_EQ(json.rfind("{\"phy2log\":[[5,6,5,7,8,4,3,4,10,9,10,2,0,1,11,1],[7,10,6,8,6,11,8,9,2,4,5,1,5,0,3,1]],"
                       "\"log2phy\":",
                       0),
            0u)
      << json;
}

// The global policy (groups that do not divide over the nodes) on a hand-checkable case: 4 experts with
// loads 8, 1, 1, 2 into 6 slots on 2 ranks. Replication: slot 4 copies expert 0 (8 > 2), slot 5 copies
// expert 0 again (8/2 = 4 > 2). Copies carry 8/3 each; packing (heaviest first, lightest rank with room,
// 3 slots a rank): 8/3 → r0, 8/3 → r1, 8/3 → r0, 2 → r1, 1 → r1, 1 → r0; rank loads 6.33 and 5.67.
TEST(Eplb, GlobalPolicyByHand) {
  const ExpertLoads loads = FromRows({{8, 1, 1, 2}});
  const EplbShape shape{.replicas = 6, .groups = 1, .nodes = 2, .ranks = 2};
  ASSERT_FALSE(shape.hierarchical());
  auto placed = RebalanceExperts(loads, shape);
  ASSERT_TRUE(placed.ok()) << placed.status().message();
  EXPECT_EQ(placed->phy2log, (std::vector<int64_t>{0, 0, 2, 0, 3, 1}));
  EXPECT_EQ(placed->logcnt, (std::vector<int64_t>{3, 1, 1, 1}));
  const std::vector<double> ranks = RankLoads(*placed, 0, loads.row(0));
  EXPECT_NEAR(ranks[0], 8.0 * 2 / 3 + 1, 1e-12);
  EXPECT_NEAR(ranks[1], 8.0 / 3 + 2 + 1, 1e-12);
  EXPECT_NEAR(BalanceRatio(ranks), (8.0 * 2 / 3 + 1) / 6.0, 1e-12);
}

TEST(Eplb, IdentityPlacementIsContiguous) {
  auto p = IdentityPlacement(2, 8, 4);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->RankOfPhysical(5), 2);
  EXPECT_EQ(p->Physical(1, 5), 5);
  // Loads 1..8 on 4 ranks of 2: ranks carry 3, 7, 11, 15 (mean 9): max/mean 15/9.
  const std::vector<double> loads{1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_NEAR(BalanceRatio(RankLoads(*p, 0, loads)), 15.0 / 9.0, 1e-12);
  EXPECT_FALSE(IdentityPlacement(1, 6, 4).ok());
  EXPECT_EQ(BalanceRatio(std::vector<double>{0, 0}), 1.0);
}

// Zipf loads over a random permutation of the experts, or uniformly random ones.
ExpertLoads RandomLoads(std::mt19937_64& rng, int64_t layers, int64_t experts, double zipf) {
  ExpertLoads loads(layers, experts);
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<int64_t> order(experts);
    for (int64_t e = 0; e < experts; ++e) order[e] = e;
    std::shuffle(order.begin(), order.end(), rng);
    std::uniform_real_distribution<double> noise(0.0, 1000.0);
    for (int64_t e = 0; e < experts; ++e)
      loads.at(l, order[e]) = zipf > 0 ? std::floor(1e5 / std::pow(static_cast<double>(e + 1), zipf)) : noise(rng);
  }
  return loads;
}

// The placement's invariants and its balance against the identity placement, over random shapes.
TEST(Eplb, PropertiesOnRandomAndZipfLoads) {
  std::mt19937_64 rng(7);
  const EplbShape shapes[] = {{.replicas = 64, .groups = 8, .nodes = 2, .ranks = 8},
                              {.replicas = 72, .groups = 8, .nodes = 2, .ranks = 8},
                              {.replicas = 80, .groups = 1, .nodes = 1, .ranks = 16},
                              {.replicas = 96, .groups = 4, .nodes = 8, .ranks = 8},   // global
                              {.replicas = 68, .groups = 16, .nodes = 4, .ranks = 4},
                              {.replicas = 128, .groups = 8, .nodes = 4, .ranks = 32}};
  for (const EplbShape& shape : shapes)
    for (double zipf : {0.0, 0.8, 1.2}) {
      const int64_t experts = 64;
      const ExpertLoads loads = RandomLoads(rng, 3, experts, zipf);
      auto placed = RebalanceExperts(loads, shape);
      ASSERT_TRUE(placed.ok()) << placed.status().message();
      auto identity = IdentityPlacement(3, experts, shape.ranks);
      ASSERT_TRUE(identity.ok());
      for (int64_t l = 0; l < 3; ++l) {
        int64_t total = 0;
        std::vector<int64_t> seen(experts, 0);
        for (int64_t s = 0; s < shape.replicas; ++s) ++seen[placed->Physical(l, s)];
        for (int64_t e = 0; e < experts; ++e) {
          EXPECT_GE(placed->Count(l, e), 1);
          EXPECT_EQ(seen[e], placed->Count(l, e));
          total += placed->Count(l, e);
        }
        EXPECT_EQ(total, shape.replicas);
        // log2phy lists exactly the expert's slots, -1 after them.
        for (int64_t e = 0; e < experts; ++e)
          for (int64_t c = 0; c < placed->max_count; ++c) {
            const int64_t slot = placed->log2phy[(l * experts + e) * placed->max_count + c];
            if (c < placed->Count(l, e)) EXPECT_EQ(placed->Physical(l, slot), e);
            else EXPECT_EQ(slot, -1);
          }
        // Each rank holds replicas / ranks slots by construction (slot s is on rank s / per-rank); the loads
        // of a rank's slots add up to what RankLoads says, and the total is kept.
        const std::vector<double> balanced = RankLoads(*placed, l, loads.row(l));
        const std::vector<double> plain = RankLoads(*identity, l, loads.row(l));
        double sum_balanced = 0, sum_plain = 0;
        for (double v : balanced) sum_balanced += v;
        for (double v : plain) sum_plain += v;
        EXPECT_NEAR(sum_balanced, sum_plain, 1e-6 * sum_plain);
        EXPECT_LE(BalanceRatio(balanced), BalanceRatio(plain) + 1e-9)
            << "replicas " << shape.replicas << " ranks " << shape.ranks << " zipf " << zipf << " layer " << l;
      }
    }
}

TEST(Eplb, RejectsBadShapesAndLoads) {
  const ExpertLoads loads = FromRows({{1, 2, 3, 4, 5, 6, 7, 8}});
  auto message = [&](EplbShape s) {
    auto r = RebalanceExperts(loads, s);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(message({.replicas = 10, .groups = 1, .nodes = 1, .ranks = 4}).find("multiple of ranks"), std::string::npos);
  EXPECT_NE(message({.replicas = 4, .groups = 1, .nodes = 1, .ranks = 4}).find("at least the experts"),
            std::string::npos);
  EXPECT_NE(message({.replicas = 8, .groups = 3, .nodes = 1, .ranks = 4}).find("divide the experts"),
            std::string::npos);
  EXPECT_NE(message({.replicas = 8, .groups = 2, .nodes = 3, .ranks = 4}).find("multiple of nodes"), std::string::npos);
  EXPECT_NE(message({.replicas = 8, .groups = 1, .nodes = 1, .ranks = 0}).find("ranks must be"), std::string::npos);
  EXPECT_EQ(message({.replicas = 8, .groups = 2, .nodes = 2, .ranks = 4}), "ok");

  ExpertLoads negative = loads;
  negative.at(0, 3) = -1;
  EXPECT_FALSE(RebalanceExperts(negative, {.replicas = 8, .groups = 1, .nodes = 1, .ranks = 4}).ok());
  ExpertLoads nan = loads;
  nan.at(0, 2) = std::nan("");
  EXPECT_FALSE(RebalanceExperts(nan, {.replicas = 8, .groups = 1, .nodes = 1, .ranks = 4}).ok());
  ExpertLoads huge(1, EplbLimits::kMaxExperts + 1);
  EXPECT_FALSE(ValidateExpertLoads(huge).ok());
}

TEST(Eplb, ParsesArraysAndTraces) {
  auto plain = ParseExpertLoads(" [[1, 2.5, 3], [4, 5, 6]]\n");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->layers, 2);
  EXPECT_EQ(plain->experts, 3);
  EXPECT_EQ(plain->at(0, 1), 2.5);
  // Two trace steps sum: layer 0 expert 2 = 3 + 30.
  auto trace = ParseExpertLoads("{\"loads\": [[1, 2, 3]], \"step\": 0}\n\n{\"loads\": [[10, 20, 30]]}\n");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->at(0, 2), 33);
  auto steps = ParseRoutingTrace("{\"loads\": [[1, 2]]}\n{\"loads\": [[3, 4]]}");
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(steps->size(), 2u);

  for (const char* bad : {"", "[]", "[[]]", "[[1, 2], [3]]", "[[1, \"2\"]]", "[[1, -2]]", "[[NaN]]", "[[1, 2]",
                          "[[[1]]]", "{\"loads\": [[1]]}\n{\"loads\": [[1, 2]]}", "{\"x\": 1}", "7",
                          "[[1e999]]", "[[true]]"}) {
    auto r = ParseExpertLoads(bad);
    EXPECT_FALSE(r.ok()) << "accepted: " << bad;
  }
  EXPECT_FALSE(ParseExpertLoads("[[1, 2, 3]]", 8).ok());  // over max_bytes
  std::string wide = "[[";
  for (int64_t e = 0; e <= EplbLimits::kMaxExperts; ++e) wide += e ? ",1" : "1";
  wide += "]]";
  auto too_wide = ParseExpertLoads(wide);
  ASSERT_FALSE(too_wide.ok());
  EXPECT_NE(too_wide.status().message().find("experts per layer"), std::string::npos);
  // More values than the largest table (1,024 × 4,096) are refused before the text is parsed.
  const std::string huge = "[[" + std::string(size_t{2} * 1024 * 4096 + 4096, ',') + "]]";
  auto refused = ParseExpertLoads(huge);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("more values than"), std::string::npos);
  auto refused_line = ParseRoutingTrace("{\"loads\": [[" + std::string(size_t{1} << 23, ',') + "]]}");
  ASSERT_FALSE(refused_line.ok());
  EXPECT_NE(refused_line.status().message().find("trace line 1: more values"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::parallel
