// Request traces for the router simulator (router_sim.h): arrival time, prompt and output lengths, and the
// ids of the prompt's blocks, so that requests sharing a prefix share their leading ids.
//
// The file format is the public Mooncake trace's: JSON lines of
//   {"timestamp": MS, "input_length": TOKENS, "output_length": TOKENS, "hash_ids": [ID, ...]}
// with one id per 512-token block of the prompt (the last block may be partial). An id names a block
// together with everything before it, so two prompts share exactly the blocks up to their first different
// id. The file is untrusted: its size, its line count, every length and every id is bounded, and a line
// that breaks a bound or does not parse is an error naming the line.
//
// The synthetic generator draws the same shape: Poisson arrivals, and prompts made of one of G shared
// prefixes (drawn with Zipf frequencies, the way a few system prompts or documents dominate real traffic)
// followed by a unique suffix.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer::router {

struct TraceLimits {
  static constexpr size_t kMaxBytes = size_t{256} << 20;
  static constexpr size_t kMaxLineBytes = size_t{1} << 20;
  static constexpr int64_t kMaxRequests = int64_t{1} << 20;
  static constexpr int64_t kMaxInputTokens = int64_t{1} << 21;  // 2M: longer than any DeepSeek context
  static constexpr int64_t kMaxOutputTokens = int64_t{1} << 17;
  static constexpr int64_t kMaxBlockTokens = int64_t{1} << 16;
  static constexpr double kMaxTimestampMs = 1e12;  // about 30 years
  static constexpr int64_t kMaxBlockId = (int64_t{1} << 53) - 1;  // exact in a JSON number
};

// The Mooncake trace's block: 512 tokens per id.
inline constexpr int64_t kTraceBlockTokens = 512;

struct TraceRequest {
  double arrival_s = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  std::vector<int64_t> blocks;  // one id per block_tokens of the prompt, the last block possibly partial
};

struct Trace {
  std::vector<TraceRequest> requests;  // by arrival time
  int64_t block_tokens = kTraceBlockTokens;
};

// Parses Mooncake JSON lines (blank lines skipped; other keys ignored). Timestamps are milliseconds from
// any origin: the trace is shifted to start at 0 and sorted by arrival (stable). The number of ids must
// cover the prompt: ceil(input_length / block_tokens) of them.
Result<Trace> ParseMooncakeTrace(std::string_view text, int64_t block_tokens = kTraceBlockTokens);

struct SyntheticTraceOptions {
  int64_t requests = 2000;
  double requests_per_s = 4;
  int64_t prefix_groups = 64;  // distinct shared prefixes
  double zipf = 1.0;           // group g (from 1) drawn with weight 1 / g^zipf
  int64_t min_prefix_tokens = 1024, max_prefix_tokens = 8192;  // each group's prefix length, uniform
  int64_t min_suffix_tokens = 64, max_suffix_tokens = 1024;    // each request's own tokens, uniform
  int64_t min_output_tokens = 16, max_output_tokens = 512;
  uint64_t seed = 0;
};

// InvalidArgument when an option is out of TraceLimits or a minimum exceeds its maximum.
Result<Trace> SyntheticTrace(const SyntheticTraceOptions& options);

// The prompt tokens of request i already computed by an earlier arrival: its leading blocks that appeared
// in any earlier request, capped at input - 1 (the last token is always computed, to produce logits). This
// is what a router that always knew where every prefix lives, with unlimited caches, would hit.
std::vector<int64_t> OracleHitTokens(const Trace& trace);
// Σ oracle hit tokens / Σ prompt tokens.
double OracleHitRate(const Trace& trace);

}  // namespace deepinfer::router
