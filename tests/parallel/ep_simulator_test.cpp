#include "parallel/ep_simulator.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

namespace deepinfer::parallel {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(DEEPINFER_SOURCE_DIR) + "/tests/model/data/" + name + "/config.json";
}

// DeepSeek-V4-Flash (models.md §2.1). Replicated weights by hand, per layer: attention wq_a 4096·1024
// + wq_b 1024·(64·512) + wkv 4096·512 + wo_a (64·512)·1024 + wo_b (8·1024)·4096 = 106,954,752; shared expert
// 3·4096·2048 + router 4096·256 = 26,214,400; times 43 layers = 5,726,273,536. The 21 ratio-4 layers add
// the compressor 2·4096·(2·512), the indexer's wq_b 1024·(64·128) and weights_proj 4096·64 and its
// compressor 2·4096·(2·128): 19,136,512 each; the 20 ratio-128 layers the compressor 2·4096·512 =
// 4,194,304 each; the head 129,280·4096 = 529,530,880. Sum: 6,741,557,248. A routed expert has
// 3·4096·2048 = 25,165,824 parameters.
TEST(EpSimulator, V4FlashPreset) {
  auto m = PresetModelShape("v4-flash");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->hidden_size, 4096);
  EXPECT_EQ(m->moe_layers, 43);
  EXPECT_EQ(m->hash_layers, 3);
  EXPECT_EQ(m->experts, 256);
  EXPECT_EQ(m->experts_per_token, 6);
  EXPECT_EQ(m->expert_params, 25165824.0);
  EXPECT_EQ(m->dense_params, 6741557248.0);
  EXPECT_EQ(m->expert_bytes_per_param, 17.0 / 32);
  // V4-Pro: 61 layers of 384 experts of 3·7168·3072 = 66,060,288 parameters: 1,547.4B.
  auto pro = PresetModelShape("v4-pro");
  ASSERT_TRUE(pro.ok());
  EXPECT_EQ(pro->moe_layers, 61);
  EXPECT_NEAR(61.0 * 384 * pro->expert_params / 1e9, 1547.4, 0.1);
  EXPECT_FALSE(PresetModelShape("v5").ok());
}

// EP4 on V4-Flash in DeepSeek's format. A rank misses all 6 of a token's experts with probability
// C(192, 6) / C(256, 6) = (192·191·190·189·188·187) / (256·255·254·253·252·251) = 0.174478, so a token
// reaches 4·(1 − 0.174478) = 3.3021 ranks, 2.4766 of them others. Dispatch row: 4096 fp8 bytes + 32 f32
// scales = 4,224 B; ids and weights 6·(4 + 4) = 48 B per token (3/4 of them remote); combine row 8,192 B
// of bf16 per rank reached. Dispatch: 3.3021·4224 + 48 = 13,996.0 B (remote 2.4766·4224 + 36 = 10,497.0);
// combine 3.3021·8192 = 27,050.7 B (remote 20,288.0): 41,046.7 B in all, the ≈ 41 KB of distributed.md.
TEST(EpSimulator, ExchangeBytesByHand) {
  auto m = PresetModelShape("v4-flash");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(RowBytes(4096, WireDtype::kFp8), 4224.0);
  EXPECT_EQ(RowBytes(4096, WireDtype::kBf16), 8192.0);
  EXPECT_EQ(RowBytes(4096, WireDtype::kF32), 16384.0);
  EXPECT_EQ(RowBytes(100, WireDtype::kFp8), 100.0 + 4);  // one scale for a partial block of 128
  auto x = ExchangePerToken(*m, 4, WireFormat{});
  ASSERT_TRUE(x.ok());
  const double miss = (192.0 * 191 * 190 * 189 * 188 * 187) / (256.0 * 255 * 254 * 253 * 252 * 251);
  EXPECT_NEAR(miss, 0.174478, 1e-6);
  EXPECT_NEAR(x->ranks_reached, 3.3021, 1e-4);
  EXPECT_NEAR(x->dispatch_bytes, 13996.0, 0.1);
  EXPECT_NEAR(x->remote_dispatch_bytes, 10497.0, 0.1);
  EXPECT_NEAR(x->combine_bytes, 27050.7, 0.1);
  EXPECT_NEAR(x->remote_combine_bytes, 20288.0, 0.1);
  EXPECT_NEAR(x->total(), 41046.7, 0.1);

  // deepinfer's bit-exact exchange: f32 rows, one combine row per chosen expert: 6·16,384 = 98,304 B back,
  // 3/4 of it remote (73,728 B); dispatch 3.302088·16,384 + 48 = 54,149.4 B.
  const WireFormat exact{WireDtype::kF32, WireDtype::kF32, CombineRows::kPerExpert};
  auto e = ExchangePerToken(*m, 4, exact);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->combine_bytes, 98304.0);
  EXPECT_EQ(e->remote_combine_bytes, 73728.0);
  EXPECT_NEAR(e->dispatch_bytes, 54149.4, 0.1);

  // One rank: every expert is local, nothing crosses a link, and the exchanges take no time.
  auto one = ExchangePerToken(*m, 1, WireFormat{});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->ranks_reached, 1.0);
  EXPECT_EQ(one->remote(), 0.0);
  EXPECT_EQ(AllToAllPerLayer(*one, 1, 32, LinkSpec{}).total_us(), 0.0);
  EXPECT_FALSE(ExchangePerToken(*m, 512, WireFormat{}).ok());
}

// EP4, 32 tokens a rank, 100 Gbit/s = 12,500 bytes/us, 5 us a message: counts ⌈log2 4⌉ = 2 latencies plus
// 4·8 bytes = 10.00256 us; dispatch 3 latencies + 32·10,497.0 B = 15 + 26.872 us; combine 15 + 32·20,288.0 B
// = 15 + 51.937 us. A balance of 1.5 makes the busiest rank's bytes 1.5 times as many.
TEST(EpSimulator, AllToAllTimeByHand) {
  auto m = PresetModelShape("v4-flash");
  ASSERT_TRUE(m.ok());
  auto x = ExchangePerToken(*m, 4, WireFormat{});
  ASSERT_TRUE(x.ok());
  const LinkSpec link{100, 5};
  const AllToAllTime t = AllToAllPerLayer(*x, 4, 32, link);
  EXPECT_NEAR(t.counts_us, 10.00256, 1e-6);
  EXPECT_NEAR(t.dispatch_us, 15 + 26.872, 1e-3);
  EXPECT_NEAR(t.combine_us, 15 + 51.937, 1e-3);
  const AllToAllTime skewed = AllToAllPerLayer(*x, 4, 32, link, 1.5);
  EXPECT_NEAR(skewed.dispatch_us, 15 + 1.5 * 26.872, 1e-3);
}

// The roofline at EP8, 32 tokens a rank, 200 GB/s and 4 TFLOP/s: the replicated weights are 6.74 GB
// (33.7 ms to read) and 2·6.7416e9·32 FLOPs (107.9 ms): compute-bound, 107.86 ms. Per MoE layer a rank's 32
// experts are each touched by one of the step's 256 tokens with probability 1 − (1 − 6/256)^256 =
// 0.99770, so 31.926 experts · 25,165,824 · 17/32 bytes = 426.8 MB (2.134 ms) against 2·32·6·25,165,824
// FLOPs (2.416 ms): 2.416 ms, times 43 layers = 103.89 ms.
TEST(EpSimulator, RooflineStepByHand) {
  auto m = PresetModelShape("v4-flash");
  ASSERT_TRUE(m.ok());
  auto x = ExchangePerToken(*m, 8, WireFormat{});
  ASSERT_TRUE(x.ok());
  const StepTime t = PredictStep(*m, 8, 32, *x, LinkSpec{100, 5}, RankSpec{200, 4}, 1.0);
  EXPECT_NEAR(t.dense_ms, 2.0 * 6741557248.0 * 32 / 4e12 * 1e3, 1e-6);
  EXPECT_NEAR(t.experts_ms, 43 * 2.0 * 32 * 6 * 25165824.0 / 4e12 * 1e3, 1e-6);
  EXPECT_NEAR(t.exchange_ms, 43 * AllToAllPerLayer(*x, 8, 32, LinkSpec{100, 5}).total_us() / 1e3, 1e-9);
  const StepTime skewed = PredictStep(*m, 8, 32, *x, LinkSpec{100, 5}, RankSpec{200, 4}, 2.0);
  EXPECT_NEAR(skewed.experts_ms, 2 * t.experts_ms, 1e-9);
  // One token a rank is memory-bound: 6.74 GB at 200 GB/s.
  const StepTime decode = PredictStep(*m, 8, 1, *x, LinkSpec{100, 5}, RankSpec{200, 4}, 1.0);
  EXPECT_NEAR(decode.dense_ms, 6741557248.0 / 200e9 * 1e3, 1e-6);
}

// The tests/model fixtures' configs. v4_mixed (hidden 64, 5 layers with ratios 0, 4, 128, 4, 128): per
// layer attention 64·32 + 32·256 + 64·64 + 256·24 + 48·64 = 23,552 and shared expert + router 3·64·16 +
// 64·8 = 3,584, times 5 = 135,680; two ratio-4 layers add 2·64·128 + 32·512 + 64·16 + 2·64·64 = 41,984
// each, two ratio-128 layers 2·64·64 = 8,192 each, the head 256·64 = 16,384: 252,416.
TEST(EpSimulator, ShapeFromConfigs) {
  auto v4 = HfConfig::Load(Fixture("v4_mixed"));
  ASSERT_TRUE(v4.ok()) << v4.status().message();
  auto m = ModelShapeFromConfig(*v4, "v4_mixed");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->moe_layers, 5);
  EXPECT_EQ(m->hash_layers, 2);
  EXPECT_EQ(m->experts, 8);
  EXPECT_EQ(m->experts_per_token, 2);
  EXPECT_EQ(m->expert_params, 3.0 * 64 * 16);
  EXPECT_EQ(m->dense_params, 252416.0);
  EXPECT_EQ(m->expert_bytes_per_param, 1.0);  // no expert_dtype: fp4 in this config

  auto v3 = HfConfig::Load(Fixture("v3_tiny_a_bf16"));
  ASSERT_TRUE(v3.ok());
  auto m3 = ModelShapeFromConfig(*v3, "v3");
  ASSERT_TRUE(m3.ok()) << m3.status().message();
  EXPECT_EQ(m3->moe_layers, 2);  // 3 layers, the first dense
  EXPECT_EQ(m3->expert_groups, 4);
  EXPECT_EQ(m3->experts, 16);

  auto other = HfConfig::Parse(R"({"model_type": "llama", "hidden_size": 8})");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(ModelShapeFromConfig(*other, "llama").ok());
}

TEST(EpSimulator, BalancerBeatsTheUnbalancedPlacement) {
  auto m = PresetModelShape("v4-flash");
  ASSERT_TRUE(m.ok());
  SyntheticRouting r;
  r.layers = 2;
  r.zipf = 1.0;
  r.tokens_per_step = 2048;
  r.window_steps = 2;
  r.eval_steps = 2;
  r.seed = 3;
  BalanceOptions o;
  o.ranks = 8;
  o.redundant_experts = 8;
  auto f = SimulateBalance(*m, r, o);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->replicas, 264);
  EXPECT_EQ(f->evaluated_steps, 2);
  EXPECT_LT(f->balanced_mean, f->unbalanced_mean);
  EXPECT_LE(f->planned_mean, f->balanced_mean);
  EXPECT_GE(f->planned_mean, 1.0);
  EXPECT_LE(f->balanced_mean, f->balanced_max);
  // Seeded: the same figures again.
  auto again = SimulateBalance(*m, r, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->balanced_mean, f->balanced_mean);
  // Replicas that do not divide over the ranks are refused.
  o.redundant_experts = 3;
  EXPECT_FALSE(SimulateBalance(*m, r, o).ok());
}

// Hash-routed layers: with token frequencies 1/i^10 the most frequent id is 1/ζ(10) = 99.9% of the tokens,
// so the layer's load sits (over 99%) on that id's 6 experts, on at most 6 of the 8 ranks: the busiest
// carries more than 0.99/6 of it, and max/mean is above (0.99/6) / (1/8) = 1.32 without the balancer;
// copies of those experts spread it.
TEST(EpSimulator, HashRoutedLayers) {
  auto m = PresetModelShape("v4-flash");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->vocab_size, 129280);
  SyntheticRouting r;
  r.layers = 1;
  r.hash_layers = 1;
  r.token_zipf = 10;
  r.tokens_per_step = 512;
  r.window_steps = 2;
  r.eval_steps = 1;
  auto f = SimulateBalance(*m, r, BalanceOptions{.ranks = 8, .redundant_experts = 40, .ranks_per_node = 8});
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_GT(f->unbalanced_mean, 1.32);
  EXPECT_LT(f->balanced_mean, f->unbalanced_mean);
  r.hash_layers = 2;  // more than the simulated layers
  EXPECT_FALSE(SimulateBalance(*m, r, BalanceOptions{}).ok());
}

// A trace of two steps of one layer, 4 experts on 2 ranks with 2 spare copies: the first step plans,
// the second is measured. Unbalanced, step 2's loads 6, 2, 1, 1 put 8 and 2 on the ranks (1.6); the plan
// from step 1 (the same skew) copies expert 0 twice and balances step 2 at 5 and 5 (1.0).
TEST(EpSimulator, TraceBalance) {
  ExpertLoads step(1, 4);
  step.values = {6, 2, 1, 1};
  auto f = TraceBalance({step, step}, 1, BalanceOptions{.ranks = 2, .redundant_experts = 2, .ranks_per_node = 8});
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_DOUBLE_EQ(f->unbalanced_mean, 1.6);
  EXPECT_DOUBLE_EQ(f->balanced_mean, 1.0);
  EXPECT_EQ(f->evaluated_steps, 1);
  EXPECT_FALSE(TraceBalance({}, 1, BalanceOptions{}).ok());
}

}  // namespace
}  // namespace deepinfer::parallel
