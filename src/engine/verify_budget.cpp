#include "engine/verify_budget.h"

#include <ctime>

#include <algorithm>

namespace deepinfer::engine {

int64_t ProcessCpuNanos() {
  timespec t{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

VerifyBudgets::VerifyBudgets(int max_budget)
    : max_budget_(std::max(max_budget, 0)), cells_(static_cast<size_t>(kClasses * (max_budget_ + 1))) {}

int VerifyBudgets::ClassOf(int64_t decoders) {
  int cls = 0;
  while (cls + 1 < kClasses && (int64_t{2} << cls) <= decoders) ++cls;
  return cls;
}

double VerifyBudgets::Median(const Cell& c) {
  const int n = std::min(c.count, kSamples);
  if (n == 0) return 0;
  std::array<double, kSamples> sorted{};
  for (int i = 0; i < n; ++i) {  // insertion sort of the few samples
    int j = i;
    for (; j > 0 && sorted[static_cast<size_t>(j - 1)] > c.seconds[static_cast<size_t>(i)]; --j)
      sorted[static_cast<size_t>(j)] = sorted[static_cast<size_t>(j - 1)];
    sorted[static_cast<size_t>(j)] = c.seconds[static_cast<size_t>(i)];
  }
  const auto mid = static_cast<size_t>(n / 2);
  return n % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

double VerifyBudgets::CostSeconds(int64_t decoders, int budget) const {
  if (budget < 0 || budget > max_budget_) return 0;
  return Median(At(ClassOf(decoders), budget));
}

void VerifyBudgets::Observe(int64_t decoders, int budget, double seconds) {
  if (budget < 0 || budget > max_budget_ || !(seconds > 0)) return;
  const int cls = ClassOf(decoders);
  Cell& c = At(cls, budget);
  // A budget that costs clearly less than its table says is measured again soon: a rarely probed budget's
  // table may be stale, and its median moves only with a few new samples.
  if (const double median = Median(c); median > 0 && seconds < kRecheckBelow * median) c.recheck = true;
  c.seconds[static_cast<size_t>(c.count % kSamples)] = seconds;
  ++c.count;
  c.last = ++classes_[static_cast<size_t>(cls)].observed;
}

int VerifyBudgets::Explore(int cls) const {
  // The fewest samples first; among equals the full block, then plain decoding, then the budgets between.
  int explore = -1;
  for (int i = 0; i <= max_budget_; ++i) {
    const int b = i == 0 ? max_budget_ : i - 1;
    const int count = At(cls, b).count;
    if (count < kExploreSamples && (explore < 0 || count < At(cls, explore).count)) explore = b;
  }
  return explore;
}

double VerifyBudgets::Rate(int cls, int budget, std::span<const double> expected) const {
  const double seconds = Median(At(cls, budget));
  return seconds > 0 ? expected[static_cast<size_t>(budget)] / seconds : 0.0;
}

int VerifyBudgets::Best(int cls, std::span<const double> expected, double min_gain) const {
  auto rate = [&](int b) { return Rate(cls, b, expected); };
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
  return best;
}

int VerifyBudgets::Choose(int64_t decoders, std::span<const double> expected, double min_gain) {
  const int cls = ClassOf(decoders);
  Class& k = classes_[static_cast<size_t>(cls)];
  const int64_t decision = k.decisions++;
  if (static_cast<int>(expected.size()) != max_budget_ + 1) return max_budget_;
  // Every budget is measured before the table is trusted. Meanwhile, where the nearest class is measured,
  // only every kProbeGap-th decision explores and the others take that class's choice: a batch size seen
  // for a few steps at a time (the last outputs of a batch) does not spend them all on bad budgets.
  if (const int explore = Explore(cls); explore >= 0) {
    if (decision % kProbeGap == 0) return explore;
    for (int distance = 1; distance < kClasses; ++distance) {
      for (int near : {cls - distance, cls + distance}) {
        if (near >= 0 && near < kClasses && Explore(near) < 0) return Best(near, expected, min_gain);
      }
    }
    return explore;
  }
  const int best = Best(cls, expected, min_gain);
  auto rate = [&](int b) { return Rate(cls, b, expected); };
  // Probes paid from the credit: the budget measured longest ago among those whose credit covers their
  // predicted loss, at most one every kProbeGap decisions.
  const double best_rate = rate(best);
  auto loss = [&](int b) { return best_rate > 0 ? std::clamp(1 - rate(b) / best_rate, 0.0, 1.0) : 0.0; };
  int probe = -1;
  for (int b = 0; b <= max_budget_; ++b) {
    if (b == best) continue;
    Cell& c = At(cls, b);
    c.credit = std::min(c.credit + kProbeShare / max_budget_, 1.0);
    if ((c.recheck || c.credit >= loss(b)) && (probe < 0 || c.last < At(cls, probe).last)) probe = b;
  }
  if (probe < 0 || decision - k.last_probe < kProbeGap) return best;
  Cell& c = At(cls, probe);
  if (c.recheck) {
    c.recheck = false;
  } else {
    c.credit -= loss(probe);
  }
  k.last_probe = decision;
  return probe;
}

}  // namespace deepinfer::engine
