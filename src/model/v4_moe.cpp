// V4 mixture of experts: sqrt(softplus) (or sigmoid) router scores, experts chosen by a token-id table
// (hash layers) or by top-k of score + bias, weights renormalised and scaled, clamped SwiGLU experts, plus
// the shared expert.
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

// out[n, d] = down(swiglu(gate(x), up(x))) for the rows of x.
void Expert(const V4Config& c, const kernels::LinearOptions& options, const V4ExpertWeights& w, const float* x,
            int64_t n, float* out) {
  const int64_t d = c.hidden_size, inter = w.w1.out_features;
  std::vector<float> g(static_cast<size_t>(n * inter)), u(static_cast<size_t>(n * inter));
  kernels::Linear(x, n, d, w.w1, g.data(), inter, options);
  kernels::Linear(x, n, d, w.w3, u.data(), inter, options);
  kernels::SwiGlu(g.data(), u.data(), n * inter, static_cast<float>(c.swiglu_limit), g.data());
  kernels::Linear(g.data(), n, inter, w.w2, out, d, options);
}

}  // namespace

void Moe(const Step& step, const BlockRef& block, const float* x, float* out) {
  const V4Config& c = *step.config;
  const V4MoeWeights& w = block.weights->moe;
  const int64_t n = step.num_rows(), d = c.hidden_size, e = c.n_routed_experts, k = c.num_experts_per_tok;

  std::optional<ScopedPhase> phase(std::in_place, Phase::kMoeGate);
  std::vector<float> logits(static_cast<size_t>(n * e));
  kernels::Linear(x, n, d, w.gate, logits.data(), e, step.linear);
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

  // Each routed expert over the rows routed to it, and the shared expert over all rows, computed
  // independently (side by side when the batch is small), then summed in increasing expert order.
  phase.emplace(Phase::kMoeExperts);
  struct Work {
    const V4ExpertWeights* weights;
    std::vector<int64_t> rows;
    std::vector<float> row_weights, input, output;
  };
  std::vector<Work> work;
  for (int64_t ex = 0; ex < e; ++ex) {
    Work item{&w.experts[ex], {}, {}, {}, {}};
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
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (i == static_cast<int64_t>(work.size())) {
        Expert(c, step.linear, w.shared, x, n, out);
      } else {
        Expert(c, step.linear, *work[i].weights, work[i].input.data(), static_cast<int64_t>(work[i].rows.size()),
               work[i].output.data());
      }
    }
  };
  const int64_t tasks = static_cast<int64_t>(work.size()) + 1;
  if (n <= 16) ThreadPool::Shared().ParallelFor(tasks, run, 1);
  else run(0, tasks);

  phase.emplace(Phase::kMoeCombine);
  std::vector<float> routed(static_cast<size_t>(n * d), 0.0f);
  for (const Work& item : work) {
    for (size_t r = 0; r < item.rows.size(); ++r) {
      float* dst = routed.data() + item.rows[r] * d;
      for (int64_t t = 0; t < d; ++t) dst[t] += item.output[r * d + t] * item.row_weights[r];
    }
  }
  for (int64_t i = 0; i < n * d; ++i) out[i] = routed[i] + out[i];
}

}  // namespace deepinfer::model::v4
