#include "sampling/sampler.h"
#include "support/sanitizer_scale.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

namespace deepinfer::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> RandomLogits(int n, uint32_t seed, float lo = -3, float hi = 3) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// The documented selection, written out the slow way: sort by (scaled logit desc, id asc), cut by top-k,
// by the smallest prefix reaching top_p of the mass, by min_p relative to the best, then normalise. Works in
// double with libm's exp, independently of the sampler's radix select and float exponential.
std::vector<double> ReferenceDistribution(const std::vector<float>& processed, const SamplingParams& p) {
  const size_t n = processed.size();
  std::vector<double> s(n);
  std::vector<int> order;
  for (size_t i = 0; i < n; ++i) {
    s[i] = static_cast<double>(processed[i] / static_cast<float>(p.temperature));
    if (processed[i] != kNegInf) order.push_back(static_cast<int>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < order.size()) order.resize(static_cast<size_t>(p.top_k));
  const double max = s[order[0]];
  std::vector<double> w(n, 0.0);
  for (int i : order) w[i] = std::exp(s[i] - max);
  if (p.top_p < 1) {
    double total = 0;
    for (int i : order) total += w[i];
    double cum = 0;
    size_t keep = 0;
    while (keep < order.size() && cum < p.top_p * total) cum += w[order[keep++]];
    for (size_t j = keep; j < order.size(); ++j) w[order[j]] = 0;
  }
  for (double& x : w) {
    if (x < p.min_p) x = 0;
  }
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= total;
  return w;
}

// Upper 1e-4 quantile of chi-square with df degrees of freedom (Wilson-Hilferty).
double ChiSquareCritical(int df) {
  const double z = 3.719;
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

// Samples `draws` times (consecutive positions) and checks the counts against the reference: never a
// token of probability 0, and a chi-square statistic below its 1e-4 quantile. Under the sanitizers a quarter
// of the draws (every kept token still expects dozens of draws, so the statistic stays valid; the Release
// pass keeps the full power).
void ExpectDistribution(const std::vector<float>& logits, const SamplingParams& params, const SampleInputs& base,
                        int draws, const std::vector<float>* processed_override = nullptr) {
  draws = test_support::RoundsForThisBuild(draws, draws / 4);
  std::vector<float> processed = logits;
  ApplyLogitProcessors(processed, base);
  if (processed_override) processed = *processed_override;
  const std::vector<double> expected = ReferenceDistribution(processed, params);
  std::vector<int> counts(logits.size(), 0);
  Sampler sampler;
  for (int i = 0; i < draws; ++i) {
    SampleInputs in = base;
    in.params = &params;
    in.draw = {.seed = 987654321, .stream = 0, .sequence = 0, .position = i};
    auto token = sampler.Sample(logits, in);
    ASSERT_TRUE(token.ok()) << token.status().message();
    ++counts[static_cast<size_t>(token->id)];
  }
  double chi2 = 0;
  int df = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " is outside the kept set";
      continue;
    }
    const double e = expected[i] * draws;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++df;
  }
  ASSERT_GT(df, 0);
  EXPECT_LT(chi2, ChiSquareCritical(df)) << "df=" << df;
}

SamplingParams Params(double temperature, int64_t top_k = 0, double top_p = 1, double min_p = 0) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  return p;
}

TEST(SamplerDistribution, PlainSoftmax) {
  SamplingParams p = Params(1.0);
  ExpectDistribution(RandomLogits(16, 1), p, {.params = &p}, 40000);
}

TEST(SamplerDistribution, Temperature) {
  SamplingParams cold = Params(0.5), hot = Params(2.0);
  ExpectDistribution(RandomLogits(16, 2), cold, {.params = &cold}, 40000);
  ExpectDistribution(RandomLogits(16, 2), hot, {.params = &hot}, 40000);
}

TEST(SamplerDistribution, TopK) {
  SamplingParams p = Params(2.0, 5);
  ExpectDistribution(RandomLogits(16, 3), p, {.params = &p}, 40000);
}

TEST(SamplerDistribution, TopP) {
  SamplingParams p = Params(1.0, 0, 0.7);
  ExpectDistribution(RandomLogits(16, 4), p, {.params = &p}, 40000);
}

TEST(SamplerDistribution, MinP) {
  SamplingParams p = Params(1.0, 0, 1.0, 0.2);
  ExpectDistribution(RandomLogits(16, 5), p, {.params = &p}, 40000);
}

TEST(SamplerDistribution, AllFiltersTogether) {
  SamplingParams p = Params(0.8, 10, 0.9, 0.05);
  ExpectDistribution(RandomLogits(24, 6), p, {.params = &p}, 40000);
}

TEST(SamplerDistribution, UnderAMask) {
  SamplingParams p = Params(1.0);
  TokenBitmask mask(40);  // spans two words, the second partly
  mask.DisallowAll();
  for (int32_t id = 0; id < 40; id += 3) mask.Allow(id);
  ExpectDistribution(RandomLogits(40, 7), p, {.params = &p, .allowed = &mask}, 40000);
}

TEST(SamplerDistribution, TopPOverClusteredLogitsUsesEveryRadixPass) {
  // 3000 logits within 0.3 of 1.0 share the top 11 bits of their keys: the boundary is found in the later
  // passes. top_p = 0.05 keeps about 150 tokens.
  std::vector<float> logits(3000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 1.0f + 1e-4f * static_cast<float>((i * 7919) % 3000);
  SamplingParams p = Params(1.0, 0, 0.05);
  ExpectDistribution(logits, p, {.params = &p}, 30000);
}

TEST(SamplerDistribution, TopKTiesKeepTheLowestIds) {
  std::vector<float> logits(10, 0.5f);
  SamplingParams p = Params(1.0, 3);
  ExpectDistribution(logits, p, {.params = &p}, 9000);
}

TEST(Sampler, GreedyTakesTheLowestIdAmongEqualMaxima) {
  SamplingParams p = Params(0.0);
  Sampler sampler;
  std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
  auto t = sampler.Sample(logits, {.params = &p});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->id, 1);
  p.temperature = kGreedyTemperature / 2;  // below the greedy threshold
  EXPECT_EQ(sampler.Sample(logits, {.params = &p})->id, 1);
  SamplingParams top1 = Params(1.0, 1);  // top_k = 1 is greedy too, whatever the draw
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sampler.Sample(logits, {.params = &top1, .draw = {.position = i}})->id, 1);
}

TEST(Sampler, LogitBiasIsAddedBeforeSelection) {
  // Hand-derived: [1, 2, 3] + {0: +5, 2: -1.5} = [6, 2, 1.5].
  SamplingParams p = Params(0.0);
  p.logit_bias = {{0, 5.0f}, {2, -1.5f}};
  std::vector<float> row = {1, 2, 3};
  ApplyLogitProcessors(row, {.params = &p});
  EXPECT_EQ(row, (std::vector<float>{6, 2, 1.5f}));
  Sampler sampler;
  EXPECT_EQ(sampler.Sample(std::vector<float>{1, 2, 3}, {.params = &p})->id, 0);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  // Prompt {0, 2}, output {3}; penalty 2: token 0 (2.0 → 1.0), token 2 (-1.0 → -2.0), token 3 (0.5 → 0.25),
  // token 1 untouched (1.5).
  SamplingParams p = Params(0.0);
  p.repetition_penalty = 2.0;
  TokenCounts counts;
  const std::vector<int32_t> prompt = {0, 2, 0};
  counts.SetPrompt(prompt);
  counts.AddOutput(3);
  std::vector<float> row = {2.0f, 1.5f, -1.0f, 0.5f};
  ApplyLogitProcessors(row, {.params = &p, .counts = &counts});
  EXPECT_EQ(row, (std::vector<float>{1.0f, 1.5f, -2.0f, 0.25f}));
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountOutputTokensOnly) {
  // Output: token 1 three times, token 2 once; token 0 only in the prompt. frequency 0.5, presence 1.0:
  // token 1: 0 - (0.5·3 + 1) = -2.5; token 2: 0 - (0.5·1 + 1) = -1.5; tokens 0 and 3 unchanged.
  SamplingParams p = Params(1.0);
  p.frequency_penalty = 0.5;
  p.presence_penalty = 1.0;
  TokenCounts counts;
  const std::vector<int32_t> prompt = {0};
  counts.SetPrompt(prompt);
  for (int32_t t : {1, 2, 1, 1}) counts.AddOutput(t);
  std::vector<float> row = {0, 0, 0, 0};
  ApplyLogitProcessors(row, {.params = &p, .counts = &counts});
  EXPECT_EQ(row, (std::vector<float>{0, -2.5f, -1.5f, 0}));
}

TEST(Sampler, PenalisedDistributionIsSampledAsDerived) {
  SamplingParams p = Params(1.0);
  p.frequency_penalty = 1.0;
  p.repetition_penalty = 1.5;
  TokenCounts counts;
  const std::vector<int32_t> prompt = {1, 4};
  counts.SetPrompt(prompt);
  counts.AddOutput(4);
  counts.AddOutput(6);
  ExpectDistribution(RandomLogits(8, 8), p, {.params = &p, .counts = &counts}, 40000);
}

TEST(Sampler, BannedTokensAreNeverSampled) {
  SamplingParams p = Params(1.0);
  const std::vector<int32_t> banned = {0, 2};
  ExpectDistribution(RandomLogits(6, 9), p, {.params = &p, .banned = banned}, 20000);
}

TEST(Sampler, NothingAllowedIsAnError) {
  SamplingParams p = Params(1.0);
  TokenBitmask mask(8);
  mask.DisallowAll();
  Sampler sampler;
  auto t = sampler.Sample(RandomLogits(8, 10), {.params = &p, .allowed = &mask});
  EXPECT_EQ(t.status().code(), StatusCode::kFailedPrecondition);
  std::vector<float> nans(8, std::numeric_limits<float>::quiet_NaN());
  EXPECT_FALSE(sampler.Sample(nans, {.params = &p}).ok());
}

TEST(Sampler, NaNLogitsAreNeverSampled) {
  std::vector<float> logits = RandomLogits(8, 11);
  logits[3] = std::numeric_limits<float>::quiet_NaN();
  SamplingParams p = Params(1.0);
  Sampler sampler;
  for (int i = 0; i < 2000; ++i) ASSERT_NE(sampler.Sample(logits, {.params = &p, .draw = {.position = i}})->id, 3);
}

TEST(Sampler, LogprobsAreTheRawLogSoftmax) {
  // softmax([0, ln 2, ln 3]) = [1/6, 2/6, 3/6], whatever the temperature and bias of the selection.
  std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f)};
  SamplingParams p = Params(0.0);
  p.logprobs = true;
  p.top_logprobs = 2;
  p.logit_bias = {{0, 100.0f}};  // selects token 0, which does not change its reported probability
  Sampler sampler;
  auto t = sampler.Sample(logits, {.params = &p});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->id, 0);
  EXPECT_NEAR(t->logprob, std::log(1.0 / 6), 1e-6);
  ASSERT_EQ(t->top.size(), 2u);
  EXPECT_EQ(t->top[0].id, 2);
  EXPECT_NEAR(t->top[0].logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(t->top[1].id, 1);
  EXPECT_NEAR(t->top[1].logprob, std::log(1.0 / 3), 1e-6);
}

TEST(Sampler, TopLogprobsBreakTiesByLowerId) {
  std::vector<float> logits = {1, 2, 2, 2, 0};
  SampledToken t;
  RawLogprobs(logits, 4, 2, &t);
  ASSERT_EQ(t.top.size(), 2u);
  EXPECT_EQ(t.top[0].id, 1);
  EXPECT_EQ(t.top[1].id, 2);
}

TEST(Sampler, SameKeySameTokenWhateverCameBefore) {
  // A token depends on its row and draw key only: interleaving other rows and keys changes nothing.
  const std::vector<float> row = RandomLogits(500, 12);
  SamplingParams p = Params(0.9, 50, 0.95);
  Sampler a, b;
  std::vector<int32_t> first;
  for (int i = 0; i < 100; ++i) first.push_back(a.Sample(row, {.params = &p, .draw = {.seed = 5, .position = i}})->id);
  for (int i = 99; i >= 0; --i) {
    (void)b.Sample(RandomLogits(700, static_cast<uint32_t>(i)), {.params = &p, .draw = {.seed = 6, .position = i}});
    EXPECT_EQ(b.Sample(row, {.params = &p, .draw = {.seed = 5, .position = i}})->id, first[static_cast<size_t>(i)]);
  }
}

TEST(Sampler, ScriptedMaskForcesItsTokens) {
  const std::vector<int32_t> script = {7, 3, 3, 0};
  ScriptedTokensMask mask(script);
  SamplingParams p = Params(1.0);
  Sampler sampler;
  TokenBitmask allowed(16);
  std::vector<int32_t> out;
  while (!mask.Terminated()) {
    bool all = true;
    ASSERT_TRUE(mask.FillAllowed(&allowed, &all).ok());
    ASSERT_FALSE(all);
    auto t = sampler.Sample(RandomLogits(16, static_cast<uint32_t>(out.size())),
                            {.params = &p, .draw = {.position = static_cast<int64_t>(out.size())}, .allowed = &allowed});
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE(mask.Accept(t->id).ok());
    out.push_back(t->id);
  }
  EXPECT_EQ(out, script);
  EXPECT_FALSE(mask.Accept(1).ok());
  ASSERT_TRUE(mask.Rollback(2).ok());
  EXPECT_FALSE(mask.Terminated());
}

TEST(ExpNonPositive, FollowsLibm) {
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.001953125f) {
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(ExpNonPositive(x) - exact) / exact);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(ExpNonPositive(0.0f), 1.0f);
  EXPECT_GT(ExpNonPositive(-1000.0f), 0.0f);
  EXPECT_LT(ExpNonPositive(-1000.0f), 1e-37f);
}

}  // namespace
}  // namespace deepinfer::sampling
