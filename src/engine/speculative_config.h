// What `--speculative-config` says (the same JSON object vLLM takes): the drafting method, how many draft
// tokens each verify step checks, and the method's own settings. Plain data, parsed once from untrusted
// text; whether the loaded model can run the method is decided when the engine starts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer::engine {

// The most draft tokens one verify step checks (the models' Truncate reaches at least this far back).
inline constexpr int kMaxSpeculativeTokens = 16;
// The longest n-gram prompt lookup matches.
inline constexpr int kMaxPromptLookup = 64;
// Bytes of --speculative-config text read at most.
inline constexpr size_t kMaxSpeculativeConfigBytes = 4096;

enum class DraftMethod : uint8_t {
  kNone,       // speculative decoding off
  kNgram,      // prompt lookup over the sequence's own tokens (any model)
  kSynthetic,  // the target's own recorded output, corrupted at chosen rates (measures the machinery)
  kMtp,        // V4's multi-token prediction layer (CausalLM::Draft)
  kDspark,     // V4.1's DSpark draft layers (CausalLM::Draft)
  kSuffix,     // prompt lookup plus a suffix index over recent requests' tokens (any model)
};
// "none", "ngram", "synthetic", "mtp", "dspark", "suffix".
std::string_view DraftMethodName(DraftMethod method);

struct SpeculativeConfig {
  DraftMethod method = DraftMethod::kNone;
  int num_speculative_tokens = 0;  // K: draft tokens per verify step, 1..kMaxSpeculativeTokens when on
  // ngram, suffix: the longest and shortest suffix of the sequence looked up in its earlier tokens (and the
  // suffix index) (longest first).
  int prompt_lookup_max = 5;
  int prompt_lookup_min = 2;
  // synthetic: the unconditional probability that draft position i (0-based) and every one before it are
  // accepted (vLLM's synthetic_acceptance_rates): K values in [0, 1], non-increasing. Empty: all 1.
  std::vector<double> synthetic_acceptance_rates;
  // dspark: a file of per-position temperatures for the confidence head (Sequential Temperature Scaling,
  // TensorRT-LLM's confidence_calibration_path); empty: none.
  std::string calibration_path;
  // mtp, dspark: a suffix-index match of at least this many tokens replaces the model's draft (0: the index
  // is not kept).
  int suffix_override_tokens = 0;
  // How sampled (non-greedy) outputs verify a draft ("acceptance_method"). "reproducible" (the default):
  // a draft token is kept while it equals the token plain decoding draws at its position, so outputs are
  // those of speculation off byte for byte. "rejection_sampler" (vLLM's name; "max_acceptance" too):
  // standard speculative sampling, each draft token kept with probability p(token) under the processed
  // distribution and otherwise replaced by a draw from p without it: distribution-exact, more tokens
  // accepted, not byte-identical. Greedy outputs verify alike in both.
  bool rejection_sampling = false;
  // Verify lengths chosen per step ("scheduled_verification", TensorRT-LLM's enable_confidence_scheduling)
  // instead of K for every output: a budget per output from measured decode-step times and predicted
  // survival, plain decoding included (verify_budget.h). Verification is used only when its predicted
  // tokens per second beat plain decoding's by more than `min_predicted_gain` (a fraction; TensorRT-LLM's
  // confidence_min_predicted_gain; its profiler's 0.01), and a budget below the full block only when it
  // also beats the full block's by that much, or the full block does not beat plain decoding's.
  bool scheduled_verification = false;
  double min_predicted_gain = 0.01;
  bool enabled() const { return method != DraftMethod::kNone; }
  // Whether the method runs the model's draft layers (the model is then loaded with LoadOptions::drafting).
  bool uses_draft_layers() const { return method == DraftMethod::kMtp || method == DraftMethod::kDspark; }
};

// Reads the JSON object of --speculative-config: "method" (required: ngram, suffix, synthetic, mtp, dspark),
// "num_speculative_tokens" (required, 1..16), and the method's keys ("prompt_lookup_max"/"_min" for ngram,
// "synthetic_acceptance_rates" for synthetic, "calibration_path" for dspark, "suffix_override_tokens" for
// mtp and dspark; "acceptance_method", "scheduled_verification" and "min_predicted_gain" for all). InvalidArgument with one line for anything else: malformed
// JSON, an unknown key or method, a wrong type, a value out of range (the caller prefixes what it read:
// "--speculative-config unknown method ...").
Result<SpeculativeConfig> ParseSpeculativeConfig(std::string_view text);

// Bytes of a calibration file read at most.
inline constexpr size_t kMaxCalibrationBytes = 64 << 10;

// A calibration file: a JSON array of 1..kMaxSpeculativeTokens temperatures in [0.01, 100], one per draft
// position (the first for position 1); the confidence c_k becomes σ(logit(c_k) / T_k), and positions
// past the array keep theirs. InvalidArgument with one line naming the file for anything else.
Result<std::vector<double>> ReadCalibrationTemperatures(const std::string& path);

}  // namespace deepinfer::engine
