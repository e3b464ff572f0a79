#include "server/metrics.h"

#include <cmath>
#include <cstdio>

#include "engine/engine.h"

namespace deepinfer::server {

namespace {

void AppendEscapedLabel(std::string& out, std::string_view value) {
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
}

void AppendLabels(std::string& out, const MetricLabels& labels, std::string_view extra_key = {},
                  std::string_view extra_value = {}) {
  if (labels.empty() && extra_key.empty()) return;
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    AppendEscapedLabel(out, v);
    out += '"';
  }
  if (!extra_key.empty()) {
    if (!first) out += ',';
    out += extra_key;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

void AppendValue(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else if (value == std::floor(value) && std::fabs(value) < 1e15) {
    out += std::to_string(static_cast<int64_t>(value));
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", value);
    out += buf;
  }
}

std::string BoundText(double bound) {
  std::string s;
  AppendValue(s, bound);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

void PrometheusText::Family(std::string_view name, std::string_view type, std::string_view help) {
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  text_ += help;
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type;
  text_ += '\n';
}

void PrometheusText::Sample(std::string_view name, const MetricLabels& labels, double value) {
  text_ += name;
  AppendLabels(text_, labels);
  text_ += ' ';
  AppendValue(text_, value);
  text_ += '\n';
}

void PrometheusText::Histogram(std::string_view name, const MetricLabels& labels, std::span<const double> bounds,
                               std::span<const uint64_t> cumulative, double sum, uint64_t count) {
  const std::string bucket = std::string(name) + "_bucket";
  for (size_t i = 0; i < bounds.size() && i < cumulative.size(); ++i) {
    text_ += bucket;
    AppendLabels(text_, labels, "le", BoundText(bounds[i]));
    text_ += ' ';
    AppendValue(text_, static_cast<double>(cumulative[i]));
    text_ += '\n';
  }
  text_ += bucket;
  AppendLabels(text_, labels, "le", "+Inf");
  text_ += ' ';
  AppendValue(text_, static_cast<double>(count));
  text_ += '\n';
  Sample(std::string(name) + "_sum", labels, sum);
  Sample(std::string(name) + "_count", labels, static_cast<double>(count));
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  std::lock_guard lock(mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::vector<uint64_t> Histogram::Cumulative() const {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> out(counts_.size());
  uint64_t total = 0;
  for (size_t i = 0; i < counts_.size(); ++i) out[i] = (total += counts_[i]);
  return out;
}

double Histogram::sum() const {
  std::lock_guard lock(mu_);
  return sum_;
}

uint64_t Histogram::count() const {
  std::lock_guard lock(mu_);
  return count_;
}

std::vector<double> TtftBuckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
          80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> InterTokenBuckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}

std::vector<double> RequestLatencyBuckets() {
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
          960.0, 1920.0, 7680.0};
}

void RequestCounter::Add(std::string_view endpoint, int status) {
  std::lock_guard lock(mu_);
  ++counts_[{std::string(endpoint), status}];
}

std::map<std::pair<std::string, int>, uint64_t> RequestCounter::Snapshot() const {
  std::lock_guard lock(mu_);
  return counts_;
}

void AppendTierPrometheus(const engine::EngineStats& stats, std::string* out) {
  auto counter = [out](std::string_view name, std::string_view help, uint64_t value) {
    *out += "# HELP ";
    *out += name;
    *out += ' ';
    *out += help;
    *out += "\n# TYPE ";
    *out += name;
    *out += " counter\n";
    *out += name;
    *out += ' ';
    *out += std::to_string(value);
    *out += '\n';
  };
  counter("deepinfer:kvstore_tier_timeouts_total",
          "Requests that stopped waiting for the KV store after --kv-store-timeout-s and recomputed.",
          stats.lower_tier_timeouts);
  counter("deepinfer:kvstore_tier_skipped_blocks_total",
          "Blocks the KV store held but recomputed, reading them being predicted slower.",
          stats.lower_tier_skipped_blocks);
  counter("deepinfer:kvstore_tier_lookups_total", "Prompts looked up in the KV store after their RAM prefix match.",
          stats.lower_tier_lookups);
  counter("deepinfer:kvstore_tier_lookup_misses_total",
          "Of those lookups, the ones whose first block after the RAM match was not in the store.",
          stats.lower_tier_lookup_misses);
  counter("deepinfer:kvstore_tier_no_room_blocks_total",
          "Blocks the KV store held but recomputed, the RAM pool never having room to read them into.",
          stats.lower_tier_no_room_blocks);
}

}  // namespace deepinfer::server
