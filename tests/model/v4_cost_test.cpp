// EstimateStepCost on the v4_mixed fixture, against figures derived by hand from its config.json:
// d 64, 4 heads of 64, q_lora 32, 2 output groups of rank 24, 8 experts (top 2, inner 16) + 1 shared,
// hc 4, window 16, indexer 16 heads of 32 (top 3); layers: sliding, CSA 4, HCA 8, CSA 4, HCA 8; vocab 256.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "model/deepseek_v4/v4_model.h"
#include "v4_fixture.h"

namespace deepinfer::model {
namespace {

// Multiply-adds of one token's matrix products:
//   every layer: wq_a 32·64 + wq_b 256·32 + wkv 64·64 + wo_a 2·24·128 + wo_b 64·48 + gate 8·64
//                + 3 experts · 3 · 16·64 + mHC 2 · 24·256                                  = 45,568
//   CSA layers:  compressor 2 · 128·64 + indexer wq_b 512·32 + weights_proj 16·64
//                + indexer compressor 2 · 64·64                                            = 41,984
//   HCA layers:  compressor 2 · 64·64                                                      =  8,192
//   5 · 45,568 + 2 · 41,984 + 2 · 8,192                                                    = 328,192
constexpr double kTokenMacs = 328192;

// Attention at position 99: window min(100, 16) = 16 keys; CSA: 100/4 = 25 entries, top 3 attended, 25
// scored; HCA: 100/8 = 12 entries. MACs 2·4·k·64 per layer for k keys (scores and weighted sum) plus
// 16·25·32 for the indexer: 8,192 + 2 · (9,728 + 12,800) + 2 · 14,336 = 81,920. KV floats read:
// 16·64 + 2 · (19·64 + 25·32) + 2 · 28·64 = 8,640.
constexpr double kAttentionMacsAt99 = 81920;
constexpr double kKvFloatsAt99 = 8640;

TEST(V4Cost, DecodeTokenMatchesTheHandDerivedFigures) {
  auto m = V4Model::Load(test_support::FixtureDir("v4_mixed"));
  ASSERT_TRUE(m.ok());
  const ChunkShape decode{99, 1, 1};
  auto cost = (*m)->EstimateStepCost(std::span(&decode, 1));
  ASSERT_TRUE(cost.ok()) << cost.status().ToString();
  EXPECT_DOUBLE_EQ(cost->flops, 2 * (kTokenMacs + kAttentionMacsAt99 + 256 * 64));  // + one logits row
  EXPECT_DOUBLE_EQ(cost->kv_bytes, 4 * kKvFloatsAt99);
  const ChunkShape no_logits{99, 1, 0};
  EXPECT_DOUBLE_EQ((*m)->EstimateStepCost(std::span(&no_logits, 1))->flops, 2 * (kTokenMacs + kAttentionMacsAt99));
}

TEST(V4Cost, AChunkCostsWhatItsTokensCostAndExpertsAreShared) {
  auto m = V4Model::Load(test_support::FixtureDir("v4_mixed"));
  ASSERT_TRUE(m.ok());
  const ChunkShape chunk{40, 30, 2};
  auto whole = (*m)->EstimateStepCost(std::span(&chunk, 1));
  ASSERT_TRUE(whole.ok());
  std::vector<ChunkShape> singles;
  for (int64_t p = 40; p < 70; ++p) singles.push_back({p, 1, p >= 68 ? 1 : 0});
  auto split = (*m)->EstimateStepCost(singles);
  ASSERT_TRUE(split.ok());
  EXPECT_NEAR(whole->flops, split->flops, 1e-9 * whole->flops);
  EXPECT_NEAR(whole->kv_bytes, split->kv_bytes, 1e-9 * whole->kv_bytes);
  // The same 30 tokens touch the same experts however they are chunked.
  EXPECT_DOUBLE_EQ(whole->weight_bytes, split->weight_bytes);
  // More tokens touch more distinct experts (8 at most: 2 per token), so weight bytes grow, ever slower.
  auto w = [&](int64_t tokens) {
    const ChunkShape c{0, tokens, 1};
    return (*m)->EstimateStepCost(std::span(&c, 1))->weight_bytes;
  };
  EXPECT_LT(w(1), w(2));
  EXPECT_GT(w(2) - w(1), w(3) - w(2));
  // w(T) = dense + distinct(T) · X + T · R (X: one expert of every layer, R: an embedding row), with
  // distinct(1) = 2, distinct(2) = 8·(1 − 0.75²) = 3.5, distinct(3) = 8·(1 − 0.75³) = 4.625, so
  // w(2) − w(1) = 1.5 X + R and w(3) − w(2) = 1.125 X + R; distinct(100000) = 8 to double precision.
  const double a = w(2) - w(1), b = w(3) - w(2);
  const double expert = (a - b) / 0.375, row = a - 1.5 * expert;
  EXPECT_GT(expert, 0);
  EXPECT_GT(row, 0);
  EXPECT_NEAR(w(100000) - w(1), 6 * expert + 99999 * row, 1e-9 * w(100000));
  EXPECT_DOUBLE_EQ((*m)->EstimateStepCost({})->weight_bytes, 0);
}

TEST(V4Cost, BadShapesAreRejected) {
  auto m = V4Model::Load(test_support::FixtureDir("v4_mixed"));
  ASSERT_TRUE(m.ok());
  for (ChunkShape bad : {ChunkShape{-1, 1, 1}, ChunkShape{0, -1, 0}, ChunkShape{0, 2, 3}, ChunkShape{0, 1, -1}})
    EXPECT_EQ((*m)->EstimateStepCost(std::span(&bad, 1)).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer::model
