// Speculative decoding in `deepinfer bench engine --speculative-config JSON`: the counters of a run as vLLM
// reports them (drafts, acceptance length, per-position acceptance), and the decode measurement against
// speculation off in the same process, with the corruption check (the outputs must be equal; a speed-up
// beyond K + 1 is impossible and fails the run too).
#pragma once

#include <string>
#include <vector>

#include "engine/engine.h"

namespace deepinfer::bench {

// "spec decode: drafts N, draft tokens N, accepted N (x%), acceptance length L, per position a/b/..."
// over the counters' difference between two Stats() snapshots.
std::string SpeculativeSummary(const engine::EngineStats& before, const engine::EngineStats& after);

struct SpeculativeDecodeOptions {
  std::string model_dir;
  int64_t kv_cache_mib = 2048;
  engine::SpeculativeConfig config;
  int batch = 1;
  int64_t context = 256;  // prompt tokens of each stream
  int64_t tokens = 128;   // generated per stream
  uint64_t seed = 1;
  int rounds = 3;  // timed rounds per configuration
};

// Greedy decoding of `batch` streams with speculation off and on, on two engines in this process (the
// synthetic drafter records a first pass; a warm-up pass each): `rounds` rounds run both back to back,
// alternating which goes first; prints the median round's tokens/s per stream and in total for both, the
// median (quartiles, range) of the rounds' own on/off ratios, the same in this process's CPU time (steadier
// under other processes' load; run with DEEPINFER_POOL_SPIN_US=0), the load average before and after, and
// SpeculativeSummary of the last round. Non-zero (with a line saying why) when the outputs differ in any
// round or the median speed-up is impossible (beyond K + 1).
int MeasureSpeculativeDecode(const SpeculativeDecodeOptions& options);

// The prefill-heavy mix of the sweep: per stream in flight, this many requests of long prompts and short
// outputs.
inline constexpr int kPrefillMixRequestsPerStream = 3;
inline constexpr int64_t kPrefillMixPromptTokens = 512;
inline constexpr int64_t kPrefillMixOutputTokens = 16;

// For each concurrency (streams decoded at once, greedy): speculation off, the configured drafter at every
// fixed K from 1 to the configured K (synthetic rates cut to K), and the configuration itself when it
// schedules its verify lengths, each on its own engine, all alive at once: two warm-up passes each (the
// synthetic drafter records its future in the first), then `rounds` rounds that run every engine once in
// turn (off and the scheduled configuration back to back); prints the median round's tokens/s per stream
// (and in total for off), the best fixed K, the scheduled run against off and the best fixed K (the median
// of the rounds' own ratios, in wall time and in CPU time), its spread over the rounds, its scheduled
// steps, and the load average. With `prefill_mix` > 0 a last row does the same for the prefill-heavy mix:
// kPrefillMixRequestsPerStream × prefill_mix requests of kPrefillMixPromptTokens-token prompts and
// kPrefillMixOutputTokens output tokens, prefill_mix at a time (prefix caching off, so that every round
// prefills), timed from the first submission to the last token.
// Non-zero when any run's outputs differ from speculation off, a stream has other than its tokens, or a
// speed-up passes 1.25 (K + 1) (the corruption check).
int SweepSpeculativeDecode(const SpeculativeDecodeOptions& options, const std::vector<int>& concurrency,
                           int prefill_mix = 0);

// "1,4,16": up to 16 comma-separated concurrencies in [1, 256]; InvalidArgument with one line otherwise.
Result<std::vector<int>> ParseConcurrencyList(const std::string& text);

}  // namespace deepinfer::bench
