// Monotonic time and a latency histogram with percentiles.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace deepinfer {

using MonoClock = std::chrono::steady_clock;

inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(MonoClock::now().time_since_epoch()).count();
}

class Stopwatch {
 public:
  Stopwatch() : start_(MonoClock::now()) {}
  void Reset() { start_ = MonoClock::now(); }
  double ElapsedSeconds() const { return std::chrono::duration<double>(MonoClock::now() - start_).count(); }
  double ElapsedMillis() const { return ElapsedSeconds() * 1e3; }

 private:
  MonoClock::time_point start_;
};

// Records latencies (seconds) in log-spaced buckets (about 1% relative width, 1 ns to ~1e4 s), so memory
// stays fixed however many samples arrive. Percentile() returns a value within one bucket's width of the
// exact order statistic. Thread-safe.
class LatencyHistogram {
 public:
  LatencyHistogram();
  void Record(double seconds);
  void Merge(const LatencyHistogram& other);
  void Clear();

  uint64_t count() const;
  double sum() const;
  double min() const;
  double max() const;
  double mean() const;
  // q in [0, 1]; 0 when empty.
  double Percentile(double q) const;
  // "n=100 mean=1.2ms p50=1.1ms p90=2.0ms p99=3.1ms max=3.5ms".
  std::string Summary() const;

 private:
  static int BucketFor(double seconds);
  static double BucketMidpoint(int bucket);

  mutable std::mutex mutex_;
  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  double sum_ = 0;
  double min_ = 0;
  double max_ = 0;
};

// "1.23ms", "456us", "2.00s".
std::string FormatDuration(double seconds);

}  // namespace deepinfer
