#include "router/router_sim_trace.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <unordered_set>

#include "core/json.h"

namespace deepinfer::router {

namespace {

Status LineError(int64_t line, const std::string& why) {
  return Status::InvalidArgument("line " + std::to_string(line) + ": " + why);
}

// A JSON integer in [min, max] (a float with no fraction counts: some writers emit 512.0).
Result<int64_t> BoundedInt(const nlohmann::json& value, const char* key, int64_t min, int64_t max) {
  double v = 0;
  if (value.is_number_integer() || value.is_number_unsigned()) {
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(max))
      return Status::InvalidArgument(std::string(key) + " out of range");
    const int64_t i = value.is_number_unsigned() ? static_cast<int64_t>(value.get<uint64_t>()) : value.get<int64_t>();
    if (i < min || i > max) return Status::InvalidArgument(std::string(key) + " out of range [" + std::to_string(min) +
                                                           ", " + std::to_string(max) + "]");
    return i;
  }
  if (!value.is_number_float()) return Status::InvalidArgument(std::string(key) + " is not a number");
  v = value.get<double>();
  if (!(v >= static_cast<double>(min) && v <= static_cast<double>(max)) || v != std::floor(v))
    return Status::InvalidArgument(std::string(key) + " is not an integer in [" + std::to_string(min) + ", " +
                                   std::to_string(max) + "]");
  return static_cast<int64_t>(v);
}

Result<TraceRequest> ParseLine(std::string_view line, int64_t block_tokens) {
  JsonLimits limits;
  limits.max_bytes = TraceLimits::kMaxLineBytes;
  limits.max_depth = 4;
  DI_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(line, limits));
  if (!j.is_object()) return Status::InvalidArgument("not a JSON object");
  for (const char* key : {"timestamp", "input_length", "output_length", "hash_ids"})
    if (!j.contains(key)) return Status::InvalidArgument(std::string("missing ") + key);
  TraceRequest r;
  const nlohmann::json& ts = j["timestamp"];
  if (!ts.is_number()) return Status::InvalidArgument("timestamp is not a number");
  const double ms = ts.get<double>();
  if (!(ms >= 0 && ms <= TraceLimits::kMaxTimestampMs))
    return Status::InvalidArgument("timestamp out of range [0, 1e12] ms");
  r.arrival_s = ms / 1000;
  DI_ASSIGN_OR_RETURN(r.input_tokens, BoundedInt(j["input_length"], "input_length", 1, TraceLimits::kMaxInputTokens));
  DI_ASSIGN_OR_RETURN(r.output_tokens,
                      BoundedInt(j["output_length"], "output_length", 1, TraceLimits::kMaxOutputTokens));
  const nlohmann::json& ids = j["hash_ids"];
  if (!ids.is_array()) return Status::InvalidArgument("hash_ids is not an array");
  const size_t expected = static_cast<size_t>((r.input_tokens + block_tokens - 1) / block_tokens);
  if (ids.size() != expected)
    return Status::InvalidArgument("hash_ids has " + std::to_string(ids.size()) + " ids, input_length " +
                                   std::to_string(r.input_tokens) + " needs " + std::to_string(expected) +
                                   " (one per " + std::to_string(block_tokens) + " tokens)");
  r.blocks.reserve(expected);
  for (const nlohmann::json& id : ids) {
    DI_ASSIGN_OR_RETURN(int64_t v, BoundedInt(id, "hash id", 0, TraceLimits::kMaxBlockId));
    r.blocks.push_back(v);
  }
  return r;
}

}  // namespace

Result<Trace> ParseMooncakeTrace(std::string_view text, int64_t block_tokens) {
  if (block_tokens < 1 || block_tokens > TraceLimits::kMaxBlockTokens)
    return Status::InvalidArgument("block size out of range");
  if (text.size() > TraceLimits::kMaxBytes)
    return Status::InvalidArgument("trace larger than " + std::to_string(TraceLimits::kMaxBytes >> 20) + " MiB");
  Trace trace;
  trace.block_tokens = block_tokens;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    if (line.size() > TraceLimits::kMaxLineBytes)
      return LineError(line_no, "longer than " + std::to_string(TraceLimits::kMaxLineBytes) + " bytes");
    if (static_cast<int64_t>(trace.requests.size()) >= TraceLimits::kMaxRequests)
      return LineError(line_no, "more than " + std::to_string(TraceLimits::kMaxRequests) + " requests");
    auto request = ParseLine(line, block_tokens);
    if (!request.ok()) return LineError(line_no, request.status().message());
    trace.requests.push_back(std::move(*request));
  }
  if (trace.requests.empty()) return Status::InvalidArgument("no requests");
  std::stable_sort(trace.requests.begin(), trace.requests.end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.arrival_s < b.arrival_s; });
  const double origin = trace.requests.front().arrival_s;
  for (TraceRequest& r : trace.requests) r.arrival_s -= origin;
  return trace;
}

Result<Trace> SyntheticTrace(const SyntheticTraceOptions& o) {
  auto range = [](int64_t lo, int64_t hi, int64_t min, int64_t max, const char* what) -> Status {
    if (lo < min || hi > max || lo > hi)
      return Status::InvalidArgument(std::string(what) + ": need " + std::to_string(min) + " <= min <= max <= " +
                                     std::to_string(max));
    return Status::Ok();
  };
  DI_RETURN_IF_ERROR(range(o.requests, o.requests, 1, TraceLimits::kMaxRequests, "requests"));
  DI_RETURN_IF_ERROR(range(o.prefix_groups, o.prefix_groups, 1, 1 << 20, "prefix groups"));
  DI_RETURN_IF_ERROR(
      range(o.min_prefix_tokens, o.max_prefix_tokens, 0, TraceLimits::kMaxInputTokens / 2, "prefix tokens"));
  DI_RETURN_IF_ERROR(
      range(o.min_suffix_tokens, o.max_suffix_tokens, 1, TraceLimits::kMaxInputTokens / 2, "suffix tokens"));
  DI_RETURN_IF_ERROR(
      range(o.min_output_tokens, o.max_output_tokens, 1, TraceLimits::kMaxOutputTokens, "output tokens"));
  if (!(o.requests_per_s > 0 && o.requests_per_s <= 1e6)) return Status::InvalidArgument("rate out of (0, 1e6]");
  if (!(o.zipf >= 0 && o.zipf <= 10)) return Status::InvalidArgument("zipf out of [0, 10]");

  std::mt19937_64 rng(o.seed);
  std::vector<double> weights(static_cast<size_t>(o.prefix_groups));
  for (size_t g = 0; g < weights.size(); ++g) weights[g] = 1.0 / std::pow(static_cast<double>(g + 1), o.zipf);
  std::discrete_distribution<int64_t> pick_group(weights.begin(), weights.end());
  // Each group's prefix is a whole number of blocks, so the suffix starts a block of its own.
  const int64_t bt = kTraceBlockTokens;
  std::vector<int64_t> prefix_blocks(weights.size());
  std::uniform_int_distribution<int64_t> prefix_len(o.min_prefix_tokens, o.max_prefix_tokens);
  for (int64_t& n : prefix_blocks) n = prefix_len(rng) / bt;
  std::uniform_int_distribution<int64_t> suffix_len(o.min_suffix_tokens, o.max_suffix_tokens);
  std::uniform_int_distribution<int64_t> output_len(o.min_output_tokens, o.max_output_tokens);
  std::exponential_distribution<double> gap(o.requests_per_s);

  // Ids: group g's i-th prefix block is g * stride + i; suffix blocks are numbered after every prefix id.
  const int64_t stride = TraceLimits::kMaxInputTokens / bt + 1;
  int64_t next_unique = o.prefix_groups * stride;
  Trace trace;
  trace.requests.reserve(static_cast<size_t>(o.requests));
  double t = 0;
  for (int64_t i = 0; i < o.requests; ++i) {
    TraceRequest r;
    if (i > 0) t += gap(rng);
    r.arrival_s = t;
    const int64_t g = pick_group(rng);
    const int64_t prefix = prefix_blocks[static_cast<size_t>(g)];
    const int64_t suffix = suffix_len(rng);
    r.input_tokens = prefix * bt + suffix;
    r.output_tokens = output_len(rng);
    for (int64_t b = 0; b < prefix; ++b) r.blocks.push_back(g * stride + b);
    for (int64_t b = 0; b < (suffix + bt - 1) / bt; ++b) r.blocks.push_back(next_unique++);
    trace.requests.push_back(std::move(r));
  }
  return trace;
}

std::vector<int64_t> OracleHitTokens(const Trace& trace) {
  std::unordered_set<int64_t> seen;
  std::vector<int64_t> hits;
  hits.reserve(trace.requests.size());
  for (const TraceRequest& r : trace.requests) {
    int64_t matched = 0;
    while (matched < static_cast<int64_t>(r.blocks.size()) && seen.contains(r.blocks[static_cast<size_t>(matched)]))
      ++matched;
    hits.push_back(std::min(matched * trace.block_tokens, r.input_tokens - 1));
    seen.insert(r.blocks.begin(), r.blocks.end());
  }
  return hits;
}

double OracleHitRate(const Trace& trace) {
  const std::vector<int64_t> hits = OracleHitTokens(trace);
  double hit = 0, total = 0;
  for (size_t i = 0; i < hits.size(); ++i) {
    hit += static_cast<double>(hits[i]);
    total += static_cast<double>(trace.requests[i].input_tokens);
  }
  return total > 0 ? hit / total : 0;
}

}  // namespace deepinfer::router
