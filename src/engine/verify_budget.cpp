#include "engine/verify_budget.h"

#include <algorithm>

namespace deepinfer::engine {

VerifyBudgets::VerifyBudgets(int max_budget)
    : max_budget_(std::max(max_budget, 0)), cells_(static_cast<size_t>(kClasses * (max_budget_ + 1))) {}

int VerifyBudgets::ClassOf(int64_t decoders) {
  int cls = 0;
  while (cls + 1 < kClasses && (int64_t{2} << cls) <= decoders) ++cls;
  return cls;
}

double VerifyBudgets::Fastest(const Cell& c) {
  const int n = std::min(c.count, kSamples);
  if (n == 0) return 0;
  return *std::min_element(c.seconds.begin(), c.seconds.begin() + n);
}

double VerifyBudgets::FastestSeconds(int64_t decoders, int budget) const {
  if (budget < 0 || budget > max_budget_) return 0;
  return Fastest(At(ClassOf(decoders), budget));
}

void VerifyBudgets::Observe(int64_t decoders, int budget, double seconds) {
  if (budget < 0 || budget > max_budget_ || !(seconds > 0)) return;
  const int cls = ClassOf(decoders);
  Cell& c = At(cls, budget);
  c.seconds[static_cast<size_t>(c.count % kSamples)] = seconds;
  ++c.count;
  c.last = ++observed_[static_cast<size_t>(cls)];
}

int VerifyBudgets::Choose(int64_t decoders, std::span<const double> expected, double min_gain) {
  const int cls = ClassOf(decoders);
  const int64_t step = steps_[static_cast<size_t>(cls)]++;
  if (static_cast<int>(expected.size()) != max_budget_ + 1) return max_budget_;
  // Every budget is measured before the table is trusted: the fewest samples first, the full block, then
  // plain decoding, then the budgets between.
  int explore = -1;
  for (int i = 0; i <= max_budget_; ++i) {
    const int b = i == 0 ? max_budget_ : i - 1;
    const int count = At(cls, b).count;
    if (count < kExploreSamples && (explore < 0 || count < At(cls, explore).count)) explore = b;
  }
  if (explore >= 0) return explore;
  auto rate = [&](int b) {
    const double seconds = Fastest(At(cls, b));
    return seconds > 0 ? expected[static_cast<size_t>(b)] / seconds : 0.0;
  };
  int best = 0;
  for (int b = 1; b <= max_budget_; ++b) {
    if (rate(b) > rate(best)) best = b;
  }
  // Verification must beat plain decoding by the margin: a gain inside the table's noise does not pay for
  // the risk of slower steps. A trimmed budget must beat the full block by the margin, unless the full
  // block does not pass plain decoding's.
  const double plain = rate(0) * (1 + min_gain);
  if (best != 0 && !(rate(best) > plain)) best = 0;
  const double full = rate(max_budget_);
  if (best != 0 && best != max_budget_ && full > plain && !(rate(best) > full * (1 + min_gain))) best = max_budget_;
  // Now and then another budget is measured again, so a change of load or acceptance moves the choice: a
  // neighbour of the best (alternately the smaller and the larger), and every fourth time the budget
  // measured longest ago.
  if (step % kProbeEvery == kProbeEvery - 1) {
    const int64_t slot = step / kProbeEvery;
    if (slot % 4 == 3) {
      int stalest = -1;
      for (int b = 0; b <= max_budget_; ++b) {
        if (b != best && (stalest < 0 || At(cls, b).last < At(cls, stalest).last)) stalest = b;
      }
      if (stalest >= 0) return stalest;
    }
    const int probe = slot % 2 ? best + 1 : best - 1;
    if (probe >= 0 && probe <= max_budget_) return probe;
  }
  return best;
}

}  // namespace deepinfer::engine
