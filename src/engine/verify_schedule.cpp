// Scheduled verification (DSpark's hardware-aware prefix scheduler, generalised to every drafter, with
// its production split): the step's verify budget (draft tokens per decoding output, 0 to K) comes from
// measured whole-step costs (VerifyBudgets: the budget with the most predicted tokens per second of the
// process's CPU time, plain decoding included), and within that budget every (sequence, draft position)
// pair is ranked by its predicted survival, so a confident sequence may verify more than a weak one, which
// may verify nothing. The budget for the next step is chosen with this one, so that outputs that will not verify
// are not drafted for. Since verification keeps only what plain decoding would produce, the lengths
// change speed only, never an output.
#include <algorithm>

#include "engine/scheduler.h"

namespace deepinfer::engine {

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

namespace {

struct VerifyCandidate {
  double survival;
  int64_t position;  // 1-based draft position
  size_t seq;
};

// Candidates best first: survival, then position, then sequence (value-independent ties, so that equal
// survivals give every sequence its first positions before anyone's later ones).
void RankCandidates(std::vector<VerifyCandidate>* candidates) {
  std::sort(candidates->begin(), candidates->end(), [](const VerifyCandidate& x, const VerifyCandidate& y) {
    if (x.survival != y.survival) return x.survival > y.survival;
    return x.position != y.position ? x.position < y.position : x.seq < y.seq;
  });
}

// Admits the best candidates, each a per-sequence prefix, up to `budget` positions; returns the predicted
// survivals admitted and fills `lengths` (when given).
double AdmitRanked(const std::vector<VerifyCandidate>& ranked, int64_t budget, std::vector<int64_t>* lengths) {
  std::vector<int64_t> own;
  if (!lengths) lengths = &own;
  size_t most = 0;
  for (const VerifyCandidate& c : ranked) most = std::max(most, c.seq + 1);
  lengths->assign(std::max(lengths->size(), most), 0);
  double expected = 0;
  for (const VerifyCandidate& c : ranked) {
    if (budget <= 0) break;
    if ((*lengths)[c.seq] != c.position - 1) continue;  // a position after one not admitted
    (*lengths)[c.seq] = c.position;
    expected += c.survival;
    --budget;
  }
  return expected;
}

}  // namespace

void Scheduler::ScheduleVerifyLengths(int64_t budget) {
  // Outputs whose drafts the last plan limited below the full block (it chose a smaller budget, or plain
  // decoding, for this step).
  std::vector<bool> limited(running_.size());
  const int64_t full_block = options_.speculative.num_speculative_tokens;
  for (size_t r = 0; r < running_.size(); ++r) {
    limited[r] = running_[r]->draft_limit >= 0 && running_[r]->draft_limit < full_block;
    running_[r]->verify_limit = -1;
    running_[r]->draft_limit = -1;
  }
  measured_budget_ = -1;
  const SpeculativeConfig& sc = options_.speculative;
  if (!sc.enabled() || !sc.scheduled_verification) return;
  // Only decode steps are measured and scheduled: a step that prefills (or may admit) keeps the full
  // block, its time says nothing about the budget.
  if (!waiting_.empty()) {
    next_budget_ = -1;
    return;
  }
  for (const Sequence* s : running_) {
    if (s->pending() != 1 || s->replaying()) {
      next_budget_ = -1;
      return;
    }
  }
  const int k_max = sc.num_speculative_tokens;
  std::vector<Sequence*> decoding(running_.begin(), running_.end());
  const auto decoders = static_cast<int64_t>(decoding.size());
  if (decoders == 0) return;
  // What each sequence verifies with the drafts it has (`now`), and could verify with a full draft
  // (`potential`: the next step's prediction, whatever was drafted for this one).
  std::vector<VerifyCandidate> now, potential;
  std::vector<int64_t> caps(decoding.size()), rooms(decoding.size());
  for (size_t r = 0; r < decoding.size(); ++r) {
    const Sequence* s = decoding[r];
    const int64_t room = VerifyRoom(s, budget);
    rooms[r] = room;
    caps[r] = std::min<int64_t>(room, static_cast<int64_t>(s->draft.size()));
    const std::vector<double> a = PredictedSurvival(s, room);
    for (int64_t j = 0; j < room; ++j) {
      const double p = a[static_cast<size_t>(j)];
      if (!(p > 0)) continue;
      potential.push_back({p, j + 1, r});
      if (j < caps[r]) now.push_back({p, j + 1, r});
    }
  }
  RankCandidates(&now);
  RankCandidates(&potential);
  // The positions a budget gives (each sequence's room up to the budget), and the predicted tokens of a
  // decode step with it: one per output plus the survivals admitted.
  auto positions_of = [&](int b) {
    int64_t n = 0;
    for (int64_t room : rooms) n += std::min<int64_t>(room, b);
    return n;
  };
  std::vector<double> expected(static_cast<size_t>(k_max + 1));
  for (int b = 0; b <= k_max; ++b)
    expected[static_cast<size_t>(b)] = static_cast<double>(decoders) + AdmitRanked(potential, positions_of(b), nullptr);
  const int use = next_budget_ >= 0 && next_budget_ <= k_max ? next_budget_ : budgets_.Choose(decoders, expected, sc.min_predicted_gain);
  next_budget_ = budgets_.Choose(decoders, expected, sc.min_predicted_gain);

  std::vector<int64_t> lengths(decoding.size(), 0);
  int64_t positions = 0;
  for (size_t r = 0; r < decoding.size(); ++r) positions += std::min<int64_t>(caps[r], use);
  AdmitRanked(now, positions, &lengths);
  for (size_t r = 0; r < decoding.size(); ++r) {
    Sequence* s = decoding[r];
    s->verify_limit = lengths[r];
    // The next step's drafts: none where it will not verify; a drafter that predicts survival drafts the
    // whole block (the ranking may give a confident sequence more than the budget).
    s->draft_limit = next_budget_ == 0 ? 0 : s->draft_survival.empty() ? next_budget_ : k_max;
  }
  // The step is measured for the budget whose positions it verifies, b per output: the one it runs, or a
  // smaller one where drafts came out shorter alike (near the end of a drafter's proposals). A step near
  // outputs' ends, whose room is less than the budget, is cheaper than the budget and not measured (its
  // last step verifies nothing, whatever the budget: it is plain decoding's).
  for (int b = use; b >= 0 && measured_budget_ < 0; --b) {
    if (positions == decoders * b) measured_budget_ = b;
  }
  measured_decoders_ = decoders;
  measured_positions_ = positions;
  // Trimmed: the positions the full block would verify (with the drafts there are, whole where the drafts
  // were limited) that this step does not.
  int64_t full = 0;
  for (size_t r = 0; r < decoding.size(); ++r) full += limited[r] ? rooms[r] : caps[r];
  if (positions < full) {
    MutexLock lock(&metrics_->mu);
    ++metrics_->counters.spec_decode_scheduled_steps;
    metrics_->counters.spec_decode_trimmed_positions += static_cast<uint64_t>(full - positions);
  }
}

void Scheduler::ObserveVerifyStep(int64_t decoders, int64_t verified_positions, double seconds) {
  if (measured_budget_ < 0) return;
  if (decoders == measured_decoders_ && verified_positions == measured_positions_)
    budgets_.Observe(measured_decoders_, measured_budget_, seconds);
  measured_budget_ = -1;
}

}  // namespace deepinfer::engine
