// V4.1 mixture of experts: sqrt(softplus(logit / gate_temp)) (or sigmoid) scores, top-k of score + bias (the
// image-span bias_vl is never used by the text model), weights renormalised and scaled, clamped SwiGLU experts
// whose routing weight multiplies the activation before the down projection (deepseek_v41 DeepseekV41Expert),
// plus the shared expert with the same clamps (the shared dispatch).
#include <algorithm>
#include <cmath>
#include <optional>

#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "model/common/moe.h"
#include "model/deepseek_v41/v41_internal.h"
#include "model/step_profile.h"

namespace deepinfer::model::v41 {

void Moe(const Step& step, int64_t layer, const float* x, float* out) {
  MoeBlock(step, step.weights->layers[layer].moe, step.config->num_experts_per_tok, layer, x, out);
}

void MoeBlock(const Step& step, const V41MoeWeights& w, int64_t k, int64_t layer, const float* x, float* out) {
  const V41Config& c = *step.config;
  const int64_t n = step.num_rows(), d = c.hidden_size, e = static_cast<int64_t>(w.experts.size());

  ScopedPhase phase(Phase::kMoeGate);
  const ExpertDispatch dispatch{static_cast<float>(c.swiglu_limit), RoutingWeightAt::kActivation, step.linear};
  if (n == 0) {  // an expert-parallel member with no rows of its own still serves its experts
    DispatchExperts(w, dispatch, nullptr, 0, d, nullptr, nullptr, k, *step.pool, phase, nullptr);
    return;
  }
  std::vector<float> logits(static_cast<size_t>(n * e));
  kernels::Linear(x, n, d, w.gate, logits.data(), e, step.linear, step.pool);
  std::vector<int32_t> chosen(static_cast<size_t>(n * k));
  std::vector<float> weights(static_cast<size_t>(n * k));
  const float temp = static_cast<float>(c.gate_temp);
  ForRowRanges(*step.pool, n, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(e), biased(e);
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t j = 0; j < e; ++j) scores[j] = RouterScore(c.scoring_func, logits[i * e + j] / temp);
      for (int64_t j = 0; j < e; ++j) biased[j] = scores[j] + w.bias[j];
      int32_t* sel = chosen.data() + i * k;
      TopKProbed(step, V41DecisionKind::kExperts, layer, step.rows[i].pos, biased.data(), e, k, sel);
      RoutingWeights(scores.data(), sel, k, c.norm_topk_prob && k > 1, static_cast<float>(c.routed_scaling_factor),
                     weights.data() + i * k);
    }
  });

  DispatchExperts(w, dispatch, x, n, d, chosen.data(), weights.data(), k, *step.pool, phase, out);
}

}  // namespace deepinfer::model::v41
