// Speculative decoding in `deepinfer bench engine --speculative-config JSON`: the counters of a run as vLLM
// reports them (drafts, acceptance length, per-position acceptance), and the decode measurement against
// speculation off in the same process, with the corruption check (the outputs must be equal; a speed-up
// beyond K + 1 is impossible and fails the run too).
#pragma once

#include <string>

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
};

// Greedy decoding of `batch` streams with speculation off and on, on two engines in this process (the
// synthetic drafter records a first pass), alternating three times and keeping each side's fastest pass;
// prints tokens/s per stream and in total for both, the ratio, and SpeculativeSummary of the kept pass. Non-zero (with a line saying why) when
// the outputs differ or the speed-up is impossible.
int MeasureSpeculativeDecode(const SpeculativeDecodeOptions& options);

}  // namespace deepinfer::bench
