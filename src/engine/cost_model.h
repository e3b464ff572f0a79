// Predicts a step's duration from its shape, so that the scheduler can take the largest prefill chunk that
// keeps the step within the target time-between-tokens. A linear model over the step's tokens, logits rows,
// attended context (tokens × the positions before them) and chunks, fitted by least squares of the relative
// error with non-negative coefficients to a short start-up profile and then to a window of recently observed
// steps, so it follows the machine's actual speed (other load included). Each observed step displaces the
// oldest profile step of its kind (one or several sequences; decodes alone or with prompt tokens): the
// profile, measured once at start-up, speaks for a kind only until the machine's own steps of that kind do.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>

namespace deepinfer::engine {

struct StepShape {
  double tokens = 0;      // rows through the model
  double logit_rows = 0;  // rows through the LM head
  double context = 0;     // sum over chunks of tokens × (positions before the chunk + tokens / 2)
  double chunks = 0;      // sequences in the batch

  void AddChunk(int64_t start, int64_t n, bool logits) {
    tokens += static_cast<double>(n);
    logit_rows += logits ? 1 : 0;
    context += static_cast<double>(n) * (static_cast<double>(start) + static_cast<double>(n) / 2);
    chunks += 1;
  }
};

class CostModel {
 public:
  static constexpr int kFeatures = 5;  // intercept, tokens, logit rows, context, chunks

  double Predict(const StepShape& shape) const;
  void Observe(const StepShape& shape, double seconds);
  bool ready() const { return fitted_; }
  // The most tokens of one step among the samples of the current fit: past it a prediction extrapolates.
  double fitted_tokens() const { return fitted_tokens_; }
  int64_t observations() const { return static_cast<int64_t>(samples_.size()); }
  // The largest n in [0, max_tokens] for which a chunk of n tokens at position `start` (with logits when
  // it would finish the sequence's pending tokens, i.e. n == finish_at) added to `base` is predicted
  // within target_seconds.
  int64_t SolveChunk(const StepShape& base, int64_t start, int64_t max_tokens, int64_t finish_at,
                     double target_seconds) const;
  const std::array<double, kFeatures>& coefficients() const { return theta_; }

 private:
  struct Sample {
    std::array<double, kFeatures> x;
    double y;
    int kind;
  };
  static std::array<double, kFeatures> Features(const StepShape& s);
  // One of four: one sequence or several, times decodes alone (a token a chunk) or prompt tokens too.
  static int Kind(const StepShape& s);
  void Refit();

  // The calibration samples first (kept until observed steps of their kind displace them), then the window
  // of observed ones, which rolls over.
  std::deque<Sample> samples_;
  size_t calibration_samples_ = 0;
  std::array<double, kFeatures> theta_{};
  bool fitted_ = false;
  double fitted_tokens_ = 0;
  int64_t since_fit_ = 0;

 public:
  // Marks the samples observed so far as the calibration profile, kept when newer ones roll over and until
  // observed steps of their kind displace them.
  void EndCalibration() { calibration_samples_ = samples_.size(); }
  // The calibration samples not yet displaced.
  int64_t calibration_samples() const { return static_cast<int64_t>(calibration_samples_); }
};

// The derived latency target (EngineOptions::kDerivedTbtTarget) of a step whose decode tokens have the
// shape `decode`: 1.5 × their predicted step, so that a prefill chunk adds at most half a decode step to the
// streams' inter-token latency; at least 1.5 × a decode step of 8 sequences at 1024 positions, so that a
// few streams leave prompts room to progress. Without decode tokens nobody waits on the step: 0 (fixed
// chunks).
double DerivedTbtTargetSeconds(const CostModel& model, const StepShape& decode);

// The persistent tier's read-or-recompute choice for `tokens` prompt tokens from position `start` that the
// tier holds, `read_seconds` being its predicted read. Recomputing is chosen only when predicted at most
// half the read: a read runs on the tier's threads beside the steps and delays only the sequence waiting for
// it, while a recomputation is prefill in the shared step that every running stream waits on. A fit whose
// samples never held a step of `tokens` tokens (decodes alone: early on, or once a long generation has
// rolled every prefill out of the window) extrapolates and can price a long prefill near its intercept, below
// any read. Past its samples the recomputation is priced as its largest sampled step scaled by tokens,
// intercept included, so that such a fit cannot turn the choice to recomputing. Without a fit: read.
bool RecomputeRatherThanRead(const CostModel& model, int64_t start, int64_t tokens, double read_seconds);

}  // namespace deepinfer::engine
