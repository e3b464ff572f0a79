// StronglyConnectedComponents: the components and their order, by hand on a small graph, and a chain far
// deeper than a recursive walk's stack would take.
#include <gtest/gtest.h>

#include <vector>

#include "grammar/components.h"

namespace deepinfer::grammar {
namespace {

std::vector<int32_t> Components(const std::vector<std::vector<uint32_t>>& succ, int32_t* count) {
  return StronglyConnectedComponents(
      static_cast<uint32_t>(succ.size()), [&](uint32_t v) { return succ[v].size(); },
      [&](uint32_t v, size_t k) { return succ[v][k]; }, count);
}

TEST(StronglyConnectedComponents, GroupsCyclesAndOrdersSuccessorsFirst) {
  // 0 -> 1 -> 2 -> 0 (a cycle), 2 -> 3, 3 -> 3 (a self-loop), 4 -> 0, 5 alone.
  const std::vector<std::vector<uint32_t>> succ = {{1}, {2}, {0, 3}, {3}, {0}, {}};
  int32_t count = 0;
  const std::vector<int32_t> c = Components(succ, &count);
  EXPECT_EQ(count, 4);  // {0,1,2}, {3}, {4}, {5}
  EXPECT_EQ(c[0], c[1]);
  EXPECT_EQ(c[1], c[2]);
  EXPECT_NE(c[2], c[3]);
  EXPECT_LT(c[3], c[0]);  // a component's successors are numbered first
  EXPECT_LT(c[0], c[4]);
  EXPECT_NE(c[5], c[0]);
  EXPECT_NE(c[5], c[3]);
  EXPECT_NE(c[5], c[4]);
}

TEST(StronglyConnectedComponents, DeepChainAndOneLongCycle) {
  const uint32_t n = 1'000'000;
  std::vector<std::vector<uint32_t>> chain(n);
  for (uint32_t v = 0; v + 1 < n; ++v) chain[v] = {v + 1};
  int32_t count = 0;
  const std::vector<int32_t> c = Components(chain, &count);
  EXPECT_EQ(count, static_cast<int32_t>(n));
  EXPECT_EQ(c[n - 1], 0);  // the end of the chain completes first
  EXPECT_EQ(c[0], static_cast<int32_t>(n - 1));
  chain[n - 1] = {0};  // close it: one component
  EXPECT_EQ(Components(chain, &count), std::vector<int32_t>(n, 0));
  EXPECT_EQ(count, 1);
}

}  // namespace
}  // namespace deepinfer::grammar
