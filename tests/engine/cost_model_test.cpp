// The derived latency target (EngineOptions::kDerivedTbtTarget) on a cost model fitted to a known machine:
// every step costs 10 ms plus 1 ms per token, whatever its context, logits rows or chunks. Also the fit of a
// start-up profile that a slow machine cut short, a fit that a few noisy prefill steps must not own, and a
// profile whose steps the machine's own steps displace kind by kind.
#include "engine/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace deepinfer::engine {
namespace {

double MachineSeconds(const StepShape& s) { return 0.010 + 0.001 * s.tokens; }

CostModel Fitted() {
  CostModel m;
  // Shapes that vary every feature independently, so that the fit can tell them apart.
  for (int64_t streams : {1, 3, 8, 16}) {
    for (int64_t start : {0, 700, 3000}) {
      for (int64_t prefill : {0, 64, 512}) {
        StepShape s;
        for (int64_t i = 0; i < streams; ++i) s.AddChunk(start + 50 * i, 1, true);
        if (prefill > 0) s.AddChunk(start / 2, prefill, false);
        m.Observe(s, MachineSeconds(s));
      }
    }
  }
  return m;
}

StepShape Decode(int streams) {
  StepShape s;
  for (int i = 0; i < streams; ++i) s.AddChunk(1024, 1, true);
  return s;
}

TEST(CostModel, DerivedTargetIsOneAndAHalfDecodeStepsOfTheRunningStreams) {
  const CostModel m = Fitted();
  ASSERT_TRUE(m.ready());
  EXPECT_NEAR(m.Predict(Decode(16)), 0.026, 1e-4);  // 10 ms + 16 × 1 ms
  // Nobody decodes: no target (fixed chunks).
  EXPECT_EQ(DerivedTbtTargetSeconds(m, StepShape{}), 0);
  // 16 streams: 1.5 × 26 ms.
  EXPECT_NEAR(DerivedTbtTargetSeconds(m, Decode(16)), 0.039, 2e-4);
  // 2 streams: the floor of 8 streams, 1.5 × 18 ms.
  EXPECT_NEAR(DerivedTbtTargetSeconds(m, Decode(2)), 0.027, 2e-4);
  // Beside 16 streams a prompt gets half a decode step: 13 ms of 1 ms tokens.
  const int64_t chunk =
      m.SolveChunk(Decode(16), 0, 512, -1, DerivedTbtTargetSeconds(m, Decode(16)));
  EXPECT_GE(chunk, 12);
  EXPECT_LE(chunk, 13);
  EXPECT_EQ(DerivedTbtTargetSeconds(CostModel{}, Decode(16)), 0);  // not calibrated: fixed chunks
}

TEST(CostModel, ACalibrationCutShortPredictsADecodeBatchFromAllItsSteps) {
  // A slow machine stops the start-up profile after its single-sequence steps (a chunk of 512 and one of
  // 64, two decodes): one chunk and one logits row each, so those features cannot be told from the
  // intercept. The fit is of all four steps and leaves those two features out: 16 streams cost 10 ms +
  // 16 × 1 ms, not a multiple of the intercept per stream.
  CostModel m;
  const std::pair<int64_t, int64_t> steps[] = {{0, 512}, {512, 64}, {576, 1}, {577, 1}};
  for (const auto& [start, n] : steps) {
    StepShape s;
    s.AddChunk(start, n, true);
    m.Observe(s, MachineSeconds(s));
  }
  m.EndCalibration();
  EXPECT_NEAR(m.coefficients()[0], 0.010, 1e-4);
  EXPECT_NEAR(m.coefficients()[1], 0.256, 1e-3);  // per 256 tokens
  EXPECT_EQ(m.coefficients()[2], 0);              // logits rows: never varied
  EXPECT_EQ(m.coefficients()[4], 0);              // chunks: never varied
  EXPECT_NEAR(m.Predict(Decode(16)), 0.026, 1e-3);
  EXPECT_NEAR(DerivedTbtTargetSeconds(m, Decode(16)), 0.039, 2e-3);
}

TEST(CostModel, AFewSlowOrFastPrefillStepsLeaveTheDecodeStepsPredictedWithinTheirShare) {
  // The known machine's decode steps (1 to 14 streams at contexts up to 30K: 140 steps, exact) beside four
  // huge prefill steps that the machine's other load made 25% slower (4096 tokens) or faster (1024 tokens).
  // No line fits those four, and fitted for absolute error their seconds of residual outweigh every decode
  // step's milliseconds. Fitted for relative error, the weighted squared error of the fit is at most that of
  // the machine's own coefficients, whose residuals are the prefill steps' alone: each at most
  // e / (1 - e) = 1/3 relative (e = 0.25), weighted alike (the weights are each sample's inverse square,
  // times one constant). So the decode steps' squared relative errors sum to at most 4 × (1/3)², and their
  // root mean square over 140 steps is at most sqrt(4 / 140) / 3 = 5.6%.
  CostModel m;
  // The model refits every 16 steps: the 144 steps are all in its last fit.
  for (const auto& [tokens, load] : {std::pair{4096, 1.25}, {1024, 0.75}, {4096, 1.25}, {1024, 0.75}}) {
    StepShape s;
    s.AddChunk(0, tokens, true);
    m.Observe(s, MachineSeconds(s) * load);
  }
  std::vector<StepShape> decodes;
  for (int64_t streams = 1; streams <= 14; ++streams) {
    for (int64_t start : {100, 600, 1500, 3000, 5000, 8000, 12000, 16000, 20000, 30000}) {
      StepShape s;
      for (int64_t i = 0; i < streams; ++i) s.AddChunk(start + 10 * i, 1, true);
      decodes.push_back(s);
      m.Observe(s, MachineSeconds(s));
    }
  }
  double squares = 0;
  for (const StepShape& s : decodes) {
    const double relative = m.Predict(s) / MachineSeconds(s) - 1;
    squares += relative * relative;
  }
  const double bound = std::sqrt(4.0 / static_cast<double>(decodes.size())) / 3;
  EXPECT_LE(std::sqrt(squares / static_cast<double>(decodes.size())), bound);
}

TEST(CostModel, ObservedStepsDisplaceTheProfileStepsOfTheirKindAndOnlyThose) {
  // A start-up profile on the known machine whose three 8-sequence decode steps ran twice as slow (other
  // load at start-up), beside its single-sequence steps (a chunk of 512 and one of 64, two decodes), exact.
  CostModel m;
  const std::pair<int64_t, int64_t> single[] = {{0, 512}, {512, 64}, {576, 1}, {577, 1}};
  for (const auto& [start, n] : single) {
    StepShape s;
    s.AddChunk(start, n, true);
    m.Observe(s, MachineSeconds(s));
  }
  for (int64_t start : {0, 1, 2}) {
    StepShape s;
    for (int i = 0; i < 8; ++i) s.AddChunk(start, 1, true);
    m.Observe(s, 2 * MachineSeconds(s));
  }
  m.EndCalibration();
  ASSERT_EQ(m.calibration_samples(), 7);
  // Real decode batches of 9 to 16 streams, exact: each displaces one slow profile step, and once all three
  // are gone every sample is the machine's own, so the fit is exact: 16 streams cost 10 ms + 16 × 1 ms.
  // (Kept, the slow steps would pull a multi-sequence decode's prediction above the machine's.)
  for (int streams = 9; streams <= 16; ++streams) {
    StepShape s;
    for (int i = 0; i < streams; ++i) s.AddChunk(1024 + 3 * streams, 1, true);
    m.Observe(s, MachineSeconds(s));
    EXPECT_EQ(m.calibration_samples(), 7 - std::min(streams - 8, 3));
  }
  EXPECT_NEAR(m.Predict(Decode(16)), 0.026, 2e-4);
  // Kinds the real steps never had stay: after the window has rolled over many times the profile's
  // single-sequence steps are still there, its chunk of 512 among them (a prefill of 512 costs 522 ms).
  for (int i = 0; i < 2000; ++i) m.Observe(Decode(8 + i % 9), MachineSeconds(Decode(8 + i % 9)));
  EXPECT_EQ(m.calibration_samples(), 4);
  EXPECT_EQ(m.fitted_tokens(), 512);
  StepShape prefill;
  prefill.AddChunk(0, 512, true);
  EXPECT_NEAR(m.Predict(prefill), 0.522, 2e-3);
  // A real single-sequence prompt step displaces one of those two prompt steps (the oldest: the 512).
  StepShape chunk;
  chunk.AddChunk(0, 100, true);
  m.Observe(chunk, MachineSeconds(chunk));
  EXPECT_EQ(m.calibration_samples(), 3);
}

// The tier's choice on the known machine: 384 tokens cost 394 ms to recompute, so a read is kept up to
// twice that (a recomputation stalls every stream in the step; a read only its own sequence).
TEST(CostModel, TheTierReadIsKeptUnlessRecomputingIsPredictedAtMostHalfIt) {
  const CostModel m = Fitted();
  EXPECT_FALSE(RecomputeRatherThanRead(m, 0, 384, 0.010));
  EXPECT_FALSE(RecomputeRatherThanRead(m, 0, 384, 0.700));  // slower than 394 ms, but not twice
  EXPECT_TRUE(RecomputeRatherThanRead(m, 0, 384, 0.800));
  EXPECT_FALSE(RecomputeRatherThanRead(CostModel{}, 0, 384, 1e6));  // no fit: read
}

TEST(CostModel, AFitOfDecodesAlonePricesAPrefillAsItsStepsScaledByTokens) {
  // One decode step observed (11 ms): the fit is its intercept, which prices every shape at 11 ms, a
  // 384-token prefill too (394 ms on this machine). The tier prices that recomputation as 384 such steps
  // (4.2 s), so a read of 30 ms is kept.
  CostModel m;
  m.Observe(Decode(1), MachineSeconds(Decode(1)));
  ASSERT_TRUE(m.ready());
  StepShape prefill;
  prefill.AddChunk(0, 384, true);
  EXPECT_NEAR(m.Predict(prefill), 0.011, 1e-4);
  EXPECT_FALSE(RecomputeRatherThanRead(m, 0, 384, 0.030));
  EXPECT_FALSE(RecomputeRatherThanRead(m, 0, 384, 8.0));  // 4.2 s × 2 > 8 s
  EXPECT_TRUE(RecomputeRatherThanRead(m, 0, 384, 9.0));
}

}  // namespace
}  // namespace deepinfer::engine
