#include "engine/cost_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace deepinfer::engine {
namespace {

constexpr size_t kWindow = 512;  // observed steps kept beside the calibration profile
constexpr int64_t kRefitEvery = 16;
constexpr double kTokensScale = 256.0;  // the tokens feature is tokens / kTokensScale

}  // namespace

std::array<double, CostModel::kFeatures> CostModel::Features(const StepShape& s) {
  // Scaled so the normal equations are well conditioned (all features near 1 for a typical step).
  return {1.0, s.tokens / kTokensScale, s.logit_rows / 16.0, s.context / 1e6, s.chunks / 16.0};
}

int CostModel::Kind(const StepShape& s) { return (s.chunks > 1 ? 2 : 0) + (s.tokens > s.chunks ? 1 : 0); }

double CostModel::Predict(const StepShape& shape) const {
  const auto x = Features(shape);
  double y = 0;
  for (int i = 0; i < kFeatures; ++i) y += theta_[i] * x[i];
  return y;
}

void CostModel::Observe(const StepShape& shape, double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  const int kind = Kind(shape);
  // The oldest calibration sample of this kind gives way: measured at start-up (other load, cold caches,
  // scratch sequences), it would otherwise bias every fit of the shapes this step now speaks for.
  const auto profile_end = samples_.begin() + static_cast<long>(calibration_samples_);
  const auto displaced =
      std::find_if(samples_.begin(), profile_end, [&](const Sample& s) { return s.kind == kind; });
  if (displaced != profile_end) {
    samples_.erase(displaced);
    --calibration_samples_;
  }
  samples_.push_back({Features(shape), seconds, kind});
  while (samples_.size() > calibration_samples_ + kWindow) samples_.erase(samples_.begin() + static_cast<long>(calibration_samples_));
  // Every sample while there are few (a start-up profile is shorter than kRefitEvery steps: its fit would
  // otherwise be its first step's alone), then every kRefitEvery.
  if (!fitted_ || samples_.size() <= static_cast<size_t>(kRefitEvery) || ++since_fit_ >= kRefitEvery) Refit();
}

// Least squares of the relative error (each sample weighted 1 / y²) with non-negative coefficients, by an
// active set: solve the ridge-regularised normal equations over the free features, drop the most negative,
// repeat (at most kFeatures rounds). Relative, because the shapes the scheduler asks about most (decode
// batches and decodes beside a chunk) are the short steps: fitted for absolute error, the few long prefill
// steps would own the fit, their noise worth many decode steps, and a decode step predicted tens of percent
// too slow makes its derived latency target as much too loose.
void CostModel::Refit() {
  since_fit_ = 0;
  if (samples_.empty()) return;
  std::array<bool, kFeatures> active;
  active.fill(true);
  // A feature with the same value in every sample cannot be told from the intercept (a calibration cut
  // short by a slow machine has one chunk and one logits row in every step): the system is singular along
  // it and its solved coefficient is arbitrary, so a shape outside the samples (a batch of decodes) would be
  // predicted many times too slow. It is left out; its cost stays in the intercept until the samples vary it.
  for (int i = 1; i < kFeatures; ++i) {
    active[i] = std::any_of(samples_.begin(), samples_.end(),
                            [&](const Sample& s) { return s.x[i] != samples_.front().x[i]; });
  }
  // The weights are scaled by the median step's (the same fit; the ridge keeps its size relative to the
  // samples' sums whether steps take microseconds or seconds). A step measured at 0 s (a coarse clock) is
  // weighted as one of kShortestStep.
  constexpr double kShortestStep = 1e-6;
  std::vector<double> weights;
  weights.reserve(samples_.size());
  for (const Sample& s : samples_) weights.push_back(std::max(s.y, kShortestStep));
  std::vector<double> sorted = weights;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
  const double median = sorted[sorted.size() / 2];
  for (double& w : weights) w = (median / w) * (median / w);
  std::array<double, kFeatures> theta{};
  for (int round = 0; round < kFeatures; ++round) {
    double a[kFeatures][kFeatures + 1] = {};
    for (size_t k = 0; k < samples_.size(); ++k) {
      const Sample& s = samples_[k];
      const double w = weights[k];
      for (int i = 0; i < kFeatures; ++i) {
        if (!active[i]) continue;
        for (int j = 0; j < kFeatures; ++j) {
          if (active[j]) a[i][j] += w * s.x[i] * s.x[j];
        }
        a[i][kFeatures] += w * s.x[i] * s.y;
      }
    }
    for (int i = 0; i < kFeatures; ++i) {
      if (active[i]) a[i][i] += 1e-9 + 1e-6 * a[i][i];
      else a[i][i] = 1, a[i][kFeatures] = 0;
    }
    // Gaussian elimination with partial pivoting on the 5×5 system.
    for (int c = 0; c < kFeatures; ++c) {
      int p = c;
      for (int r = c + 1; r < kFeatures; ++r) {
        if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
      }
      for (int k = 0; k <= kFeatures; ++k) std::swap(a[c][k], a[p][k]);
      if (std::abs(a[c][c]) < 1e-300) continue;
      for (int r = 0; r < kFeatures; ++r) {
        if (r == c) continue;
        const double f = a[r][c] / a[c][c];
        for (int k = c; k <= kFeatures; ++k) a[r][k] -= f * a[c][k];
      }
    }
    for (int i = 0; i < kFeatures; ++i) theta[i] = std::abs(a[i][i]) < 1e-300 ? 0 : a[i][kFeatures] / a[i][i];
    int worst = -1;
    for (int i = 0; i < kFeatures; ++i) {
      if (active[i] && theta[i] < 0 && (worst < 0 || theta[i] < theta[worst])) worst = i;
    }
    if (worst < 0) break;
    active[worst] = false;
    theta[worst] = 0;
  }
  for (double& t : theta) t = std::max(t, 0.0);
  theta_ = theta;
  fitted_tokens_ = 0;
  for (const Sample& s : samples_) fitted_tokens_ = std::max(fitted_tokens_, s.x[1] * kTokensScale);
  fitted_ = true;
}

int64_t CostModel::SolveChunk(const StepShape& base, int64_t start, int64_t max_tokens, int64_t finish_at,
                              double target_seconds) const {
  auto predicted = [&](int64_t n) {
    StepShape s = base;
    s.AddChunk(start, n, n == finish_at);
    return Predict(s);
  };
  if (max_tokens <= 0 || predicted(1) > target_seconds) return 0;
  if (predicted(max_tokens) <= target_seconds) return max_tokens;
  // The prediction grows with n (non-negative coefficients): bisect.
  int64_t lo = 1, hi = max_tokens;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (predicted(mid) <= target_seconds) lo = mid;
    else hi = mid;
  }
  return lo;
}

double DerivedTbtTargetSeconds(const CostModel& model, const StepShape& decode) {
  constexpr double kSlack = 1.5;
  if (!model.ready() || decode.chunks == 0) return 0;
  StepShape floor;
  for (int i = 0; i < 8; ++i) floor.AddChunk(1024, 1, true);
  return kSlack * std::max(model.Predict(decode), model.Predict(floor));
}

bool RecomputeRatherThanRead(const CostModel& model, int64_t start, int64_t tokens, double read_seconds) {
  constexpr double kReadWorth = 2;  // a read is kept while at most this many times the recomputation
  if (!model.ready() || tokens <= 0) return false;
  const double sampled = std::floor(model.fitted_tokens());
  StepShape prefill;
  double recompute;
  if (static_cast<double>(tokens) <= sampled) {
    prefill.AddChunk(start, tokens, true);
    recompute = model.Predict(prefill);
  } else if (sampled >= 1) {
    prefill.AddChunk(start, static_cast<int64_t>(sampled), true);
    recompute = model.Predict(prefill) * static_cast<double>(tokens) / sampled;
  } else {
    return false;
  }
  return read_seconds > kReadWorth * recompute;
}

}  // namespace deepinfer::engine
