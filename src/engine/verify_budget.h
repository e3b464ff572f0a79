// The verify budget of scheduled verification: how many draft tokens per decoding output a decode step
// verifies (0: speculation off for the step), chosen from the measured time of whole steps. A linear
// step-cost model fitted to forward passes misses what a verify row costs outside the model (sampling over
// the vocabulary, the next draft) and the saturation of the routed experts a batch reads, and its slope
// per token is not identifiable from steps of one shape; a table of measured step times per (batch size
// class, budget) is. Each budget's predicted rate is the caller's expected tokens of the step (one per
// output plus the survivals admitted) over the fastest of its recent step times (a shared machine's other
// load only ever slows a step, so the fastest is the closest to what the budget costs, and one unlucky
// step does not hide a budget); the best is used, so the choice falls back to plain decoding whenever no
// budget is measured to gain. Every budget of a class is
// measured twice first (round-robin, so that a shared machine's load swings reach all alike), and then
// now and then a neighbour of the best, and every fourth time the budget measured longest ago (so that one
// measured in a bad moment is not passed over for good), so the table follows the load.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::engine {

class VerifyBudgets {
 public:
  static constexpr int kClasses = 10;           // batch sizes 1, 2-3, 4-7, ..., 256+
  static constexpr int kSamples = 5;            // step times kept per (class, budget)
  static constexpr int kExploreSamples = 2;     // measured before a class trusts its table
  static constexpr int64_t kProbeEvery = 8;     // steps of a class between measurements of a neighbour

  // Budgets 0..max_budget (the configured K).
  explicit VerifyBudgets(int max_budget);

  // The budget a decode step of `decoders` outputs runs. expected[b] (b = 0..max_budget) is the step's
  // predicted tokens with budget b; `min_gain`: any budget above 0 is used only when its predicted rate
  // beats plain decoding's by this fraction, and one below the full block only when it also beats the full
  // block's by it (unless the full block does not beat plain decoding's by it).
  int Choose(int64_t decoders, std::span<const double> expected, double min_gain);
  // A decode step of `decoders` outputs ran `budget` in `seconds` (its whole step: plan, forward pass,
  // sampling, verification, the next draft).
  void Observe(int64_t decoders, int budget, double seconds);
  // The fastest of the recent step times of (class of `decoders`, budget); 0 while unmeasured.
  double FastestSeconds(int64_t decoders, int budget) const;
  int max_budget() const { return max_budget_; }
  static int ClassOf(int64_t decoders);

 private:
  struct Cell {
    std::array<double, kSamples> seconds{};
    int count = 0;     // samples taken (the ring holds the last kSamples)
    int64_t last = 0;  // the class's observation count at its last sample
  };
  Cell& At(int cls, int budget) { return cells_[static_cast<size_t>(cls * (max_budget_ + 1) + budget)]; }
  const Cell& At(int cls, int budget) const { return cells_[static_cast<size_t>(cls * (max_budget_ + 1) + budget)]; }
  static double Fastest(const Cell& c);

  int max_budget_;
  std::vector<Cell> cells_;
  std::array<int64_t, kClasses> steps_{};  // decisions per class (the probe clock)
  std::array<int64_t, kClasses> observed_{};  // observations per class
};

}  // namespace deepinfer::engine
