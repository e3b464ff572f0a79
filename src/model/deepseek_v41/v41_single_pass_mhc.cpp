// V4.1's single-pass mHC: each site computes pre / post / comb from the streams it sees (the shared mHC
// formulas), but a site's `pre` collapses the input of the *next* site: attention collapses with the previous
// site's pre (one-hot on stream 0 before the first layer), the FFN with the attention site's, and the final
// norm with the last FFN site's.
#include "model/deepseek_v41/v41_internal.h"

namespace deepinfer::model::v41 {

SinglePassMhc::SinglePassMhc(const V41Config& c, int64_t n)
    : shape_(HcShape::Of(c)),
      n_(n),
      pre_mix_(static_cast<size_t>(n * c.hc_mult), 0.0f),
      pre_(pre_mix_.size()),
      post_(pre_mix_.size()),
      comb_(static_cast<size_t>(n * c.hc_mult * c.hc_mult)) {
  for (int64_t i = 0; i < n; ++i) pre_mix_[i * c.hc_mult] = 1.0f;
}

void SinglePassMhc::Collapse(const HyperConnectionWeights& w, const float* streams, float* collapsed,
                             ThreadPool& pool) {
  HcCoefficients(shape_, w, streams, n_, pre_.data(), post_.data(), comb_.data(), pool);
  HcCollapse(shape_, pre_mix_.data(), streams, n_, collapsed, pool);
}

void SinglePassMhc::Expand(const float* out, float* streams, ThreadPool& pool) {
  HcExpand(shape_, post_.data(), comb_.data(), out, n_, streams, pool);
  std::swap(pre_mix_, pre_);
}

}  // namespace deepinfer::model::v41
