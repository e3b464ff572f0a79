// Everything a request says about how its tokens are chosen and when generation ends, with the bounds every
// value is checked against (ValidateSamplingParams) before a request is admitted. The names and meanings
// are those of the OpenAI API and vLLM's SamplingParams where they exist.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace deepinfer::sampling {

// Bounds on what a request may ask for. They keep per-request memory and per-step work bounded whatever the
// input says; each is at least as generous as the OpenAI API's documented limit.
inline constexpr int kMaxN = 128;
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr size_t kMaxStopStrings = 64;
inline constexpr size_t kMaxStopStringBytes = 1024;
inline constexpr size_t kMaxStopTokenIds = 1024;
inline constexpr size_t kMaxLogitBias = 4096;
inline constexpr double kMaxTemperature = 100.0;
// A temperature below this samples greedily (as vLLM does): dividing by it would overflow the logits.
inline constexpr double kGreedyTemperature = 1e-5;

struct SamplingParams {
  // 0 (or below kGreedyTemperature): greedy, the highest processed logit, the lowest id among equals.
  double temperature = 1.0;
  int64_t top_k = 0;     // keep the k most likely tokens; 0 or -1: off
  double top_p = 1.0;    // keep the smallest most-likely set whose probability reaches top_p; in (0, 1]
  double min_p = 0.0;    // drop tokens less likely than min_p times the most likely one; in [0, 1]
  // > 1 discourages tokens already in the prompt or output: positive logits divided by it, negative
  // multiplied (CTRL / vLLM / transformers). 1: off.
  double repetition_penalty = 1.0;
  // OpenAI: logit -= presence_penalty · [count > 0] + frequency_penalty · count, over output tokens only.
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  // Added to the logit of the token before any other processing; values in [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias;

  // Absent: the engine draws a seed and reports it, so the request can be repeated exactly.
  std::optional<uint64_t> seed;
  // Separates requests that share a seed on purpose; 0 (the default) makes equal seeded requests equal.
  uint32_t random_stream = 0;

  int64_t max_tokens = 16;  // >= 1; the engine also stops at the model's context
  int64_t min_tokens = 0;   // end-of-sequence and stop tokens are banned until this many were generated
  bool ignore_eos = false;  // the model's end-of-sequence tokens do not end generation (they may be sampled)
  std::vector<int32_t> stop_token_ids;  // end generation; the stop token is part of the output tokens
  // End generation when the generated text contains one (matched on detokenized text, across tokens); the
  // text is cut before it unless include_stop_str_in_output. Empty strings are ignored.
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;

  int n = 1;  // independent outputs for one prompt, sharing its cached blocks
  // Report each sampled token's log probability and the top_logprobs most likely alternatives. Log
  // probabilities are those of the model's distribution (log-softmax of the raw logits, before bias,
  // penalties, mask, temperature and filters), as vLLM reports them by default.
  bool logprobs = false;
  int top_logprobs = 0;  // 0..kMaxTopLogprobs; needs logprobs

  bool greedy() const { return temperature < kGreedyTemperature; }
};

// kInvalidArgument naming the parameter when a value is out of its range (NaN included), a token id is not
// in [0, vocab_size), or a list is over its bound.
Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size);

}  // namespace deepinfer::sampling
