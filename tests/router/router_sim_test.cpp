#include "router/router_sim.h"

#include <gtest/gtest.h>

#include "router/router_sim_trace.h"

namespace deepinfer::router {
namespace {

// 1 ms per step and 0.1 ms per token, nothing else: every step below is worked out by hand.
constexpr std::array<double, kStepCostTerms> kSimpleCost = {1e-3, 1e-4, 0, 0, 0};

TraceRequest Req(double at, int64_t input, int64_t output, std::vector<int64_t> blocks) {
  return {at, input, output, std::move(blocks)};
}

SimulationOptions SimOptions(int64_t units) {
  SimulationOptions o;
  o.units = units;
  o.step_cost = kSimpleCost;
  o.shared_store = false;
  return o;
}

TEST(RouterSim, QueuesTwoRequestsOnOneUnitAsWorkedOutByHand) {
  Trace t;
  t.block_tokens = 64;
  t.requests = {Req(0, 100, 3, {1, 2}), Req(0.001, 100, 2, {3, 4})};
  auto r = Simulate(t, RoutingPolicy::kRoundRobin, SimOptions(1));
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Step 1 [0, 11 ms]: A's 100-token prompt: 1 + 0.1 × 100 = 11 ms; B arrives at 1 ms and waits.
  // Step 2 [11, 22.1 ms]: A's second token and B's prompt: 1 + 0.1 × 101 = 11.1 ms.
  // Step 3 [22.1, 23.3 ms]: A's third token and B's second: 1 + 0.1 × 2 = 1.2 ms.
  EXPECT_NEAR(r->requests[0].ttft_s, 0.011, 1e-12);
  EXPECT_NEAR(r->requests[1].ttft_s, 0.0221 - 0.001, 1e-12);
  EXPECT_NEAR(r->requests[0].mean_tbt_s, (0.0111 + 0.0012) / 2, 1e-12);
  EXPECT_NEAR(r->requests[1].mean_tbt_s, 0.0012, 1e-12);
  EXPECT_NEAR(r->makespan_s, 0.0233, 1e-12);
  // Nearest rank of two TTFTs: p50 the smaller, p99 the larger; intervals 11.1, 1.2, 1.2 ms.
  EXPECT_NEAR(r->ttft_p50_s, 0.011, 1e-12);
  EXPECT_NEAR(r->ttft_p99_s, 0.0211, 1e-12);
  EXPECT_NEAR(r->tbt_p50_s, 0.0012, 1e-12);
  EXPECT_NEAR(r->tbt_p99_s, 0.0111, 1e-12);
  EXPECT_EQ(r->hit_rate, 0);
  // Busy all the way: 23.3 ms of steps over a 23.3 ms makespan.
  EXPECT_NEAR(r->prefill_busy, 1.0, 1e-9);
}

TEST(RouterSim, TheSharedStoreLetsAnotherUnitHitAPrefix) {
  Trace t;
  t.block_tokens = 64;
  // B repeats A's prompt after A is done; round-robin sends it to the other unit.
  t.requests = {Req(0, 200, 1, {7, 8, 9, 10}), Req(1.0, 200, 1, {7, 8, 9, 10})};
  SimulationOptions o = SimOptions(2);
  auto off = Simulate(t, RoutingPolicy::kRoundRobin, o);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->requests[1].prefill_unit, 1);
  EXPECT_EQ(off->requests[1].hit_tokens, 0);
  o.shared_store = true;
  auto on = Simulate(t, RoutingPolicy::kRoundRobin, o);
  ASSERT_TRUE(on.ok());
  // All 4 blocks stored, capped at 199 so that the last token is computed: 1 + 0.1 × 1 = 1.1 ms.
  EXPECT_EQ(on->requests[1].hit_tokens, 199);
  EXPECT_NEAR(on->requests[1].ttft_s, 0.0011, 1e-12);
  EXPECT_NEAR(on->hit_rate, 199.0 / 400, 1e-12);
}

std::vector<int> Units(const SimulationResult& r) {
  std::vector<int> u;
  for (const RequestOutcome& o : r.requests) u.push_back(o.prefill_unit);
  return u;
}

TEST(RouterSim, RoundRobinAndLeastLoadDifferOnABusyUnit) {
  Trace t;
  t.block_tokens = 64;
  // r0 decodes long on unit 0; r1 is done by 0.5 s; at 0.5 s unit 0 still runs r0.
  t.requests = {Req(0, 64, 1000, {1}), Req(0, 64, 2, {2}), Req(0.5, 64, 2, {3})};
  auto rr = Simulate(t, RoutingPolicy::kRoundRobin, SimOptions(2));
  auto ll = Simulate(t, RoutingPolicy::kLeastLoad, SimOptions(2));
  ASSERT_TRUE(rr.ok() && ll.ok());
  EXPECT_EQ(Units(*rr), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(Units(*ll), (std::vector<int>{0, 1, 1}));
}

TEST(RouterSim, CacheAwareFollowsItsTreeUntilLoadsAreImbalanced) {
  Trace t;
  t.block_tokens = 64;
  // Prefix P = {1, 2, 3}, prefix Q = {11, 12, 13}; all arrive at once and decode long.
  t.requests = {Req(0, 256, 100, {1, 2, 3, 4}), Req(0, 256, 100, {11, 12, 13, 14}),
                Req(0, 256, 100, {11, 12, 13, 15}), Req(0, 256, 100, {11, 12, 13, 16})};
  SimulationOptions o = SimOptions(2);
  auto a = Simulate(t, RoutingPolicy::kCacheAware, o);
  ASSERT_TRUE(a.ok());
  // r0: both trees empty, the smallest (unit 0); r1: no match above 0.5, the smallest tree (unit 1);
  // r2, r3: 3 of 4 blocks match unit 1's tree (0.75 > 0.5). Loads 1 and 3 stay within 32 / 1.5×.
  EXPECT_EQ(Units(*a), (std::vector<int>{0, 1, 1, 1}));
  // With thresholds 0 and 1.0, after r2 the loads 1 vs 2 count as imbalanced: r3 goes to unit 0.
  o.cache_aware.balance_abs = 0;
  o.cache_aware.balance_rel = 1.0;
  auto b = Simulate(t, RoutingPolicy::kCacheAware, o);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Units(*b), (std::vector<int>{0, 1, 1, 0}));
}

TEST(RouterSim, CostRoutingWeighsOverlapAgainstActiveBlocks) {
  Trace t;
  t.block_tokens = 64;
  std::vector<int64_t> prefix;
  for (int64_t i = 0; i < 40; ++i) prefix.push_back(i);
  std::vector<int64_t> second = prefix;
  second.push_back(1000);
  // r0 (40 blocks) keeps decoding on unit 0; r1 at 1 s shares its 40 blocks.
  t.requests = {Req(0, 40 * 64, 10000, prefix), Req(1.0, 41 * 64, 2, second)};
  SimulationOptions o = SimOptions(2);
  o.cost_overlap_weight = 2;
  auto cost = Simulate(t, RoutingPolicy::kCost, o);
  auto ll = Simulate(t, RoutingPolicy::kLeastLoad, o);
  ASSERT_TRUE(cost.ok() && ll.ok());
  // Unit 0: 2 × 1 missing block + about 41 active blocks ≈ 43; unit 1: 2 × 41 missing blocks = 82.
  EXPECT_EQ(Units(*cost), (std::vector<int>{0, 0}));
  EXPECT_EQ(cost->requests[1].hit_tokens, 40 * 64);
  EXPECT_EQ(Units(*ll), (std::vector<int>{0, 1}));
}

TEST(RouterSim, PredictedTtftAvoidsTheUnitWithALongQueuedPrompt) {
  Trace t;
  t.block_tokens = 64;
  // r0: an 8192-token prompt; r1, r2: short prompts that decode long; all at once.
  t.requests = {Req(0, 8192, 2, {}), Req(0, 64, 1000, {2}), Req(0, 64, 1000, {3}), Req(0, 64, 1000, {4})};
  for (int64_t i = 0; i < 128; ++i) t.requests[0].blocks.push_back(100 + i);
  auto ll = Simulate(t, RoutingPolicy::kLeastLoad, SimOptions(2));
  auto ours = Simulate(t, RoutingPolicy::kPredictedTtft, SimOptions(2));
  ASSERT_TRUE(ll.ok() && ours.ok());
  // Least-load counts requests: r3 goes to unit 0 (1 in flight against 2), behind 16 chunks of 52 ms.
  EXPECT_EQ(Units(*ll), (std::vector<int>{0, 1, 1, 0}));
  // Ours predicts r3's TTFT: about 0.84 s behind unit 0's prompt, 1.7 ms on unit 1.
  EXPECT_EQ(Units(*ours), (std::vector<int>{0, 1, 1, 1}));
  EXPECT_LT(ours->requests[3].ttft_s, 0.05);
  EXPECT_GT(ll->requests[3].ttft_s, 0.8);
}

TEST(RouterSim, DisaggregatedRequestsMoveToADecodeUnit) {
  Trace t;
  t.block_tokens = 64;
  t.requests = {Req(0, 100, 3, {1, 2})};
  SimulationOptions o = SimOptions(0);
  o.prefill_units = 1;
  o.decode_units = 1;
  o.handoff_s_per_token = 1e-5;
  auto r = Simulate(t, RoutingPolicy::kPredictedTtft, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Prefill 11 ms; hand-off 100 × 10 µs = 1 ms; then two decode steps of 1.1 ms on the decode unit.
  EXPECT_EQ(r->requests[0].prefill_unit, 0);
  EXPECT_EQ(r->requests[0].decode_unit, 1);
  EXPECT_NEAR(r->requests[0].ttft_s, 0.011, 1e-12);
  EXPECT_NEAR(r->makespan_s, 0.011 + 0.001 + 0.0022, 1e-12);
  EXPECT_NEAR(r->requests[0].mean_tbt_s, (0.0021 + 0.0011) / 2, 1e-12);
}

TEST(RouterSim, RejectsBadOptions) {
  Trace t;
  t.requests = {Req(0, 10, 1, {1})};
  SimulationOptions o = SimOptions(0);
  EXPECT_FALSE(Simulate(t, RoutingPolicy::kRoundRobin, o).ok());
  o = SimOptions(1);
  o.step_cost = {0, 0, 0, 0, 0};
  EXPECT_FALSE(Simulate(t, RoutingPolicy::kRoundRobin, o).ok());
  o = SimOptions(1);
  o.prefill_units = 1;
  EXPECT_FALSE(Simulate(t, RoutingPolicy::kRoundRobin, o).ok());
  EXPECT_FALSE(Simulate(Trace{}, RoutingPolicy::kRoundRobin, SimOptions(1)).ok());
  // A trace built in code is checked like a parsed one: ids covering the prompt, arrivals in order.
  t.requests = {Req(0, 1000, 1, {1})};
  EXPECT_FALSE(Simulate(t, RoutingPolicy::kRoundRobin, SimOptions(1)).ok());
  t.requests = {Req(1, 10, 1, {1}), Req(0, 10, 1, {2})};
  EXPECT_FALSE(Simulate(t, RoutingPolicy::kRoundRobin, SimOptions(1)).ok());
}

TEST(RouterTrace, ParsesMooncakeLinesSortedAndShifted) {
  auto t = ParseMooncakeTrace(
      "{\"timestamp\": 3000, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 3]}\n"
      "\n"
      "{\"timestamp\": 1000, \"input_length\": 512, \"output_length\": 7.0, \"hash_ids\": [1], \"x\": 0}\n");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->requests.size(), 2u);
  EXPECT_EQ(t->requests[0].arrival_s, 0);
  EXPECT_EQ(t->requests[0].output_tokens, 7);
  EXPECT_EQ(t->requests[1].arrival_s, 2.0);
  EXPECT_EQ(t->requests[1].blocks, (std::vector<int64_t>{1, 3}));
  // Oracle: the second prompt's first block (512 tokens) appeared before.
  EXPECT_EQ(OracleHitTokens(*t), (std::vector<int64_t>{0, 512}));
  EXPECT_NEAR(OracleHitRate(*t), 512.0 / 1112, 1e-12);
}

TEST(RouterTrace, BoundsEveryField) {
  auto error = [](std::string_view text) {
    auto t = ParseMooncakeTrace(text);
    return t.ok() ? std::string("ok") : t.status().message();
  };
  const std::string good = R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]})";
  EXPECT_EQ(error(good), "ok");
  EXPECT_EQ(error(""), "no requests");
  EXPECT_NE(error(good + "\n{\"timestamp\": 0}").find("line 2: missing input_length"), std::string::npos);
  EXPECT_NE(error("[1]").find("line 1: not a JSON object"), std::string::npos);
  EXPECT_NE(error("{\"timestamp\": ").find("line 1: invalid JSON"), std::string::npos);
  EXPECT_NE(error(R"({"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": [1]})").find("timestamp"),
            std::string::npos);
  EXPECT_NE(error(R"({"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": []})").find("input_length"),
            std::string::npos);
  EXPECT_NE(error(R"({"timestamp": 0, "input_length": 99999999, "output_length": 1, "hash_ids": [1]})")
                .find("input_length out of range"),
            std::string::npos);
  EXPECT_NE(error(R"({"timestamp": 0, "input_length": 10, "output_length": 1e9, "hash_ids": [1]})")
                .find("output_length"),
            std::string::npos);
  EXPECT_NE(error(R"({"timestamp": 0, "input_length": 1000, "output_length": 1, "hash_ids": [1]})")
                .find("needs 2"),
            std::string::npos);
  EXPECT_NE(error(R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [-1]})").find("hash id"),
            std::string::npos);
  EXPECT_NE(error(R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": ["a"]})").find("hash id"),
            std::string::npos);
  EXPECT_NE(error(std::string(TraceLimits::kMaxLineBytes + 1, ' ') + "x").find("longer than"), std::string::npos);
}

TEST(RouterTrace, SyntheticTracesAreBoundedAndSharePrefixes) {
  SyntheticTraceOptions o;
  o.requests = 200;
  o.prefix_groups = 4;
  auto a = SyntheticTrace(o);
  auto b = SyntheticTrace(o);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->requests.size(), 200u);
  for (size_t i = 0; i < a->requests.size(); ++i) {
    const TraceRequest& r = a->requests[i];
    EXPECT_EQ(r.input_tokens, b->requests[i].input_tokens);  // the same seed, the same trace
    EXPECT_EQ(static_cast<int64_t>(r.blocks.size()), (r.input_tokens + 511) / 512);
    EXPECT_GE(r.output_tokens, o.min_output_tokens);
    EXPECT_LE(r.output_tokens, o.max_output_tokens);
    if (i > 0) {
      EXPECT_GE(r.arrival_s, a->requests[i - 1].arrival_s);
    }
  }
  // 4 groups among 200 requests: most prompts' prefixes were seen before.
  EXPECT_GT(OracleHitRate(*a), 0.5);
  o.min_output_tokens = 10;
  o.max_output_tokens = 5;
  EXPECT_FALSE(SyntheticTrace(o).ok());
}

}  // namespace
}  // namespace deepinfer::router
