#include "engine/metrics.h"

#include <algorithm>

namespace deepinfer::engine {

FixedHistogram::FixedHistogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void FixedHistogram::Record(double seconds) {
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin());
  MutexLock lock(&mutex_);
  ++counts_[bucket];
  ++count_;
  sum_ += seconds;
}

HistogramSnapshot FixedHistogram::Snapshot() const {
  MutexLock lock(&mutex_);
  return {bounds_, counts_, count_, sum_};
}

double FixedHistogram::Quantile(double q) const {
  MutexLock lock(&mutex_);
  if (count_ == 0) return 0;
  const double target = q * static_cast<double>(count_);
  double seen = 0;
  for (size_t b = 0; b < counts_.size(); ++b) {
    if (counts_[b] == 0) continue;
    if (seen + static_cast<double>(counts_[b]) >= target) {
      const double lo = b == 0 ? 0 : bounds_[b - 1];
      const double hi = b < bounds_.size() ? bounds_[b] : lo * 2;
      return lo + (hi - lo) * std::clamp((target - seen) / static_cast<double>(counts_[b]), 0.0, 1.0);
    }
    seen += static_cast<double>(counts_[b]);
  }
  return bounds_.empty() ? 0 : bounds_.back();
}

std::vector<double> FirstTokenBuckets() {
  return {0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
          20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> InterTokenBuckets() {
  return {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2,
          0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> RequestBuckets() {
  return {0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
          120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}
std::vector<double> GapBuckets() {
  return {1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1};
}

}  // namespace deepinfer::engine
