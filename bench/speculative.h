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
  int rounds = 3;  // the sweep's timed rounds per configuration
};

// Greedy decoding of `batch` streams with speculation off and on, on two engines in this process (the
// synthetic drafter records a first pass), alternating three times and keeping each side's fastest pass;
// prints tokens/s per stream and in total for both, the ratio, and SpeculativeSummary of the kept pass. Non-zero (with a line saying why) when
// the outputs differ or the speed-up is impossible.
int MeasureSpeculativeDecode(const SpeculativeDecodeOptions& options);

// For each concurrency (streams decoded at once, greedy): speculation off, the configured drafter at every
// fixed K from 1 to the configured K (synthetic rates cut to K), and the configuration itself when it
// schedules its verify lengths, each on its own engine, all alive at once: two warm-up passes each (the
// synthetic drafter records its future in the first), then `rounds` rounds that run every engine once in
// turn; prints the median round's tokens/s per stream (and in total for off), the best fixed K, and the
// scheduled run against off and the best fixed K, with its spread over the rounds and its scheduled steps.
// Non-zero when any run's outputs differ from speculation off, a stream has other than `tokens` tokens,
// or a speed-up passes 1.25 (K + 1) (the corruption check).
int SweepSpeculativeDecode(const SpeculativeDecodeOptions& options, const std::vector<int>& concurrency);

// "1,4,16": up to 16 comma-separated concurrencies in [1, 256]; InvalidArgument with one line otherwise.
Result<std::vector<int>> ParseConcurrencyList(const std::string& text);

}  // namespace deepinfer::bench
