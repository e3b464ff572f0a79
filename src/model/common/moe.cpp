#include "model/common/moe.h"

#include <algorithm>
#include <cmath>

#include "kernels/elementwise.h"
#include "model/common/row_parallel.h"

namespace deepinfer::model {

float RouterScore(const std::string& scoring_func, float logit) {
  if (scoring_func == "sigmoid") return 1.0f / (1.0f + std::exp(-logit));
  const float softplus = logit > 20.0f ? logit : std::log1p(std::exp(logit));
  return std::sqrt(softplus);
}

void RoutingWeights(const float* scores, const int32_t* chosen, int64_t k, bool normalise, float scale,
                    float* weights) {
  float sum = 0;
  for (int64_t j = 0; j < k; ++j) sum += scores[chosen[j]];
  for (int64_t j = 0; j < k; ++j) {
    float weight = scores[chosen[j]];
    if (normalise) weight = weight / (sum + 1e-20f);
    weights[j] = weight * scale;
  }
}

void DispatchExperts(const ExpertSetWeights& w, const ExpertDispatch& dispatch, const float* x, int64_t n, int64_t d,
                     const int32_t* chosen, const float* weights, int64_t k, ThreadPool& pool, ScopedPhase& phase,
                     float* out) {
  phase.Switch(Phase::kMoeExperts);
  const std::vector<ExpertWeights>& experts = w.experts;
  const bool weight_activation = dispatch.weight_at == RoutingWeightAt::kActivation;
  struct Work {
    const ExpertWeights* weights;
    std::vector<int64_t> rows;
    std::vector<float> row_weights, input, gate, up, output;
  };
  // Group the routed rows by expert.
  std::vector<Work> work;
  const int64_t e = static_cast<int64_t>(experts.size());
  for (int64_t ex = 0; ex < e; ++ex) {
    Work item{&experts[ex], {}, {}, {}, {}, {}, {}};
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
  // The expert FFNs.
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
  RunLinearTasks(tasks, dispatch.linear, pool);
  tasks.clear();
  auto add_down = [&](Work& item, int64_t m, float* output) {
    const int64_t inter = item.weights->w1.out_features;
    kernels::SwiGlu(item.gate.data(), item.up.data(), m * inter, dispatch.swiglu_limit, item.gate.data());
    if (weight_activation && !item.row_weights.empty()) {
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
  RunLinearTasks(tasks, dispatch.linear, pool);

  // The combine: row i's routed sum in increasing expert order, then plus the shared expert's output.
  phase.Switch(Phase::kMoeCombine);
  std::vector<std::vector<std::pair<const float*, float>>> contributions(static_cast<size_t>(n));
  for (const Work& item : work) {
    for (size_t r = 0; r < item.rows.size(); ++r)
      contributions[item.rows[r]].push_back({item.output.data() + r * d, item.row_weights[r]});
  }
  ForRowRanges(pool, n, [&](int64_t begin, int64_t end) {
    std::vector<float> routed(static_cast<size_t>(d));
    for (int64_t i = begin; i < end; ++i) {
      std::fill(routed.begin(), routed.end(), 0.0f);
      for (const auto& [src, weight] : contributions[i]) {
        if (weight_activation) {
          for (int64_t t = 0; t < d; ++t) routed[t] += src[t];
        } else {
          for (int64_t t = 0; t < d; ++t) routed[t] += src[t] * weight;
        }
      }
      for (int64_t t = 0; t < d; ++t) out[i * d + t] = routed[t] + out[i * d + t];
    }
  });
}

}  // namespace deepinfer::model
