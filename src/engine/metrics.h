// The engine's counters and fixed-bucket latency histograms (what EngineStats reports). Histograms have
// fixed bounds so that a Prometheus endpoint can expose them as they are; writes come from the engine's
// threads, reads from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "engine/engine.h"

namespace deepinfer::engine {

class FixedHistogram {
 public:
  explicit FixedHistogram(std::vector<double> upper_bounds);
  void Record(double seconds);
  HistogramSnapshot Snapshot() const;
  // Quantile estimate (q in [0, 1]) by linear interpolation inside the bucket; 0 when empty.
  double Quantile(double q) const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

// Bucket bounds (seconds): first-token and end-to-end scales, inter-token scale, and the step loop's gap.
std::vector<double> FirstTokenBuckets();
std::vector<double> InterTokenBuckets();
std::vector<double> RequestBuckets();
std::vector<double> GapBuckets();

}  // namespace deepinfer::engine
