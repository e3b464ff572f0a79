// The shared model core on its own, beside the fixtures that check it inside both families: which rows a
// batch's logits come from, the sink softmax, the compressors' gated pooling, the mHC collapse and expand,
// and the expert dispatch's two places for the routing weight.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "model/causal_lm.h"
#include "model/common/attention.h"
#include "model/common/forward_batch.h"
#include "model/common/hyper_connection.h"
#include "model/common/moe.h"
#include "model/step_profile.h"

namespace deepinfer::model {
namespace {

struct NoState {};

TEST(ModelCore, LogitRowsFollowEachChunksRequest) {
  // Three chunks of 3, 2 and 4 rows laid out one after another.
  std::vector<ChunkRows<NoState>> chunks = {{nullptr, 0, 3, 10, false}, {nullptr, 3, 2, 0, false},
                                            {nullptr, 5, 4, 7, false}};
  const std::vector<int32_t> tokens(4, 1);
  const int32_t rows[] = {0, 2};
  std::vector<SequenceChunk> batch(3);
  batch[0].tokens = std::span(tokens).subspan(0, 3);
  batch[0].logits = LogitsWanted::kAll;
  batch[1].tokens = std::span(tokens).subspan(0, 2);
  batch[1].logits = LogitsWanted::kNone;
  batch[2].tokens = tokens;
  batch[2].logits = LogitsWanted::kRows;
  batch[2].rows = rows;
  ForwardOutput out;
  EXPECT_EQ(PickLogitRows(std::span<const SequenceChunk>(batch), chunks, &out), (std::vector<int64_t>{0, 1, 2, 5, 7}));
  EXPECT_EQ(out.first_row, (std::vector<int64_t>{0, 3, 3}));
  EXPECT_EQ(out.num_rows, (std::vector<int64_t>{3, 0, 2}));
  batch[2].logits = LogitsWanted::kLast;
  EXPECT_EQ(PickLogitRows(std::span<const SequenceChunk>(batch), chunks, &out), (std::vector<int64_t>{0, 1, 2, 8}));
}

TEST(ModelCore, SinkSoftmaxLeavesTheSinkItsShare) {
  const float sinks[] = {0.5f, -INFINITY};
  std::vector<float> logits = {1.0f, 2.0f, 3.0f, 1.0f, 2.0f, 3.0f};
  SinkSoftmax(sinks, 2, 3, logits.data());
  const float den = std::exp(0.5f) + std::exp(1.0f) + std::exp(2.0f) + std::exp(3.0f);
  EXPECT_NEAR(logits[0] + logits[1] + logits[2], 1.0f - std::exp(0.5f) / den, 1e-6f);
  EXPECT_NEAR(logits[3] + logits[4] + logits[5], 1.0f, 1e-6f);  // no sink: a plain softmax
  EXPECT_GT(logits[2], logits[1]);
}

TEST(ModelCore, GatedPoolWithEqualGatesIsTheMean) {
  const float v[] = {1.0f, 2.0f, 6.0f};
  float g[] = {0.25f, 0.25f, 0.25f};
  EXPECT_FLOAT_EQ(GatedPool(v, g, 3), 3.0f);
  float sharp[] = {0.0f, 0.0f, 100.0f};
  EXPECT_NEAR(GatedPool(v, sharp, 3), 6.0f, 1e-5f);
}

TEST(ModelCore, HcCollapseAndExpandMixTheStreams) {
  ThreadPool& pool = ThreadPool::Shared();
  const HcShape s{2, 3, 1e-6, 1e-6, 1};
  // One row, two streams of three values.
  const std::vector<float> streams = {1, 2, 3, 10, 20, 30};
  const float pre[] = {1.0f, 0.5f};
  std::vector<float> collapsed(3);
  HcCollapse(s, pre, streams.data(), 1, collapsed.data(), pool);
  EXPECT_EQ(collapsed, (std::vector<float>{6, 12, 18}));
  // streams ← post ⊗ out + combᵀ · streams: comb swaps the streams, post adds out to the first only.
  const float post[] = {1.0f, 0.0f}, comb[] = {0.0f, 1.0f, 1.0f, 0.0f}, out[] = {100, 200, 300};
  std::vector<float> mixed = streams;
  HcExpand(s, post, comb, out, 1, mixed.data(), pool);
  EXPECT_EQ(mixed, (std::vector<float>{110, 220, 330, 1, 2, 3}));
}

TEST(ModelCore, RoutingWeightScalesTheOutputOrTheActivationAlike) {
  // Experts of width 2 with w1 = w2 = w3 = I: the down projection is exact, so power-of-two routing weights give
  // the same bits whether they scale the activation before it or the expert's output after it.
  const float eye[] = {1, 0, 0, 1};
  kernels::WeightView w;
  w.format = kernels::WeightFormat::kF32;
  w.out_features = 2;
  w.in_features = 2;
  w.data = eye;
  ExpertSetWeights set;
  set.experts = {{w, w, w}, {w, w, w}};
  set.shared = {w, w, w};
  const float x[] = {0.5f, -1.0f, 2.0f, 0.25f};
  const int32_t chosen[] = {1, 0};
  const float weights[] = {2.0f, 0.5f};
  ThreadPool& pool = ThreadPool::Shared();
  std::vector<float> combine(4), activation(4);
  ScopedPhase phase(Phase::kMoeGate);
  DispatchExperts(set, {0, RoutingWeightAt::kCombine, {}}, x, 2, 2, chosen, weights, 1, pool, phase, combine.data());
  DispatchExperts(set, {0, RoutingWeightAt::kActivation, {}}, x, 2, 2, chosen, weights, 1, pool, phase,
                  activation.data());
  for (int i = 0; i < 4; ++i) {
    // shared + weight · expert, each expert SwiGLU(x) = silu(x) · x.
    const float silu = x[i] / (1.0f + std::exp(-x[i])) * x[i];
    EXPECT_NEAR(combine[i], silu + weights[i / 2] * silu, 1e-6f) << i;
    EXPECT_FLOAT_EQ(combine[i], activation[i]) << i;
  }
}

}  // namespace
}  // namespace deepinfer::model
