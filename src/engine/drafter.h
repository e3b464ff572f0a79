// Drafters: what proposes the draft tokens a verify step checks (speculative decoding). The executor owns
// one and calls it after sampling, for every output that goes on decoding; the scheduler only carries the
// proposals (SequenceResult::draft) into the next step's verify chunk. A drafter never changes an output:
// verification keeps only the draft tokens that plain decoding would have produced, so a poor draft costs
// speed only.
//
// Model-free drafters read the tokens only. The model's own draft layers (V4's MTP layer, V4.1's DSpark:
// `mtp` and `dspark`, CausalLM::Draft) run through ModelDrafter, which the executor attaches to its model
// and pools and hands each output's model state.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/hash.h"
#include "core/status.h"
#include "engine/speculative_config.h"
#include "engine/suffix_index.h"
#include "model/causal_lm.h"

namespace deepinfer::engine {

// One output as a drafter sees it.
struct DraftInput {
  uint64_t sequence = 0;              // the executor's key for the output (its SeqId)
  std::span<const int32_t> tokens;    // the prompt, then every token generated (the last just sampled)
  int64_t prompt_tokens = 0;
  uint64_t seed = 0;                  // the request's seed (0 for greedy) and the output's index among its n
  int index = 0;
  int max_tokens = 0;                 // propose at most this many
  // For the model's draft layers: the output's model state, holding every token but the last (null: the
  // output has no state of its own yet, e.g. one just born of its parent's prompt), and how many draft
  // positions from there its window blocks cover (-1: unbounded).
  model::SequenceState* state = nullptr;
  int64_t room = -1;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Proposals for the tokens that follow each input's (drafts->at(i) for inputs[i], at most max_tokens
  // each; empty: that output decodes one token plainly next step).
  virtual void Propose(std::span<const DraftInput> inputs, std::vector<std::vector<int32_t>>* drafts) = 0;
  // The output will not be asked about again (it finished); tokens are its last.
  virtual void Finished(const DraftInput& input) { (void)input; }
  // The model and pools the executor runs (called once, before any Propose); only the model's draft
  // layers use them.
  virtual void Attach(model::CausalLM* model, kvcache::KvPools* pools) {
    (void)model;
    (void)pools;
  }
  // Whether Propose runs the model (its inputs then need their states and rooms).
  virtual bool uses_model() const { return false; }
  // After Propose, where the drafter predicts it: per input, per draft token, the probability that the
  // token and every one before it survive verification (null or an empty entry: no prediction).
  virtual const std::vector<std::vector<float>>* survival() const { return nullptr; }
};

// The model's draft layers (CausalLM::Draft: `mtp`, `dspark`): up to K autoregressive draft steps per
// output, all outputs batched in each step, each step's token the argmax of its draft logits (the lowest id
// on ties) and the input of the next. Outputs without a state of their own propose nothing; a Draft error
// ends the proposals there (the drafts made so far stay: verification makes any proposal safe). Where the
// draft layers have a confidence head (DSpark), the survival of each draft prefix is the product of the
// per-position confidences, each calibrated by its temperature (`calibration`, see
// ReadCalibrationTemperatures). With `suffix_override_tokens` > 0 a suffix index over finished requests'
// tokens is kept, and a match of that many tokens replaces the model's draft (no survival predicted then).
class ModelDrafter final : public Drafter {
 public:
  explicit ModelDrafter(std::vector<double> calibration = {}, int suffix_override_tokens = 0)
      : calibration_(std::move(calibration)),
        index_(suffix_override_tokens > 0
                   ? std::make_shared<SuffixIndex>(suffix_override_tokens, suffix_override_tokens)
                   : nullptr) {}
  void Finished(const DraftInput& input) override {
    if (index_) index_->Add(input.tokens);
  }
  void Attach(model::CausalLM* model, kvcache::KvPools* pools) override;
  bool uses_model() const override { return true; }
  void Propose(std::span<const DraftInput> inputs, std::vector<std::vector<int32_t>>* drafts) override;
  const std::vector<std::vector<float>>* survival() const override { return &survival_; }
  // σ(logit(confidence) / T) with position `slot`'s temperature (0-based; 1 past the calibration).
  double Calibrated(double confidence, int64_t slot) const;

 private:
  std::vector<double> calibration_;
  std::shared_ptr<SuffixIndex> index_;
  model::CausalLM* model_ = nullptr;
  kvcache::KvPools* pools_ = nullptr;
  model::ForwardOutput out_;
  std::vector<std::vector<float>> survival_;
  bool error_logged_ = false;
};

// Prompt lookup (vLLM's `ngram`): the longest suffix of the sequence, from prompt_lookup_max tokens down to
// prompt_lookup_min, that occurred earlier among its last kSearchTokens tokens (the latest occurrence),
// and the tokens that followed it there.
class NgramDrafter final : public Drafter {
 public:
  static constexpr int64_t kSearchTokens = 4096;  // bounds the work per output and step
  NgramDrafter(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {}
  void Propose(std::span<const DraftInput> inputs, std::vector<std::vector<int32_t>>* drafts) override;
  // One output's proposal (at most max_tokens); `matched` (optional) receives the suffix length matched.
  std::vector<int32_t> ProposeOne(std::span<const int32_t> tokens, int max_tokens, int64_t* matched = nullptr) const;

 private:
  int min_n_, max_n_;
};

// `suffix`: prompt lookup in the output's own tokens and in a suffix index over recent requests' prompts and
// outputs (shared by the engine's requests; each output's tokens are indexed when it finishes), the
// longer match winning (the output's own on a tie).
class SuffixDrafter final : public Drafter {
 public:
  SuffixDrafter(int min_n, int max_n) : own_(min_n, max_n), index_(std::make_shared<SuffixIndex>(min_n, max_n)) {}
  void Propose(std::span<const DraftInput> inputs, std::vector<std::vector<int32_t>>* drafts) override;
  void Finished(const DraftInput& input) override { index_->Add(input.tokens); }
  const SuffixIndex& index() const { return *index_; }

 private:
  NgramDrafter own_;
  std::shared_ptr<SuffixIndex> index_;
};

// The target's own future (vLLM's `synthetic`): the output a request with the same prompt, seed and index
// produced before (recorded when it finished, in a bounded store), each draft position kept with the
// conditional probability that gives the configured unconditional acceptance rates and otherwise replaced
// by another token; the draws are keyed by the output, the position and the draft slot, so a run is
// repeatable. Without a recording it proposes nothing. It measures the verify machinery at a known
// acceptance on models whose drafts mean nothing (random weights).
class SyntheticDrafter final : public Drafter {
 public:
  static constexpr int64_t kMaxRecordedTokens = int64_t{1} << 22;  // the store's bound (oldest dropped first)
  SyntheticDrafter(std::vector<double> acceptance_rates, int64_t vocab_size);
  void Propose(std::span<const DraftInput> inputs, std::vector<std::vector<int32_t>>* drafts) override;
  void Finished(const DraftInput& input) override;
  int64_t recorded_outputs() const { return static_cast<int64_t>(recorded_.size()); }

 private:
  static Hash128 KeyOf(const DraftInput& input);
  const std::vector<int32_t>* RecordingFor(const DraftInput& input);

  std::vector<double> keep_;  // conditional keep probability per draft slot
  int64_t vocab_size_;
  std::unordered_map<Hash128, std::vector<int32_t>, Hash128Hasher> recorded_;
  std::deque<Hash128> order_;  // recording order, for the bound
  int64_t recorded_tokens_ = 0;
  std::unordered_map<uint64_t, Hash128> keys_;  // outputs in flight -> their key (hashed once)
};

// The drafter of a method (ngram, suffix, synthetic, or a ModelDrafter for mtp and dspark; whether the model has
// the layers is the engine's check).
Result<std::unique_ptr<Drafter>> MakeDrafter(const SpeculativeConfig& config, int64_t vocab_size);

}  // namespace deepinfer::engine
