// The shared model core on its own, beside the fixtures that check it inside both families: which rows a
// batch's logits come from, the sink softmax, the compressors' gated pooling, the mHC collapse and expand,
// and the expert dispatch: its two places for the routing weight, and its decode-sized path.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
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

// Random BF16 values of magnitude in [2^-7, 2^-6), or FP8 blocks with fp32 scales that are not powers of
// two (so the kernels take their general FP8 decode) and a partial last block when `out` is not a multiple
// of 128.
struct RandomWeight {
  std::vector<uint8_t> data, scales;
  kernels::WeightView view;
};

RandomWeight MakeRandomWeight(kernels::WeightFormat format, int64_t out, int64_t in, std::mt19937& rng) {
  RandomWeight r;
  r.view.format = format;
  r.view.out_features = out;
  r.view.in_features = in;
  // Each draw gives two BF16 values or four FP8 bytes.
  if (format == kernels::WeightFormat::kBF16) {
    std::vector<uint32_t> pairs(static_cast<size_t>((out * in + 1) / 2));
    for (uint32_t& p : pairs) p = 0x3C003C00u | (static_cast<uint32_t>(rng()) & 0x807F807Fu);
    r.data.resize(static_cast<size_t>(out * in * 2));
    std::memcpy(r.data.data(), pairs.data(), r.data.size());
  } else {
    std::vector<uint32_t> quads(static_cast<size_t>((out * in + 3) / 4));
    for (uint32_t& q : quads) q = static_cast<uint32_t>(rng());
    r.data.resize(static_cast<size_t>(out * in));
    std::memcpy(r.data.data(), quads.data(), r.data.size());
    for (uint8_t& b : r.data) {
      if ((b & 0x7F) == 0x7F) b ^= 1;  // no NaN codes
    }
    const int64_t blocks = ((out + 127) / 128) * ((in + 127) / 128);
    std::uniform_real_distribution<float> scale(0.001f, 0.01f);
    r.scales.resize(static_cast<size_t>(blocks * 4));
    for (int64_t i = 0; i < blocks; ++i) {
      const float v = scale(rng);
      std::memcpy(r.scales.data() + i * 4, &v, 4);
    }
    r.view.scale_format = kernels::ScaleFormat::kF32;
    r.view.scales = r.scales.data();
  }
  r.view.data = r.data.data();
  return r;
}

TEST(ModelCore, OneRowExpertDispatchIsBitIdenticalToTheBatchedOne) {
  // The shared expert and experts 1 and 5 large enough that the decode-sized path cuts their products into
  // several units (about 512 KiB of gate and as much of up per unit: 600 rows of 1,024 inputs are BF16 units
  // of 256, 256 and 88 rows, FP8 units of 512 and 88 rows, the last a partial FP8 block; BF16 down rows of 600
  // inputs: units of 880 and 144 rows); the others small. Row 0 runs alone (every expert one row: that path) and beside a second row
  // that shares an expert (the batched path); row 0's output must be the same bits. Then rows 0 and 1 with
  // no expert in common (that path, the shared expert over two rows) against the same rows beside a third.
  const int64_t d = 1024, experts = 8, k = 3;
  auto inter_of = [&](int64_t e) -> int64_t { return e == 1 || e == 5 || e == experts ? 600 : 40; };
  ThreadPool pool(4);
  for (const kernels::WeightFormat format : {kernels::WeightFormat::kBF16, kernels::WeightFormat::kFP8Block}) {
    std::mt19937 rng(7);
    std::vector<RandomWeight> storage;
    for (int64_t e = 0; e <= experts; ++e) {
      storage.push_back(MakeRandomWeight(format, inter_of(e), d, rng));
      storage.push_back(MakeRandomWeight(format, d, inter_of(e), rng));
      storage.push_back(MakeRandomWeight(format, inter_of(e), d, rng));
    }
    ExpertSetWeights set;
    for (int64_t e = 0; e <= experts; ++e) {
      const ExpertWeights w{storage[3 * e].view, storage[3 * e + 1].view, storage[3 * e + 2].view};
      if (e < experts) set.experts.push_back(w);
      else set.shared = w;
    }
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(3 * d));
    for (float& v : x) v = normal(rng);
    // Rows 0 and 1 share no expert; row 2 shares expert 5 with row 0.
    const int32_t chosen[] = {5, 1, 6, 0, 2, 7, 3, 5, 4};
    const float weights[] = {0.7f, 1.3f, 0.4f, 0.9f, 0.5f, 1.1f, 0.6f, 0.8f, 1.2f};
    // V3's dispatch, and V4.1's (clamped SwiGLU, the weight on the activation).
    for (const ExpertDispatch& dispatch : {ExpertDispatch{0.0f, RoutingWeightAt::kCombine, {}},
                                           ExpertDispatch{0.5f, RoutingWeightAt::kActivation, {}}}) {
      ScopedPhase phase(Phase::kMoeGate);
      std::vector<float> alone(static_cast<size_t>(d)), pair(static_cast<size_t>(2 * d)),
          shared_pair(static_cast<size_t>(2 * d)), three(static_cast<size_t>(3 * d));
      DispatchExperts(set, dispatch, x.data(), 1, d, chosen, weights, k, pool, phase, alone.data());
      DispatchExperts(set, dispatch, x.data(), 2, d, chosen, weights, k, pool, phase, pair.data());
      // Rows 0 and 2 (expert 5 twice): the batched path.
      std::vector<float> x02(x.begin(), x.begin() + d);
      x02.insert(x02.end(), x.begin() + 2 * d, x.end());
      const int32_t chosen02[] = {5, 1, 6, 3, 5, 4};
      const float weights02[] = {0.7f, 1.3f, 0.4f, 0.6f, 0.8f, 1.2f};
      DispatchExperts(set, dispatch, x02.data(), 2, d, chosen02, weights02, k, pool, phase, shared_pair.data());
      DispatchExperts(set, dispatch, x.data(), 3, d, chosen, weights, k, pool, phase, three.data());
      const std::string where = std::string(format == kernels::WeightFormat::kBF16 ? "BF16" : "FP8") +
                                (dispatch.weight_at == RoutingWeightAt::kCombine ? " combine" : " activation");
      for (int64_t t = 0; t < d; ++t) {
        ASSERT_TRUE(std::isfinite(alone[t])) << where;
        ASSERT_EQ(alone[t], shared_pair[t]) << where << " output " << t;
        ASSERT_EQ(pair[t], three[t]) << where << " row 0 output " << t;
        ASSERT_EQ(pair[d + t], three[d + t]) << where << " row 1 output " << t;
        ASSERT_EQ(alone[t], pair[t]) << where << " output " << t;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::model
