#include "core/clock.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace deepinfer {
namespace {

// Property: every percentile is within one bucket (2%) of the exact nearest-rank order statistic.
TEST(LatencyHistogram, PercentilesTrackExactOrderStatistics) {
  std::mt19937 rng(11);
  std::lognormal_distribution<double> dist(std::log(2e-3), 1.0);
  LatencyHistogram h;
  std::vector<double> samples;
  for (int i = 0; i < 20000; ++i) {
    double s = dist(rng);
    samples.push_back(s);
    h.Record(s);
  }
  std::sort(samples.begin(), samples.end());
  for (double q : {0.01, 0.5, 0.9, 0.99, 0.999}) {
    const size_t rank = static_cast<size_t>(std::ceil(q * samples.size()));
    const double exact = samples[rank - 1];
    EXPECT_NEAR(h.Percentile(q) / exact, 1.0, 0.021) << "q=" << q;
  }
  EXPECT_EQ(h.count(), 20000u);
  EXPECT_DOUBLE_EQ(h.min(), samples.front());
  EXPECT_DOUBLE_EQ(h.max(), samples.back());
  EXPECT_NE(h.Summary().find("p99="), std::string::npos);
}

TEST(LatencyHistogram, MergeEqualsRecordingEverything) {
  LatencyHistogram a, b, all;
  for (int i = 1; i <= 100; ++i) {
    (i % 2 ? a : b).Record(i * 1e-4);
    all.Record(i * 1e-4);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_DOUBLE_EQ(a.Percentile(0.5), all.Percentile(0.5));
  EXPECT_DOUBLE_EQ(a.Percentile(0.99), all.Percentile(0.99));
  EXPECT_NEAR(a.sum(), all.sum(), 1e-12);
  LatencyHistogram empty;
  EXPECT_EQ(empty.Percentile(0.5), 0.0);
}

TEST(Clock, MonotonicAndFormatting) {
  int64_t t0 = NowNanos();
  Stopwatch sw;
  int64_t t1 = NowNanos();
  EXPECT_GE(t1, t0);
  EXPECT_GE(sw.ElapsedSeconds(), 0.0);
  EXPECT_EQ(FormatDuration(1.5e-3), "1.50ms");
  EXPECT_EQ(FormatDuration(2.0), "2.00s");
  EXPECT_EQ(FormatDuration(12.3e-6), "12.3us");
}

}  // namespace
}  // namespace deepinfer
