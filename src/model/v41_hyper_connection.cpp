// Single-pass mHC: each site computes pre / post / comb from one projection of the normalised flattened
// streams (V4's formulas, Sinkhorn included), but a site's `pre` collapses the streams of the *next* site:
// attention collapses with the previous site's pre (one-hot on stream 0 before the first layer), the FFN
// with the attention site's, and the final norm with the last FFN site's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/linear.h"
#include "model/v41_internal.h"
#include "model/v4_internal.h"

namespace deepinfer::model::v41 {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void HcCoefficients(const V41Config& c, const V4HyperConnectionWeights& w, const float* streams, int64_t n,
                    float* pre, float* post, float* comb, ThreadPool& pool) {
  const int64_t hc = c.hc_mult, width = hc * c.hidden_size, mix = (2 + hc) * hc;
  const float eps = static_cast<float>(c.hc_eps);
  std::vector<float> normed(static_cast<size_t>(n * width));
  v4::ForRows(pool, n, [&](int64_t i) {
    const float* x = streams + i * width;
    // In double over 8 interleaved partial sums added in a fixed order: vectorised and batch invariant.
    double partial[8] = {};
    int64_t k = 0;
    for (; k + 8 <= width; k += 8)
      for (int l = 0; l < 8; ++l) partial[l] += static_cast<double>(x[k + l]) * x[k + l];
    for (; k < width; ++k) partial[k % 8] += static_cast<double>(x[k]) * x[k];
    double sum = 0;
    for (double p : partial) sum += p;
    const float mean = static_cast<float>(sum / static_cast<double>(width));
    const float r = 1.0f / std::sqrt(mean + static_cast<float>(c.rms_norm_eps));
    for (int64_t e = 0; e < width; ++e) normed[i * width + e] = x[e] * r;
  });
  std::vector<float> mixes(static_cast<size_t>(n * mix));
  kernels::Linear(normed.data(), n, width, w.fn_view, mixes.data(), mix, &pool);
  v4::ForRows(pool, n, [&](int64_t i) {
    const float* m = mixes.data() + i * mix;
    float* pr = pre + i * hc;
    float* po = post + i * hc;
    float* cb = comb + i * hc * hc;
    for (int64_t j = 0; j < hc; ++j) {
      pr[j] = Sigmoid(m[j] * w.scale[0] + w.base[j]) + eps;
      po[j] = 2.0f * Sigmoid(m[hc + j] * w.scale[1] + w.base[hc + j]);
    }
    // comb: softmax over each row (+ eps), then column / row normalisations (Sinkhorn).
    for (int64_t j = 0; j < hc; ++j) {
      float* row = cb + j * hc;
      float mx = -INFINITY;
      for (int64_t k = 0; k < hc; ++k) {
        row[k] = m[2 * hc + j * hc + k] * w.scale[2] + w.base[2 * hc + j * hc + k];
        mx = std::max(mx, row[k]);
      }
      float sum = 0;
      for (int64_t k = 0; k < hc; ++k) sum += row[k] = std::exp(row[k] - mx);
      for (int64_t k = 0; k < hc; ++k) row[k] = row[k] / sum + eps;
    }
    auto normalise_columns = [&] {
      for (int64_t k = 0; k < hc; ++k) {
        float sum = 0;
        for (int64_t j = 0; j < hc; ++j) sum += cb[j * hc + k];
        for (int64_t j = 0; j < hc; ++j) cb[j * hc + k] /= sum + eps;
      }
    };
    normalise_columns();
    for (int64_t it = 1; it < c.hc_sinkhorn_iters; ++it) {
      for (int64_t j = 0; j < hc; ++j) {
        float sum = 0;
        for (int64_t k = 0; k < hc; ++k) sum += cb[j * hc + k];
        for (int64_t k = 0; k < hc; ++k) cb[j * hc + k] /= sum + eps;
      }
      normalise_columns();
    }
  });
}

void HcCollapse(const V41Config& c, const float* pre, const float* streams, int64_t n, float* collapsed,
                ThreadPool& pool) {
  const int64_t hc = c.hc_mult, d = c.hidden_size;
  v4::ForRows(pool, n, [&](int64_t i) {
    float* y = collapsed + i * d;
    const float* x = streams + i * hc * d;
    std::fill(y, y + d, 0.0f);
    for (int64_t j = 0; j < hc; ++j) {
      const float weight = pre[i * hc + j];
      for (int64_t e = 0; e < d; ++e) y[e] += weight * x[j * d + e];
    }
  });
}

void HcExpand(const V41Config& c, const float* post, const float* comb, const float* out, int64_t n, float* streams,
              ThreadPool& pool) {
  const int64_t hc = c.hc_mult, d = c.hidden_size;
  v4::ForRows(pool, n, [&](int64_t i) {
    thread_local std::vector<float> mixed;
    mixed.resize(static_cast<size_t>(hc * d));
    float* x = streams + i * hc * d;
    const float* cb = comb + i * hc * hc;
    const float* o = out + i * d;
    for (int64_t k = 0; k < hc; ++k) {
      float* m = mixed.data() + k * d;
      std::fill(m, m + d, 0.0f);
      for (int64_t j = 0; j < hc; ++j) {
        const float weight = cb[j * hc + k];
        for (int64_t e = 0; e < d; ++e) m[e] += weight * x[j * d + e];
      }
      const float scale = post[i * hc + k];
      for (int64_t e = 0; e < d; ++e) m[e] = scale * o[e] + m[e];
    }
    std::copy(mixed.begin(), mixed.end(), x);
  });
}

}  // namespace deepinfer::model::v41
