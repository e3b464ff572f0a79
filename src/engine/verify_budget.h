// The verify budget of scheduled verification: how many draft tokens per decoding output a decode step
// verifies (0: speculation off for the step), chosen from measured step costs. A linear step-cost model
// fitted to forward passes misses what a verify row costs outside the model (sampling over the vocabulary,
// the next draft) and the kernels' steps in row count (a kernel path that changes with the rows makes one
// more verify token cost far more than the one before), so each (batch size class, budget) keeps the costs
// of its own recent steps.
//
// The cost of a step is the caller's measure of the work it takes: the scheduler gives the process's CPU
// time over the step, which a shared machine's other load hardly moves while it stretches the wall time of
// the same step several times over, and which on a dedicated machine is proportional to the wall time (the
// step's work spreads over the same pool whatever its budget). A budget's cost is the median of its recent
// steps (one preempted step does not hide it); its predicted rate is the caller's expected tokens of the
// step (one per output plus the survivals admitted) over that cost, and the best is used, so the choice
// falls back to plain decoding whenever no budget gains.
//
// Every budget of a class is measured kExploreSamples times first (round-robin, so that a drift reaches
// all alike; where the nearest class is measured, on every kProbeGap-th decision only, the others taking
// that class's choice); after that, other budgets are measured again only as far as a credit pays for
// them: each decision adds kProbeShare of a step to the credit of the budgets not chosen, and a budget is
// probed when its credit covers the share of a step it is predicted to lose (its rate's shortfall against
// the best), which it then spends. A budget as good as the best is probed for free and often, a costly one
// rarely, and probing never costs more than kProbeShare of the time (plus one unpaid probe after each
// sample found well under its budget's table), so that the choice follows changes of load and acceptance
// without giving away what it gains. A budget not chosen is measured again only by these probes: one that
// became much cheaper than its table says waits until its credit covers the loss the table predicts.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::engine {

// CPU time of every thread of this process so far (0 where the clock is missing): a step's cost above.
int64_t ProcessCpuNanos();

class VerifyBudgets {
 public:
  static constexpr int kClasses = 10;           // batch sizes 1, 2-3, 4-7, ..., 256+
  static constexpr int kSamples = 7;            // step costs kept per (class, budget)
  static constexpr int kExploreSamples = 3;     // measured before a class trusts its table
  static constexpr double kProbeShare = 0.004;  // of the steps' tokens spent on probes, at most
  static constexpr int64_t kProbeGap = 4;       // decisions of a class between two probes, at least
  static constexpr double kRecheckBelow = 0.9;  // a step this far under its budget's median: probe it again

  // Budgets 0..max_budget (the configured K).
  explicit VerifyBudgets(int max_budget);

  // The budget a decode step of `decoders` outputs runs. expected[b] (b = 0..max_budget) is the step's
  // predicted tokens with budget b; `min_gain`: any budget above 0 is used only when its predicted rate
  // beats plain decoding's by this fraction, and one below the full block only when it also beats the full
  // block's by it (unless the full block does not beat plain decoding's by it).
  int Choose(int64_t decoders, std::span<const double> expected, double min_gain);
  // A decode step of `decoders` outputs verified what `budget` gives at a cost of `seconds` (its whole
  // step: plan, forward pass, sampling, verification, the next draft).
  void Observe(int64_t decoders, int budget, double seconds);
  // The median of the recent step costs of (class of `decoders`, budget); 0 while unmeasured.
  double CostSeconds(int64_t decoders, int budget) const;
  int max_budget() const { return max_budget_; }
  static int ClassOf(int64_t decoders);

 private:
  struct Cell {
    std::array<double, kSamples> seconds{};
    int count = 0;       // samples taken (the ring holds the last kSamples)
    int64_t last = 0;    // the class's observation count at its last sample
    double credit = 0;   // steps' worth of tokens its probes may still lose
    bool recheck = false;  // its last sample was well under its median: probed again, unpaid
  };
  struct Class {
    int64_t decisions = 0;
    int64_t observed = 0;
    int64_t last_probe = -kProbeGap;  // the decision of the last probe
  };
  Cell& At(int cls, int budget) { return cells_[static_cast<size_t>(cls * (max_budget_ + 1) + budget)]; }
  const Cell& At(int cls, int budget) const { return cells_[static_cast<size_t>(cls * (max_budget_ + 1) + budget)]; }
  static double Median(const Cell& c);
  // The budget class `cls` still has to measure before it trusts its table (-1: none).
  int Explore(int cls) const;
  double Rate(int cls, int budget, std::span<const double> expected) const;
  // The budget of the best predicted rate, within the margins.
  int Best(int cls, std::span<const double> expected, double min_gain) const;

  int max_budget_;
  std::vector<Cell> cells_;
  std::array<Class, kClasses> classes_{};
};

}  // namespace deepinfer::engine
