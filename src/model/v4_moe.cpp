// V4 mixture of experts: sqrt(softplus) (or sigmoid) router scores, experts chosen by a token-id table
// (hash layers) or by top-k of score + bias, weights renormalised and scaled, clamped SwiGLU experts, plus
// the shared expert.
#include <algorithm>
#include <cmath>
#include <optional>

#include "core/thread_pool.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "model/step_profile.h"
#include "model/v4_internal.h"

namespace deepinfer::model::v4 {
namespace {

float Score(const std::string& func, float logit) {
  if (func == "sigmoid") return 1.0f / (1.0f + std::exp(-logit));
  // softplus as torch computes it (linear above 20), then sqrt.
  const float softplus = logit > 20.0f ? logit : std::log1p(std::exp(logit));
  return std::sqrt(softplus);
}

}  // namespace

void Moe(const Step& step, const BlockRef& block, const float* x, float* out) {
  const V4Config& c = *step.config;
  const V4MoeWeights& w = block.weights->moe;
  const int64_t n = step.num_rows(), d = c.hidden_size, e = c.n_routed_experts, k = c.num_experts_per_tok;

  ScopedPhase phase(Phase::kMoeGate);
  std::vector<float> logits(static_cast<size_t>(n * e));
  kernels::Linear(x, n, d, w.gate, logits.data(), e, step.linear, step.pool);
  std::vector<int32_t> chosen(static_cast<size_t>(n * k));
  std::vector<float> weights(static_cast<size_t>(n * k));
  std::vector<float> scores(e), biased(e);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < e; ++j) scores[j] = Score(c.scoring_func, logits[i * e + j]);
    int32_t* sel = chosen.data() + i * k;
    if (block.router == V4RouterType::kHash) {
      const int32_t* row = w.tid2eid.data() + static_cast<int64_t>(step.rows[i].token) * k;
      std::copy(row, row + k, sel);
    } else {
      for (int64_t j = 0; j < e; ++j) biased[j] = scores[j] + w.gate_bias[j];
      kernels::TopK(biased.data(), e, k, sel, nullptr);
    }
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += scores[sel[j]];
    for (int64_t j = 0; j < k; ++j)
      weights[i * k + j] = scores[sel[j]] / (sum + 1e-20f) * static_cast<float>(c.routed_scaling_factor);
  }

  // Each routed expert over the rows routed to it, and the shared expert over all rows: every gate and
  // up product in one balanced hand-off, the clamped SwiGLU, then every down product in another; the
  // routed outputs are then summed in increasing expert order.
  phase.Switch(Phase::kMoeExperts);
  struct Work {
    const V4ExpertWeights* weights;
    std::vector<int64_t> rows;
    std::vector<float> row_weights, input, gate, up, output;
  };
  std::vector<Work> work;
  for (int64_t ex = 0; ex < e; ++ex) {
    Work item{&w.experts[ex], {}, {}, {}, {}, {}, {}};
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        if (chosen[i * k + j] == ex) {
          item.rows.push_back(i);
          item.row_weights.push_back(weights[i * k + j]);
        }
      }
    }
    if (item.rows.empty()) continue;
    const int64_t m = static_cast<int64_t>(item.rows.size());
    item.input.resize(static_cast<size_t>(m * d));
    for (int64_t r = 0; r < m; ++r) std::copy(x + item.rows[r] * d, x + (item.rows[r] + 1) * d, item.input.data() + r * d);
    item.output.resize(static_cast<size_t>(m * d));
    work.push_back(std::move(item));
  }
  Work shared{&w.shared, {}, {}, {}, {}, {}, {}};
  std::vector<LinearTask> tasks;
  auto add_gate_up = [&](Work& item, const float* input, int64_t m) {
    const int64_t inter = item.weights->w1.out_features;
    item.gate.resize(static_cast<size_t>(m * inter));
    item.up.resize(static_cast<size_t>(m * inter));
    tasks.push_back({input, m, d, &item.weights->w1, item.gate.data(), inter});
    tasks.push_back({input, m, d, &item.weights->w3, item.up.data(), inter});
  };
  for (Work& item : work) add_gate_up(item, item.input.data(), static_cast<int64_t>(item.rows.size()));
  add_gate_up(shared, x, n);
  RunLinearTasks(tasks, step.linear, *step.pool);
  tasks.clear();
  const float limit = static_cast<float>(c.swiglu_limit);
  auto add_down = [&](Work& item, int64_t m, float* output) {
    const int64_t inter = item.weights->w1.out_features;
    kernels::SwiGlu(item.gate.data(), item.up.data(), m * inter, limit, item.gate.data());
    tasks.push_back({item.gate.data(), m, inter, &item.weights->w2, output, d});
  };
  for (Work& item : work) add_down(item, static_cast<int64_t>(item.rows.size()), item.output.data());
  add_down(shared, n, out);
  RunLinearTasks(tasks, step.linear, *step.pool);

  phase.Switch(Phase::kMoeCombine);
  // Row i's routed sum, in increasing expert order, then plus the shared expert's output.
  std::vector<std::vector<std::pair<const float*, float>>> contributions(static_cast<size_t>(n));
  for (const Work& item : work) {
    for (size_t r = 0; r < item.rows.size(); ++r)
      contributions[item.rows[r]].push_back({item.output.data() + r * d, item.row_weights[r]});
  }
  ForRowRanges(*step.pool, n, [&](int64_t begin, int64_t end) {
    std::vector<float> routed(static_cast<size_t>(d));
    for (int64_t i = begin; i < end; ++i) {
      std::fill(routed.begin(), routed.end(), 0.0f);
      for (const auto& [src, weight] : contributions[i])
        for (int64_t t = 0; t < d; ++t) routed[t] += src[t] * weight;
      for (int64_t t = 0; t < d; ++t) out[i * d + t] = routed[t] + out[i * d + t];
    }
  });
}

}  // namespace deepinfer::model::v4
