// The verify budget of scheduled verification: how many draft tokens per decoding output a decode step
// verifies (0: speculation off for the step), chosen from the measured time of whole steps. A linear
// step-cost model fitted to forward passes misses what a verify row costs outside the model (sampling over
// the vocabulary, the next draft) and the saturation of the routed experts a batch reads, and its slope
// per token is not identifiable from steps of one shape; measured step times per (batch size class,
// budget) are.
//
// A shared machine's other load slows every step by a factor that swings over seconds, so step times of
// two budgets compare only when taken at the same moment. Each batch size class therefore runs one
// reference budget (the best so far) and prices every other budget by paired probes: a probe step's time
// over the mean of the reference steps just before and just after it (unpriced when those two differ by
// more than kSteadyLoad: the load changed during the probe). A budget's cost is the median of
// its recent paired ratios, in units of the reference's step time, whatever the load was and however
// rarely the budget was probed (a fastest-of-recent-times table favours the rarely measured budgets, whose
// few samples span more of the load's quiet moments). Each budget's predicted rate is the caller's
// expected tokens of the step (one per output plus the survivals admitted) over its relative cost; the
// best becomes the reference (the others' ratios rescaled to it), so the choice falls back to plain
// decoding whenever no budget is measured to gain. Every budget is probed twice first, between reference
// steps, and then now and then the budget probed longest ago among those whose probe is paid for: its
// predicted loss (its relative cost less the reference's time for the tokens it predicts) comes from a
// credit that grows by the budget's part of kProbeShare of a reference step per step, so probing costs
// at most that share of the time however expensive the other budgets are (a full block of verify tokens
// at a large batch is probed rarely; a neighbour of the reference or a budget predicted to gain, often),
// and the costs follow the load and the acceptance.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::engine {

class VerifyBudgets {
 public:
  static constexpr int kClasses = 10;           // batch sizes 1, 2-3, 4-7, ..., 256+
  static constexpr int kSamples = 5;            // paired ratios kept per (class, budget)
  static constexpr int kExploreSamples = 2;     // probes of each budget before a class trusts its costs
  static constexpr int64_t kProbeEvery = 8;     // steps of a class between probes, at most
  static constexpr double kProbeShare = 0.005;  // of the time spent on probes' predicted losses, at most
  static constexpr double kSteadyLoad = 3;      // the most the reference steps around a priced probe differ

  // Budgets 0..max_budget (the configured K); the full block is every class's first reference.
  explicit VerifyBudgets(int max_budget);

  // The budget a decode step of `decoders` outputs runs. expected[b] (b = 0..max_budget) is the step's
  // predicted tokens with budget b; `min_gain`: any budget above 0 is used only when its predicted rate
  // beats plain decoding's by this fraction, and one below the full block only when it also beats the full
  // block's by it (unless the full block does not beat plain decoding's by it).
  int Choose(int64_t decoders, std::span<const double> expected, double min_gain);
  // A decode step of `decoders` outputs ran `budget` in `seconds` (its whole step: plan, forward pass,
  // sampling, verification, the next draft). Steps are observed in the order they ran.
  void Observe(int64_t decoders, int budget, double seconds);
  // The budget the class of `decoders` prices the others against.
  int Reference(int64_t decoders) const;
  // The step time of `budget` over the reference's (the median of its recent paired ratios): 1 for the
  // reference, 0 while unpriced.
  double RelativeSeconds(int64_t decoders, int budget) const;
  int max_budget() const { return max_budget_; }
  static int ClassOf(int64_t decoders);

 private:
  struct Cell {
    std::array<double, kSamples> ratios{};  // step time over the reference's, the last kSamples probes
    int count = 0;                          // ratios taken (the ring holds the last kSamples)
    int probes = 0;                         // times chosen as a probe
    int64_t last = -1;                      // the class's decision count at its last probe
    double credit = 0;                      // reference step times its probes may still lose
  };
  struct Class {
    int reference = 0;
    double reference_seconds = 0;  // the reference's last step time since it became the reference
    int pending = -1;              // a probe observed after reference_seconds, awaiting the next one
    double pending_seconds = 0;
    double pending_before = 0;
    int64_t steps = 0;  // decisions (the probe clock)
  };
  Cell& At(int cls, int budget) { return cells_[static_cast<size_t>(cls * (max_budget_ + 1) + budget)]; }
  const Cell& At(int cls, int budget) const { return cells_[static_cast<size_t>(cls * (max_budget_ + 1) + budget)]; }
  double Relative(int cls, int budget) const;
  // Makes `budget` the class's reference: every other budget's ratios are divided by its cost.
  void Rebase(int cls, int budget);
  int Probe(int cls, int budget);
  // The reference step times a probe of `budget` is predicted to lose: its lowest recent ratio (optimistic,
  // so that a budget priced too high in a noisy moment is not starved of the probes that correct it) less
  // the reference's time for the tokens it predicts; none when unpriced (it cannot be chosen until priced).
  double ProbeLoss(int cls, int budget, std::span<const double> expected) const;

  int max_budget_;
  std::vector<Cell> cells_;
  std::array<Class, kClasses> classes_{};
};

}  // namespace deepinfer::engine
