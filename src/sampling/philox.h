// The counter-based random generator behind seeded sampling: Philox4x32-10 (Salmon, Moraes, Dror and Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011). A draw is a pure function of its key and counter,
// so the random number used for a token depends only on (seed, request stream, sequence index, position) and
// never on how many other draws happened before it, which requests share the batch, or which thread samples.
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer::sampling {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds of Philox4x32 (the Random123 default; its known-answer vectors are the tests).
PhiloxCounter Philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// What identifies one draw. `stream` separates requests that deliberately share a seed (0 by default, so
// two identical seeded requests sample identically); `sequence` is the index among a request's n outputs;
// `position` the absolute token position the sampled token will take.
struct DrawKey {
  uint64_t seed = 0;
  uint32_t stream = 0;
  uint32_t sequence = 0;
  int64_t position = 0;
};

// A uniform double in [0, 1) with 53 random bits, from the first two words of the block of that key.
double UniformDraw(const DrawKey& key);

}  // namespace deepinfer::sampling
