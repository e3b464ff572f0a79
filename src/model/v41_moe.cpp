// V4.1 mixture of experts: sqrt(softplus(logit / gate_temp)) (or sigmoid) scores, top-k of score + bias (the
// image-span bias_vl is never used by the text model), weights renormalised and scaled, clamped SwiGLU experts
// whose routing weight multiplies the activation before the down projection (deepseek_v41 DeepseekV41Expert),
// plus the shared expert with the same clamps.
#include <algorithm>
#include <cmath>
#include <optional>

#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "model/step_profile.h"
#include "model/v41_internal.h"
#include "model/v4_internal.h"

namespace deepinfer::model::v41 {
namespace {

float Score(const std::string& func, float logit) {
  if (func == "sigmoid") return 1.0f / (1.0f + std::exp(-logit));
  // softplus as torch computes it (linear above 20), then sqrt.
  const float softplus = logit > 20.0f ? logit : std::log1p(std::exp(logit));
  return std::sqrt(softplus);
}

}  // namespace

void Moe(const Step& step, int64_t layer, const float* x, float* out) {
  MoeBlock(step, step.weights->layers[layer].moe, step.config->num_experts_per_tok, layer, x, out);
}

void MoeBlock(const Step& step, const V41MoeWeights& w, int64_t k, int64_t layer, const float* x, float* out) {
  const V41Config& c = *step.config;
  const int64_t n = step.num_rows(), d = c.hidden_size, e = static_cast<int64_t>(w.experts.size());

  ScopedPhase phase(Phase::kMoeGate);
  std::vector<float> logits(static_cast<size_t>(n * e));
  kernels::Linear(x, n, d, w.gate, logits.data(), e, step.linear, step.threads);
  std::vector<int32_t> chosen(static_cast<size_t>(n * k));
  std::vector<float> weights(static_cast<size_t>(n * k));
  const float temp = static_cast<float>(c.gate_temp);
  v4::ForRowRanges(*step.threads, n, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(e), biased(e);
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t j = 0; j < e; ++j) scores[j] = Score(c.scoring_func, logits[i * e + j] / temp);
      for (int64_t j = 0; j < e; ++j) biased[j] = scores[j] + w.bias[j];
      int32_t* sel = chosen.data() + i * k;
      TopKProbed(step, V41DecisionKind::kExperts, layer, step.rows[i].pos, biased.data(), e, k, sel);
      float sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += scores[sel[j]];
      for (int64_t j = 0; j < k; ++j) {
        float weight = scores[sel[j]];
        if (c.norm_topk_prob && k > 1) weight = weight / (sum + 1e-20f);
        weights[i * k + j] = weight * static_cast<float>(c.routed_scaling_factor);
      }
    }
  });

  // Each routed expert over the rows routed to it and the shared expert over all rows: every gate and up
  // product in one balanced hand-off, the clamped SwiGLU times the routing weight, then every down product
  // in another; the routed outputs are summed in increasing expert order, then the shared one is added.
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
  std::vector<v4::LinearTask> tasks;
  auto add_gate_up = [&](Work& item, const float* input, int64_t m) {
    const int64_t inter = item.weights->w1.out_features;
    item.gate.resize(static_cast<size_t>(m * inter));
    item.up.resize(static_cast<size_t>(m * inter));
    tasks.push_back({input, m, d, &item.weights->w1, item.gate.data(), inter});
    tasks.push_back({input, m, d, &item.weights->w3, item.up.data(), inter});
  };
  for (Work& item : work) add_gate_up(item, item.input.data(), static_cast<int64_t>(item.rows.size()));
  add_gate_up(shared, x, n);
  v4::RunLinearTasks(tasks, step.linear, *step.threads);
  tasks.clear();
  const float limit = static_cast<float>(c.swiglu_limit);
  auto add_down = [&](Work& item, int64_t m, float* output) {
    const int64_t inter = item.weights->w1.out_features;
    kernels::SwiGlu(item.gate.data(), item.up.data(), m * inter, limit, item.gate.data());
    if (!item.row_weights.empty()) {
      for (int64_t r = 0; r < m; ++r) {
        float* g = item.gate.data() + r * inter;
        const float weight = item.row_weights[r];
        for (int64_t t = 0; t < inter; ++t) g[t] = weight * g[t];
      }
    }
    tasks.push_back({item.gate.data(), m, inter, &item.weights->w2, output, d});
  };
  for (Work& item : work) add_down(item, static_cast<int64_t>(item.rows.size()), item.output.data());
  add_down(shared, n, out);
  v4::RunLinearTasks(tasks, step.linear, *step.threads);

  phase.Switch(Phase::kMoeCombine);
  std::vector<std::vector<const float*>> contributions(static_cast<size_t>(n));
  for (const Work& item : work) {
    for (size_t r = 0; r < item.rows.size(); ++r) contributions[item.rows[r]].push_back(item.output.data() + r * d);
  }
  v4::ForRowRanges(*step.threads, n, [&](int64_t begin, int64_t end) {
    std::vector<float> routed(static_cast<size_t>(d));
    for (int64_t i = begin; i < end; ++i) {
      std::fill(routed.begin(), routed.end(), 0.0f);
      for (const float* src : contributions[i])
        for (int64_t t = 0; t < d; ++t) routed[t] += src[t];
      for (int64_t t = 0; t < d; ++t) out[i * d + t] = routed[t] + out[i * d + t];
    }
  });
}

}  // namespace deepinfer::model::v41
