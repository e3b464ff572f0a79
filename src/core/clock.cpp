#include "core/clock.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace deepinfer {
namespace {
constexpr double kMinSeconds = 1e-9;
constexpr double kGrowth = 1.02;  // bucket i covers [kMin * g^i, kMin * g^(i+1))
constexpr int kNumBuckets = 2560;  // 1.02^2560 ≈ 1e22 → covers 1 ns .. far past any latency
}  // namespace

LatencyHistogram::LatencyHistogram() : buckets_(kNumBuckets, 0) {}

int LatencyHistogram::BucketFor(double seconds) {
  if (!(seconds > kMinSeconds)) return 0;
  int b = static_cast<int>(std::log(seconds / kMinSeconds) / std::log(kGrowth));
  return std::clamp(b, 0, kNumBuckets - 1);
}

double LatencyHistogram::BucketMidpoint(int bucket) {
  return kMinSeconds * std::pow(kGrowth, bucket + 0.5);
}

void LatencyHistogram::Record(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++buckets_[BucketFor(seconds)];
  if (count_ == 0 || seconds < min_) min_ = seconds;
  if (count_ == 0 || seconds > max_) max_ = seconds;
  ++count_;
  sum_ += seconds;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (&other == this) return;
  std::scoped_lock lock(mutex_, other.mutex_);
  if (other.count_ == 0) return;
  for (int i = 0; i < kNumBuckets; ++i) buckets_[i] += other.buckets_[i];
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = count_ == 0 ? other.max_ : std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

void LatencyHistogram::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::fill(buckets_.begin(), buckets_.end(), 0);
  count_ = 0;
  sum_ = min_ = max_ = 0;
}

uint64_t LatencyHistogram::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return count_;
}
double LatencyHistogram::sum() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sum_;
}
double LatencyHistogram::min() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return min_;
}
double LatencyHistogram::max() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return max_;
}
double LatencyHistogram::mean() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return count_ == 0 ? 0 : sum_ / static_cast<double>(count_);
}

double LatencyHistogram::Percentile(double q) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // The rank of the order statistic (nearest-rank definition), 1-based.
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (int i = 0; i < kNumBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::clamp(BucketMidpoint(i), min_, max_);
  }
  return max_;
}

std::string LatencyHistogram::Summary() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "n=%llu mean=%s p50=%s p90=%s p99=%s max=%s",
                static_cast<unsigned long long>(count()), FormatDuration(mean()).c_str(),
                FormatDuration(Percentile(0.5)).c_str(), FormatDuration(Percentile(0.9)).c_str(),
                FormatDuration(Percentile(0.99)).c_str(), FormatDuration(max()).c_str());
  return buf;
}

std::string FormatDuration(double seconds) {
  char buf[32];
  if (seconds >= 1.0) std::snprintf(buf, sizeof buf, "%.2fs", seconds);
  else if (seconds >= 1e-3) std::snprintf(buf, sizeof buf, "%.2fms", seconds * 1e3);
  else if (seconds >= 1e-6) std::snprintf(buf, sizeof buf, "%.1fus", seconds * 1e6);
  else std::snprintf(buf, sizeof buf, "%.0fns", seconds * 1e9);
  return buf;
}

}  // namespace deepinfer
