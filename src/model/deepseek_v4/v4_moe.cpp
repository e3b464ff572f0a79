// V4 mixture of experts: sqrt(softplus) (or sigmoid) router scores, experts chosen by a token-id table
// (hash layers) or by top-k of score + bias, weights renormalised and scaled; the clamped SwiGLU experts
// and the shared expert run in the shared dispatch, each expert's output scaled by its weight.
#include <algorithm>

#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "model/common/moe.h"
#include "model/deepseek_v4/v4_internal.h"
#include "model/step_profile.h"

namespace deepinfer::model::v4 {

void Moe(const Step& step, const BlockRef& block, const float* x, float* out) {
  const V4Config& c = *step.config;
  const V4MoeWeights& w = block.weights->moe;
  const int64_t n = step.num_rows(), d = c.hidden_size, e = c.n_routed_experts, k = c.num_experts_per_tok;

  ScopedPhase phase(Phase::kMoeGate);
  const ExpertDispatch dispatch{static_cast<float>(c.swiglu_limit), RoutingWeightAt::kCombine, step.linear};
  if (n == 0) {  // an expert-parallel member with no rows of its own still serves its experts
    DispatchExperts(w, dispatch, nullptr, 0, d, nullptr, nullptr, k, *step.pool, phase, nullptr);
    return;
  }
  std::vector<float> logits(static_cast<size_t>(n * e));
  kernels::Linear(x, n, d, w.gate, logits.data(), e, step.linear, step.pool);
  std::vector<int32_t> chosen(static_cast<size_t>(n * k));
  std::vector<float> weights(static_cast<size_t>(n * k));
  std::vector<float> scores(e), biased(e);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < e; ++j) scores[j] = RouterScore(c.scoring_func, logits[i * e + j]);
    int32_t* sel = chosen.data() + i * k;
    if (block.router == V4RouterType::kHash) {
      const int32_t* row = w.tid2eid.data() + static_cast<int64_t>(step.rows[i].token) * k;
      std::copy(row, row + k, sel);
    } else {
      for (int64_t j = 0; j < e; ++j) biased[j] = scores[j] + w.gate_bias[j];
      kernels::TopK(biased.data(), e, k, sel, nullptr);
    }
    RoutingWeights(scores.data(), sel, k, true, static_cast<float>(c.routed_scaling_factor), weights.data() + i * k);
  }

  DispatchExperts(w, dispatch, x, n, d, chosen.data(), weights.data(), k, *step.pool, phase, out);
}

}  // namespace deepinfer::model::v4
