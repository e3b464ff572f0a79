#include "router/placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace deepinfer::router {

namespace {

// One step of `decodes` sequences of context about `context` each, plus `prefill` tokens of one chunk at
// position `start`: the engine's cost model terms (engine/cost_model.h's StepShape).
double StepSeconds(const std::array<double, kStepCostTerms>& c, double decodes, double context, double prefill,
                   double start) {
  const double tokens = decodes + prefill;
  const double logit_rows = decodes + (prefill > 0 ? 1 : 0);
  const double attended = decodes * context + prefill * (start + prefill / 2);
  const double chunks = decodes + (prefill > 0 ? 1 : 0);
  return c[0] + c[1] * tokens + c[2] * logit_rows + c[3] * attended + c[4] * chunks;
}

}  // namespace

Prediction Predict(const PlacementLoad& unit, int64_t prompt_tokens) {
  const UnitLoad& load = unit.published;
  const auto& c = load.calibrated ? load.step_cost : kDefaultStepCost;
  const double decodes = static_cast<double>(std::max(load.running, unit.placed_streams));
  const double prompt = static_cast<double>(std::max<int64_t>(prompt_tokens, 1));
  // Running sequences' context is not published; the new prompt's length stands for it.
  const double context = prompt;
  const double queued = static_cast<double>(std::max(load.queued_prefill_tokens, unit.placed_prefill_tokens));
  // The queued prefill ahead, then this prompt, in chunks that each share a step with the decodes.
  const double chunk = static_cast<double>(kPrefillChunkTokens);
  const double ahead_steps = std::ceil(queued / chunk);
  const double own_steps = std::ceil(prompt / chunk);
  double ttft = ahead_steps * StepSeconds(c, decodes, context, std::min(queued, chunk), 0);
  // This prompt's chunks: the attended context grows with each one.
  for (double done = 0, i = 0; i < own_steps; ++i, done += chunk)
    ttft += StepSeconds(c, decodes, context, std::min(chunk, prompt - done), done);
  // A full batch: this request waits for a slot, about one decode step per waiting request ahead.
  if (load.max_num_seqs > 0 && decodes >= static_cast<double>(load.max_num_seqs))
    ttft += static_cast<double>(load.waiting + 1) * StepSeconds(c, decodes, context, 0, 0);
  Prediction p;
  p.ttft_s = ttft;
  p.tbt_s = StepSeconds(c, decodes + 1, context, 0, 0);
  return p;
}

PlacementDecision Place(std::span<const PlacementLoad> units, int64_t prompt_tokens, const PlacementSlo& slo) {
  PlacementDecision d;
  struct Candidate {
    int index;
    Prediction p;
    bool meets;
  };
  Candidate candidates[64];
  std::vector<Candidate> many;
  Candidate* list = candidates;
  if (units.size() > std::size(candidates)) {
    many.resize(units.size());
    list = many.data();
  }
  size_t n = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    if (!units[i].usable) continue;
    const Prediction p = Predict(units[i], prompt_tokens);
    const bool meets = (slo.ttft_s <= 0 || p.ttft_s <= slo.ttft_s) && (slo.tbt_s <= 0 || p.tbt_s <= slo.tbt_s);
    list[n++] = {static_cast<int>(i), p, meets};
  }
  if (n == 0) return d;
  // Those meeting the SLO first, each group by predicted TTFT; ties by fewer placed streams, then index.
  std::sort(list, list + n, [&](const Candidate& a, const Candidate& b) {
    if (a.meets != b.meets) return a.meets;
    if (a.p.ttft_s != b.p.ttft_s) return a.p.ttft_s < b.p.ttft_s;
    const int64_t sa = units[static_cast<size_t>(a.index)].placed_streams;
    const int64_t sb = units[static_cast<size_t>(b.index)].placed_streams;
    if (sa != sb) return sa < sb;
    return a.index < b.index;
  });
  d.best = list[0].p;
  if (!list[0].meets) {
    // Refused: retry once the best unit's excess TTFT has drained (at least a second, as Retry-After counts).
    const double excess_ttft = slo.ttft_s > 0 ? list[0].p.ttft_s - slo.ttft_s : 0;
    const double excess_tbt = slo.tbt_s > 0 && list[0].p.tbt_s > slo.tbt_s ? list[0].p.tbt_s * 16 : 0;
    d.retry_after_s = std::max({1.0, excess_ttft, excess_tbt});
    return d;
  }
  d.order.reserve(n);
  for (size_t i = 0; i < n; ++i) d.order.push_back(list[i].index);
  return d;
}

}  // namespace deepinfer::router
