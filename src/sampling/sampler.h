// Choosing one token from one row of logits: logit_bias, bans, penalties and the logits mask, then greedy
// selection or temperature, top-k, top-p and min-p and a draw from the counter-based generator, plus the
// log probabilities asked for. A pure function of the row and its inputs (no state survives a call but
// scratch memory), so a token never depends on the batch it was computed in or on the thread sampling it.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "sampling/logits_mask.h"
#include "sampling/params.h"
#include "sampling/philox.h"

namespace deepinfer::sampling {

// The tokens a sequence has seen, for the penalties: the prompt's distinct tokens (repetition) and each
// output token's count (repetition, presence, frequency). Memory is one entry per distinct token.
class TokenCounts {
 public:
  void SetPrompt(std::span<const int32_t> prompt);
  void AddOutput(int32_t token) { ++counts_[token]; }
  // token -> times it appeared in the output (0: only in the prompt).
  const std::unordered_map<int32_t, int32_t>& counts() const { return counts_; }

 private:
  std::unordered_map<int32_t, int32_t> counts_;
};

struct TopLogprob {
  int32_t id = 0;
  float logprob = 0;
};

struct SampledToken {
  int32_t id = -1;
  float logprob = 0;              // set when params.logprobs
  std::vector<TopLogprob> top;    // params.top_logprobs entries, most likely first (lowest id among equals)
};

struct SampleInputs {
  const SamplingParams* params = nullptr;
  DrawKey draw;                         // the seed resolved; position of the token being sampled
  const TokenCounts* counts = nullptr;  // needed when a penalty is set
  const TokenBitmask* allowed = nullptr;  // the mask's allowed tokens; null: all
  std::span<const int32_t> banned;      // never sampled (end tokens before min_tokens)
  // Rejection sampling of a deterministic draft (speculative decoding's max_acceptance mode; -1: none):
  // with the processed distribution p, the draft token is kept with probability p(draft) (a draw keyed by
  // `draw` on its own stream) and otherwise a token is drawn from p without it, so the result is
  // distributed as p (AcceptOrResample with a one-hot q). Greedy selection ignores it.
  int32_t draft = -1;
};

// Processing order (that of transformers' logits processors and warpers; each step sees the previous one's
// output): logit_bias, bans, repetition penalty, presence and frequency penalties, mask; then greedy, or
// temperature, top-k, top-p, min-p and an inverse-CDF draw over the kept tokens in id order (or, with a
// draft, its acceptance test first). Ties in
// top-k/top-p are broken by the lower id. NaN logits count as disallowed.
class Sampler {
 public:
  // kFailedPrecondition when no token is allowed (the mask and bans exclude every finite logit).
  Result<SampledToken> Sample(std::span<const float> logits, const SampleInputs& inputs);

 private:
  void KeepTop(bool weighted, double target);
  int32_t AcceptOrDraw(int32_t draft, const DrawKey& draw) const;

  std::vector<float> x_;        // processed logits, then scaled ones
  std::vector<float> p_;        // exp(scaled - max)
  std::vector<int32_t> ids_;    // kept candidates, ascending
  std::vector<int32_t> scratch_;
  std::vector<uint32_t> keys_;
  std::vector<double> blocks_;
};

// The processing before selection, in place: logit_bias, bans, penalties, mask; NaN becomes -inf.
void ApplyLogitProcessors(std::span<float> logits, const SampleInputs& inputs);

// log-softmax of the raw row at `id` and the k most likely tokens: what a request's logprobs report.
void RawLogprobs(std::span<const float> logits, int32_t id, int k, SampledToken* out);

// exp(x) for x <= 0 in float, with relative error below 3e-7 (below -87.3 it returns exp(-87.3)); a fixed
// polynomial rather than libm so that it vectorizes and gives the same bits on every machine.
float ExpNonPositive(float x);

}  // namespace deepinfer::sampling
