// Where rank 0 of a serving unit places a new request: on the rank whose engine it would wait least on.
// Two costs, as DeepSeek's published serving system balances them: prefill work (the prompt tokens placed
// on the rank and not yet computed, and their attention) and decode load (KV held by its unfinished
// requests, and their number). A prompt's attention work is the pairs of a token and a position before it,
// L²/2 for L tokens; the engine's fitted step-cost model (engine/cost_model.h) says what one pair costs
// against one token (`context_cost_per_token`), so the prefill work is in tokens' worth.
// Each is taken as a fraction of the rank's capacity for it, and the rank with the smallest sum wins;
// among equals, the rank that has been given the fewest requests so far, then the lowest rank (so an idle
// unit takes requests in turn).
#pragma once

#include <cstdint>
#include <span>

namespace deepinfer::parallel {

struct RankLoad {
  int64_t queued_prefill_tokens = 0;  // prompt tokens of its requests whose first update has not come back
  double queued_prefill_context = 0;  // their attention: L²/2 for each such prompt of L tokens
  int64_t kv_tokens = 0;              // prompt and generated tokens of its unfinished requests
  int64_t requests = 0;               // unfinished requests
  int64_t placed = 0;                 // requests placed on it so far
};

// Every rank's capacity (the ranks run the same engine options).
struct RankCapacity {
  int64_t batched_tokens = 2048;  // prefill tokens one step computes
  int64_t kv_tokens = 1 << 16;    // tokens the KV pool holds
  int64_t sequences = 64;         // sequences running at once
  // The cost of one (token, earlier position) pair of attention over the cost of one token: the fitted
  // cost model's context coefficient over its token coefficient; 0 before it is fitted (tokens alone).
  double context_cost_per_token = 0;
};

// A prompt's attention pairs, L²/2.
double PromptContext(int64_t prompt_tokens);

// The rank (index into `ranks`, which is not empty) a new request goes to.
int PlaceRequest(std::span<const RankLoad> ranks, const RankCapacity& capacity);

}  // namespace deepinfer::parallel
