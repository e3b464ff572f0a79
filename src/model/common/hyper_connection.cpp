#include "model/common/hyper_connection.h"

#include <algorithm>
#include <cmath>

#include "model/common/row_parallel.h"

namespace deepinfer::model {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// y[e] = Σ_j pre[j]·x[j][e] from 0 in increasing j, with the hidden dimension innermost (vectorised).
void CollapseRow(const float* pre, const float* x, int64_t hc, int64_t d, float* y) {
  std::fill(y, y + d, 0.0f);
  for (int64_t j = 0; j < hc; ++j) {
    const float weight = pre[j];
    const float* xj = x + j * d;
    for (int64_t e = 0; e < d; ++e) y[e] += weight * xj[e];
  }
}

// mixes[n, rows] = fn · (x / rms(x)) over the flattened streams of each row.
std::vector<float> Mixes(const HcShape& s, const HyperConnectionWeights& w, const float* streams, int64_t n,
                         ThreadPool& pool) {
  const int64_t width = s.hc * s.d;
  std::vector<float> normed(static_cast<size_t>(n * width));
  ForRows(pool, n, [&](int64_t i) {
    const float* x = streams + i * width;
    // In double, over 8 interleaved partial sums (k mod 8) added at the end in a fixed order: vectorised,
    // and the same bits whatever the batch.
    double partial[8] = {};
    int64_t k = 0;
    for (; k + 8 <= width; k += 8)
      for (int l = 0; l < 8; ++l) partial[l] += static_cast<double>(x[k + l]) * x[k + l];
    for (; k < width; ++k) partial[k % 8] += static_cast<double>(x[k]) * x[k];
    double sum = 0;
    for (double p : partial) sum += p;
    const float mean = static_cast<float>(sum / static_cast<double>(width));
    const float r = 1.0f / std::sqrt(mean + static_cast<float>(s.rms_norm_eps));
    for (int64_t e = 0; e < width; ++e) normed[i * width + e] = x[e] * r;
  });
  std::vector<float> mixes(static_cast<size_t>(n * w.fn_view.out_features));
  kernels::Linear(normed.data(), n, width, w.fn_view, mixes.data(), w.fn_view.out_features, &pool);
  return mixes;
}

}  // namespace

void HcCoefficients(const HcShape& s, const HyperConnectionWeights& w, const float* streams, int64_t n, float* pre,
                    float* post, float* comb, ThreadPool& pool) {
  const int64_t hc = s.hc, mix = (2 + hc) * hc;
  const float eps = static_cast<float>(s.hc_eps);
  std::vector<float> mixes = Mixes(s, w, streams, n, pool);
  ForRows(pool, n, [&](int64_t i) {
    const float* m = mixes.data() + i * mix;
    float* pr = pre + i * hc;
    float* po = post + i * hc;
    float* cb = comb + i * hc * hc;
    for (int64_t j = 0; j < hc; ++j) {
      pr[j] = Sigmoid(m[j] * w.scale[0] + w.base[j]) + eps;
      po[j] = 2.0f * Sigmoid(m[hc + j] * w.scale[1] + w.base[hc + j]);
    }
    // comb: softmax over each row (+ eps), then Sinkhorn (column, then row/column rounds) towards doubly
    // stochastic.
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
    for (int64_t it = 1; it < s.sinkhorn_iters; ++it) {
      for (int64_t j = 0; j < hc; ++j) {
        float sum = 0;
        for (int64_t k = 0; k < hc; ++k) sum += cb[j * hc + k];
        for (int64_t k = 0; k < hc; ++k) cb[j * hc + k] /= sum + eps;
      }
      normalise_columns();
    }
  });
}

void HcCollapse(const HcShape& s, const float* pre, const float* streams, int64_t n, float* collapsed,
                ThreadPool& pool) {
  ForRows(pool, n, [&](int64_t i) {
    CollapseRow(pre + i * s.hc, streams + i * s.hc * s.d, s.hc, s.d, collapsed + i * s.d);
  });
}

void HcExpand(const HcShape& s, const float* post, const float* comb, const float* out, int64_t n, float* streams,
              ThreadPool& pool) {
  const int64_t hc = s.hc, d = s.d;
  ForRows(pool, n, [&](int64_t i) {
    thread_local std::vector<float> mixed;
    mixed.resize(static_cast<size_t>(hc * d));
    float* x = streams + i * hc * d;
    const float* cb = comb + i * hc * hc;
    const float* po = post + i * hc;
    const float* o = out + i * d;
    // Stream by stream with the hidden dimension innermost (vectorised); per element the same operations
    // in the same order as Σ_j cb[j][k]·x[j][e] from 0, then post[k]·out[e] + that sum.
    for (int64_t k = 0; k < hc; ++k) {
      float* m = mixed.data() + k * d;
      std::fill(m, m + d, 0.0f);
      for (int64_t j = 0; j < hc; ++j) {
        const float weight = cb[j * hc + k];
        const float* xj = x + j * d;
        for (int64_t e = 0; e < d; ++e) m[e] += weight * xj[e];
      }
      const float scale = po[k];
      for (int64_t e = 0; e < d; ++e) m[e] = scale * o[e] + m[e];
    }
    std::copy(mixed.begin(), mixed.end(), x);
  });
}

void HcHead(const HcShape& s, const HyperConnectionWeights& w, const float* streams, int64_t n, float* out,
            ThreadPool& pool) {
  const int64_t hc = s.hc, d = s.d;
  std::vector<float> mixes = Mixes(s, w, streams, n, pool);
  ForRows(pool, n, [&](int64_t i) {
    float pre[16];  // hc_mult ≤ 16 (checked by the configs)
    for (int64_t j = 0; j < hc; ++j)
      pre[j] = Sigmoid(mixes[i * hc + j] * w.scale[0] + w.base[j]) + static_cast<float>(s.hc_eps);
    CollapseRow(pre, streams + i * hc * d, hc, d, out + i * d);
  });
}

}  // namespace deepinfer::model
