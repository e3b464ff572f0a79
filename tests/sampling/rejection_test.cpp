// Rejection sampling of speculative drafts: the token it returns is distributed as the target's p, for a
// draft distribution q that is spread out and for a deterministic (one-hot) draft, as the general rule
// (AcceptOrResample) and as the sampler runs it at a verify position (SampleInputs::draft). Each check is a
// chi-square goodness-of-fit test over 10^5 draws at the 1% level (p > 0.01 passes).
#include "sampling/rejection.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "sampling/sampler.h"

namespace deepinfer::sampling {
namespace {

constexpr int kDraws = 100000;

// Upper 1% quantile of chi-square with df degrees of freedom by Wilson-Hilferty (z = 2.3263); for df = 5 it
// gives 15.09 (tables: 15.086), for df = 3 11.35 (tables: 11.345).
double ChiSquareCritical1(int df) {
  const double z = 2.3263, a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

// The statistic of `counts` against the probabilities `expected` (zero-probability ids must have no count).
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& expected, int* df) {
  double chi2 = 0;
  *df = -1;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "id " << i << " has probability 0";
      continue;
    }
    const double e = expected[i] * kDraws;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++*df;
  }
  return chi2;
}

TEST(RejectionSampling, AnyDraftDistributionGivesTheTarget) {
  // p and q chosen by hand to differ everywhere (q puts mass where p has none, and the other way round).
  const std::vector<double> p = {0.30, 0.05, 0.25, 0.00, 0.15, 0.25};
  const std::vector<double> q = {0.10, 0.40, 0.10, 0.20, 0.20, 0.00};
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::discrete_distribution<int> draft(q.begin(), q.end());
  std::vector<int> counts(p.size(), 0);
  int accepted = 0;
  for (int i = 0; i < kDraws; ++i) {
    const int x = draft(rng);
    const int32_t token = AcceptOrResample(p, q, x, u(rng), u(rng));
    accepted += token == x;
    ++counts[static_cast<size_t>(token)];
  }
  int df = 0;
  const double chi2 = ChiSquare(counts, p, &df);
  EXPECT_EQ(df, 4);
  EXPECT_LT(chi2, ChiSquareCritical1(df));
  // The acceptance rate is Σ min(p, q) = 0.10 + 0.05 + 0.10 + 0 + 0.15 + 0 = 0.40 (sd ≈ 0.0015).
  EXPECT_NEAR(static_cast<double>(accepted) / kDraws, 0.40, 0.01);
}

TEST(RejectionSampling, OneHotDraftsGiveTheTarget) {
  const std::vector<double> p = {0.5, 0.2, 0.2, 0.1};
  std::mt19937_64 rng(777);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int32_t x = 0; x < 4; ++x) {
    std::vector<double> q(4, 0.0);
    q[static_cast<size_t>(x)] = 1;
    std::vector<int> counts(p.size(), 0);
    for (int i = 0; i < kDraws; ++i) ++counts[static_cast<size_t>(AcceptOrResample(p, q, x, u(rng), u(rng)))];
    int df = 0;
    const double chi2 = ChiSquare(counts, p, &df);
    EXPECT_LT(chi2, ChiSquareCritical1(df)) << "draft " << x;
  }
}

// The sampler at a verify position: temperature and min-p processed logits as p, a draft token inside the
// kept set and one outside it (never accepted: every draw is the residual, which is p itself).
TEST(RejectionSampling, SamplerVerifyPositionsGiveTheProcessedDistribution) {
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 0.7f, -1.5f};
  for (const auto& [min_p, draft] : std::vector<std::pair<double, int32_t>>{{0, 3}, {0.1, 1}, {0.1, 5}}) {
    SamplingParams params;
    params.temperature = 0.8;
    params.min_p = min_p;
    // p by hand: softmax(logits / 0.8) over all ids, or with min-p 0.1 over the ids whose weight relative to
    // the largest is at least 0.1: (l − 2) / 0.8 ≥ ln 0.1, l ≥ 0.158: ids 0, 1, 3, 4.
    std::vector<double> p(logits.size(), 0.0);
    double total = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      const bool kept = min_p == 0 || i == 3 || i == 0 || i == 4 || i == 1;
      if (kept) total += p[i] = std::exp(logits[i] / 0.8);
    }
    for (double& v : p) v /= total;
    Sampler sampler;
    std::vector<int> counts(logits.size(), 0);
    int accepted = 0;
    for (int i = 0; i < kDraws; ++i) {
      SampleInputs in;
      in.params = &params;
      in.draw = {.seed = 4242, .stream = 0, .sequence = 0, .position = i};
      in.draft = draft;
      auto token = sampler.Sample(logits, in);
      ASSERT_TRUE(token.ok());
      accepted += token->id == draft;
      ++counts[static_cast<size_t>(token->id)];
    }
    int df = 0;
    const double chi2 = ChiSquare(counts, p, &df);
    EXPECT_LT(chi2, ChiSquareCritical1(df)) << "min_p " << min_p << " draft " << draft;
    // A one-hot draft is accepted with probability p(draft) (binomial sd below 0.0016).
    EXPECT_NEAR(static_cast<double>(accepted) / kDraws, p[static_cast<size_t>(draft)], 0.008);
  }
}

}  // namespace
}  // namespace deepinfer::sampling
