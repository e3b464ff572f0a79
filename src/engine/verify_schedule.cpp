// Scheduled verification (DSpark's hardware-aware prefix scheduler, generalised to every drafter): each
// step, every (sequence, draft position) pair is ranked by its predicted survival, and pairs are admitted
// in that order while the predicted accepted tokens per predicted second of the step (the calibrated
// step-cost model) grow. A sequence may verify nothing (it decodes plainly). Since verification keeps only
// what plain decoding would produce, the lengths change speed only, never an output.
#include <algorithm>

#include "engine/scheduler.h"

namespace deepinfer::engine {
namespace {

constexpr int64_t kMinCostObservations = 16;

}  // namespace

std::vector<double> Scheduler::PredictedSurvival(const Sequence* s, int64_t k) const {
  std::vector<double> a;
  if (static_cast<int64_t>(s->draft_survival.size()) >= k) {
    for (int64_t j = 0; j < k; ++j) a.push_back(s->draft_survival[static_cast<size_t>(j)]);
    return a;
  }
  // The conditional acceptance rate of each position with one accepted and one rejected draft assumed
  // before any is seen (a uniform prior), multiplied along the draft.
  double survival = 1;
  for (int64_t j = 0; j < k && j < kMaxSpeculativeTokens; ++j) {
    survival *= (accepted_at_[static_cast<size_t>(j)] + 1) / (reached_at_[static_cast<size_t>(j)] + 2);
    a.push_back(survival);
  }
  return a;
}

void Scheduler::ObserveAcceptance(int64_t verified, int64_t accepted) {
  // Recent drafts weigh most: the counts decay by a factor 0.999 per observation (a window of about 1,000).
  for (size_t j = 0; j < reached_at_.size(); ++j) {
    reached_at_[j] *= 0.999;
    accepted_at_[j] *= 0.999;
  }
  for (int64_t j = 0; j < verified && j <= accepted && j < kMaxSpeculativeTokens; ++j) {
    reached_at_[static_cast<size_t>(j)] += 1;
    if (j < accepted) accepted_at_[static_cast<size_t>(j)] += 1;
  }
}

void Scheduler::ScheduleVerifyLengths(int64_t budget) {
  for (Sequence* s : running_) s->verify_limit = -1;
  const SpeculativeConfig& sc = options_.speculative;
  // The cost model prices a step from a few observed steps at least (its first fits are rough).
  if (!sc.enabled() || !sc.scheduled_verification || !cost_.ready() || cost_.observations() < kMinCostObservations)
    return;
  // A step that prefills (or may admit) keeps the full block: the cost model's view of such steps is
  // too coarse to trade verify tokens against prefill tokens.
  if (!waiting_.empty()) return;
  for (const Sequence* s : running_) {
    if (s->pending() != 1 || s->replaying()) return;
  }
  struct Candidate {
    double survival;
    int64_t position;  // 1-based draft position
    size_t seq;
  };
  std::vector<Sequence*> decoding(running_.begin(), running_.end());
  std::vector<int64_t> caps(decoding.size()), lengths(decoding.size(), 0);
  std::vector<Candidate> candidates;
  StepShape shape;
  double expected = 0;  // predicted accepted tokens (each sequence's pending token counts as one)
  for (size_t r = 0; r < decoding.size(); ++r) {
    Sequence* s = decoding[r];
    shape.AddChunk(s->computed, 1, true);
    expected += 1;
    caps[r] = VerifyLength(s, budget);
    const std::vector<double> a = PredictedSurvival(s, caps[r]);
    for (int64_t j = 0; j < caps[r]; ++j) {
      if (a[static_cast<size_t>(j)] > 0) candidates.push_back({a[static_cast<size_t>(j)], j + 1, r});
    }
  }
  if (candidates.empty()) return;
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
    return x.survival != y.survival ? x.survival > y.survival : x.position < y.position;
  });
  // One more verify token for sequence r: a row through the model and the head, attending to the
  // positions before it.
  auto grow = [&](StepShape* sh, size_t r) {
    const int64_t n = 1 + lengths[r];
    sh->tokens += 1;
    sh->logit_rows += 1;
    sh->context += static_cast<double>(decoding[r]->computed) + static_cast<double>(n) + 0.5;
  };
  auto rate = [&](const StepShape& sh, double tokens) {
    const double seconds = cost_.Predict(sh);
    return seconds > 0 ? tokens / seconds : 0.0;
  };
  std::vector<int64_t> best(lengths);
  double best_rate = rate(shape, expected);
  for (const Candidate& c : candidates) {
    if (lengths[c.seq] != c.position - 1) continue;  // a position after one not admitted
    grow(&shape, c.seq);
    lengths[c.seq] = c.position;
    expected += c.survival;
    const double r = rate(shape, expected);
    if (!(r > best_rate)) break;  // the first admission that does not pay ends the search
    best_rate = r;
    best = lengths;
  }
  // The full block: every sequence verifies what it can.
  StepShape full;
  double full_expected = 0;
  std::fill(lengths.begin(), lengths.end(), 0);
  for (size_t r = 0; r < decoding.size(); ++r) {
    full.AddChunk(decoding[r]->computed, 1, true);
    const std::vector<double> a = PredictedSurvival(decoding[r], caps[r]);
    full_expected += 1;
    for (int64_t j = 0; j < caps[r]; ++j) {
      grow(&full, r);
      ++lengths[r];
      full_expected += a[static_cast<size_t>(j)];
    }
  }
  if (!(best_rate > rate(full, full_expected) * (1 + sc.min_predicted_gain))) return;
  for (size_t r = 0; r < decoding.size(); ++r) decoding[r]->verify_limit = best[r];
  MutexLock lock(&metrics_->mu);
  ++metrics_->counters.spec_decode_scheduled_steps;
}

}  // namespace deepinfer::engine
