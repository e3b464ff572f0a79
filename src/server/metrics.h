// Prometheus text exposition (format 0.0.4) for /metrics, and the few metric holders the server keeps
// itself (request counts by endpoint and status, latency histograms measured at the HTTP side). Names
// follow vLLM's `vllm:*` set with a `deepinfer:` prefix; see the README's metrics table.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer::engine {
struct EngineStats;  // engine/engine.h
}  // namespace deepinfer::engine

namespace deepinfer::server {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Appends metric families to a text body. Each family is declared once (HELP, TYPE), then its samples.
class PrometheusText {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help);
  void Sample(std::string_view name, const MetricLabels& labels, double value);
  // A whole histogram family member: cumulative bucket counts for `bounds` (+Inf added), sum and count.
  void Histogram(std::string_view name, const MetricLabels& labels, std::span<const double> bounds,
                 std::span<const uint64_t> cumulative, double sum, uint64_t count);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// A fixed-bucket histogram, safe to observe from any thread.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Cumulative counts per bound, with the total count last (the +Inf bucket).
  std::vector<uint64_t> Cumulative() const;
  double sum() const;
  uint64_t count() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, +Inf last
  double sum_ = 0;
  uint64_t count_ = 0;
};

// vLLM's bucket sets (seconds): TTFT, inter-token latency, and request-level latencies.
std::vector<double> TtftBuckets();
std::vector<double> InterTokenBuckets();
std::vector<double> RequestLatencyBuckets();

// Requests answered, by endpoint (a fixed set of route names, or "other") and status code.
class RequestCounter {
 public:
  void Add(std::string_view endpoint, int status);
  std::map<std::pair<std::string, int>, uint64_t> Snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> counts_;
};

// The engine's side of the KV store tier in Prometheus text, beside the store's own metrics on /metrics:
// waits cut short by EngineOptions::lower_tier_timeout_s (a slow or hung filesystem) and blocks recomputed
// because reading them was predicted slower.
void AppendTierPrometheus(const engine::EngineStats& stats, std::string* out);

}  // namespace deepinfer::server
