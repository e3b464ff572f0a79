#include "engine/verify_budget.h"

#include <algorithm>

namespace deepinfer::engine {

VerifyBudgets::VerifyBudgets(int max_budget)
    : max_budget_(std::max(max_budget, 0)), cells_(static_cast<size_t>(kClasses * (max_budget_ + 1))) {
  for (Class& k : classes_) k.reference = max_budget_;
}

int VerifyBudgets::ClassOf(int64_t decoders) {
  int cls = 0;
  while (cls + 1 < kClasses && (int64_t{2} << cls) <= decoders) ++cls;
  return cls;
}

int VerifyBudgets::Reference(int64_t decoders) const { return classes_[static_cast<size_t>(ClassOf(decoders))].reference; }

double VerifyBudgets::Relative(int cls, int budget) const {
  if (budget == classes_[static_cast<size_t>(cls)].reference) return 1;
  const Cell& c = At(cls, budget);
  const int n = std::min(c.count, kSamples);
  if (n == 0) return 0;
  std::array<double, kSamples> sorted{};
  for (int i = 0; i < n; ++i) {  // insertion sort of the few ratios
    int j = i;
    for (; j > 0 && sorted[static_cast<size_t>(j - 1)] > c.ratios[static_cast<size_t>(i)]; --j)
      sorted[static_cast<size_t>(j)] = sorted[static_cast<size_t>(j - 1)];
    sorted[static_cast<size_t>(j)] = c.ratios[static_cast<size_t>(i)];
  }
  const auto mid = static_cast<size_t>(n / 2);
  return n % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

double VerifyBudgets::RelativeSeconds(int64_t decoders, int budget) const {
  if (budget < 0 || budget > max_budget_) return 0;
  return Relative(ClassOf(decoders), budget);
}

void VerifyBudgets::Observe(int64_t decoders, int budget, double seconds) {
  if (budget < 0 || budget > max_budget_ || !(seconds > 0)) return;
  Class& k = classes_[static_cast<size_t>(ClassOf(decoders))];
  if (budget == k.reference) {
    // A probe between two reference steps: priced against their mean, so that a load that changes
    // steadily over the three steps cancels.
    const double before = k.pending_before;
    if (k.pending >= 0 && before > 0 && std::max(before, seconds) <= kSteadyLoad * std::min(before, seconds)) {
      Cell& c = At(ClassOf(decoders), k.pending);
      c.ratios[static_cast<size_t>(c.count % kSamples)] = k.pending_seconds / ((before + seconds) / 2);
      ++c.count;
    }
    k.pending = -1;
    k.reference_seconds = seconds;
    return;
  }
  // A probe with no reference step before it (the first since the reference changed) is not priced; of two
  // probes in a row, the later one is.
  k.pending = k.reference_seconds > 0 ? budget : -1;
  k.pending_seconds = seconds;
  k.pending_before = k.reference_seconds;
}

void VerifyBudgets::Rebase(int cls, int budget) {
  Class& k = classes_[static_cast<size_t>(cls)];
  if (budget == k.reference) return;
  const double scale = Relative(cls, budget);
  Cell& next = At(cls, budget);
  Cell& previous = At(cls, k.reference);
  for (int b = 0; b <= max_budget_; ++b) {
    if (b == budget || b == k.reference) continue;
    Cell& c = At(cls, b);
    for (int i = 0; i < std::min(c.count, kSamples); ++i) c.ratios[static_cast<size_t>(i)] /= scale;
  }
  // The old reference's cost in units of the new one: the inverses of the new one's ratios.
  previous.count = next.count;
  for (int i = 0; i < std::min(next.count, kSamples); ++i)
    previous.ratios[static_cast<size_t>(i)] = 1 / next.ratios[static_cast<size_t>(i)];
  previous.probes = std::max(previous.probes, next.probes);
  previous.last = next.last;
  next.count = 0;
  k.reference = budget;
  k.reference_seconds = 0;
  k.pending = -1;
}

int VerifyBudgets::Probe(int cls, int budget) {
  Cell& c = At(cls, budget);
  ++c.probes;
  c.last = classes_[static_cast<size_t>(cls)].steps - 1;
  return budget;
}

double VerifyBudgets::ProbeLoss(int cls, int budget, std::span<const double> expected) const {
  const Cell& c = At(cls, budget);
  double relative = 0;
  for (int i = 0; i < std::min(c.count, kSamples); ++i)
    relative = i == 0 ? c.ratios[0] : std::min(relative, c.ratios[static_cast<size_t>(i)]);
  const double reference = expected[static_cast<size_t>(classes_[static_cast<size_t>(cls)].reference)];
  if (!(relative > 0) || !(reference > 0)) return 0;
  return std::max(relative - expected[static_cast<size_t>(budget)] / reference, 0.0);
}

int VerifyBudgets::Choose(int64_t decoders, std::span<const double> expected, double min_gain) {
  const int cls = ClassOf(decoders);
  Class& k = classes_[static_cast<size_t>(cls)];
  const int64_t step = k.steps++;
  if (static_cast<int>(expected.size()) != max_budget_ + 1) return max_budget_;
  // Every budget is priced kExploreSamples times before the costs are trusted (a probe awaiting its
  // reference step counts; one unpriced is repeated, four times at most), each between two reference steps: the
  // fewest first, the full block, then plain decoding, then the budgets between.
  int explore = -1, fewest = 0;
  for (int i = 0; i <= max_budget_; ++i) {
    const int b = i == 0 ? max_budget_ : i - 1;
    if (b == k.reference) continue;
    const Cell& c = At(cls, b);
    const int priced = c.count + (k.pending == b ? 1 : 0);
    if (priced < kExploreSamples && c.probes < kExploreSamples + 4 && (explore < 0 || priced < fewest))
      explore = b, fewest = priced;
  }
  if (explore >= 0) return step % 2 ? Probe(cls, explore) : k.reference;
  auto rate = [&](int b) {
    const double relative = Relative(cls, b);
    return relative > 0 ? expected[static_cast<size_t>(b)] / relative : 0.0;
  };
  int best = 0;
  for (int b = 1; b <= max_budget_; ++b) {
    if (rate(b) > rate(best)) best = b;
  }
  // Verification must beat plain decoding by the margin: a gain inside the costs' noise does not pay for
  // the risk of slower steps. A trimmed budget must beat the full block by the margin, unless the full
  // block does not pass plain decoding's.
  const double plain = rate(0) * (1 + min_gain);
  if (best != 0 && !(rate(best) > plain)) best = 0;
  const double full = rate(max_budget_);
  if (best != 0 && best != max_budget_ && full > plain && !(rate(best) > full * (1 + min_gain))) best = max_budget_;
  // A probe awaiting its reference step is priced before the reference changes; an unpriced budget (its
  // probes lost) never becomes the reference.
  if (k.pending >= 0) return k.reference;
  if (rate(best) > 0) Rebase(cls, best);
  // Now and then another budget is probed, so a change of load or acceptance moves the choice: every
  // kProbeEvery steps the budget probed longest ago among those whose credit pays for its predicted loss.
  // Each budget's credit grows by its part of kProbeShare, so a cheap one (a neighbour of the reference,
  // one predicted to gain) is probed often and an expensive one rarely, and none waits on another.
  const int reference = k.reference;
  int probe = -1;
  for (int b = 0; b <= max_budget_; ++b) {
    if (b == reference) continue;
    Cell& c = At(cls, b);
    c.credit += kProbeShare / max_budget_;
    if (c.credit >= ProbeLoss(cls, b, expected) && (probe < 0 || c.last < At(cls, probe).last)) probe = b;
  }
  if (probe < 0 || step % kProbeEvery != kProbeEvery - 1) return reference;
  At(cls, probe).credit -= ProbeLoss(cls, probe, expected);
  return Probe(cls, probe);
}

}  // namespace deepinfer::engine
