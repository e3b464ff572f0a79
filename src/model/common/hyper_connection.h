// mHC (manifold-constrained hyper-connections), as both DeepSeek families use them: hc_mult residual
// streams per row; at each site a projection of the RMS-normalised flattened streams gives `pre` (how the
// streams collapse into the sub-block's input), `post` (how its output spreads back) and `comb` (how the
// streams mix, made near doubly stochastic by Sinkhorn rounds). Which site's `pre` collapses which input
// is the family's business (V4 collapses with the site's own, V4.1 with the previous site's).
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/linear.h"

namespace deepinfer::model {

struct HyperConnectionWeights {
  std::vector<float> fn;     // [(2 + hc) · hc, hc · d] (or [hc, hc · d] for a head)
  std::vector<float> base;   // [(2 + hc) · hc] (or [hc])
  std::vector<float> scale;  // [3] (or [1])
  kernels::WeightView fn_view;  // fn as an F32 matrix
};

// The sizes and constants of mHC, from a family's config.
struct HcShape {
  int64_t hc = 0;  // streams (hc_mult ≤ 16)
  int64_t d = 0;   // hidden size
  double rms_norm_eps = 0;
  double hc_eps = 0;
  int64_t sinkhorn_iters = 0;
  template <class Config>
  static HcShape Of(const Config& c) {
    return {c.hc_mult, c.hidden_size, c.rms_norm_eps, c.hc_eps, c.hc_sinkhorn_iters};
  }
};

// A site's coefficients from the streams [n, hc, d]: pre [n, hc], post [n, hc], comb [n, hc, hc].
void HcCoefficients(const HcShape& s, const HyperConnectionWeights& w, const float* streams, int64_t n, float* pre,
                    float* post, float* comb, ThreadPool& pool);
// collapsed[n, d] = Σ_j pre[j] · streams[j], from 0 in increasing j.
void HcCollapse(const HcShape& s, const float* pre, const float* streams, int64_t n, float* collapsed,
                ThreadPool& pool);
// streams ← post ⊗ out + combᵀ · streams.
void HcExpand(const HcShape& s, const float* post, const float* comb, const float* out, int64_t n, float* streams,
              ThreadPool& pool);
// The head site (hc_head): its own `pre` collapses the streams [n, hc, d] to out [n, d].
void HcHead(const HcShape& s, const HyperConnectionWeights& w, const float* streams, int64_t n, float* out,
            ThreadPool& pool);

}  // namespace deepinfer::model
