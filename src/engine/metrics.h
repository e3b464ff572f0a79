// The engine's counters and fixed-bucket latency histograms (what EngineStats reports). Histograms have
// fixed bounds so that a Prometheus endpoint can expose them as they are; writes come from the engine's
// threads, reads from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/mutex.h"
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
  mutable Mutex mutex_;
  const std::vector<double> bounds_;
  std::vector<uint64_t> counts_ GUARDED_BY(mutex_);
  uint64_t count_ GUARDED_BY(mutex_) = 0;
  double sum_ GUARDED_BY(mutex_) = 0;
};

// Bucket bounds (seconds): first-token and end-to-end scales, inter-token scale, and the step loop's gap.
std::vector<double> FirstTokenBuckets();
std::vector<double> InterTokenBuckets();
std::vector<double> RequestBuckets();
std::vector<double> GapBuckets();

// What EngineStats reports, written by the step thread (the scheduler and the loop) and AddRequest, read
// by Stats() on any thread. The histograms lock themselves.
struct EngineMetrics {
  mutable Mutex mu;
  EngineStats counters GUARDED_BY(mu);  // the counter fields; the gauges are the fields below
  int64_t running GUARDED_BY(mu) = 0;
  int64_t waiting GUARDED_BY(mu) = 0;
  int64_t prefix_used GUARDED_BY(mu) = 0, prefix_cached GUARDED_BY(mu) = 0, prefix_free GUARDED_BY(mu) = 0;
  int64_t window_used GUARDED_BY(mu) = 0, window_cached GUARDED_BY(mu) = 0;
  int64_t queued_prefill_tokens GUARDED_BY(mu) = 0;
  std::array<double, 5> step_cost GUARDED_BY(mu){};
  bool step_cost_ready GUARDED_BY(mu) = false;
  FixedHistogram ttft{FirstTokenBuckets()}, itl{InterTokenBuckets()}, queue{RequestBuckets()},
      e2e{RequestBuckets()}, gap{GapBuckets()};
};

}  // namespace deepinfer::engine
