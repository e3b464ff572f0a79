#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace deepinfer::kernels {

void RmsNorm(const float* x, const float* weight, float eps, int64_t n, float* out) {
  double sum_squares = 0;
  for (int64_t i = 0; i < n; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
  const float mean = n > 0 ? static_cast<float>(sum_squares / static_cast<double>(n)) : 0.0f;
  const float inv = 1.0f / std::sqrt(mean + eps);
  if (weight != nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
  }
}

void RmsNormRows(const float* x, int64_t x_stride, const float* weight, float eps, int64_t rows, int64_t n, float* out,
                 int64_t out_stride) {
  for (int64_t r = 0; r < rows; ++r) RmsNorm(x + r * x_stride, weight, eps, n, out + r * out_stride);
}

namespace {
inline float SiluOne(float v) { return v / (1.0f + std::exp(-v)); }
}  // namespace

void Silu(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = SiluOne(x[i]);
}

void SwiGlu(const float* gate, const float* up, int64_t n, float limit, float* out) {
  if (limit > 0) {
    for (int64_t i = 0; i < n; ++i) {
      const float g = std::min(gate[i], limit);
      const float u = std::clamp(up[i], -limit, limit);
      out[i] = SiluOne(g) * u;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = SiluOne(gate[i]) * up[i];
  }
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max_value = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max_value = std::max(max_value, x[i]);
  if (max_value == -std::numeric_limits<float>::infinity()) {
    std::fill(x, x + n, 0.0f);
    return;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void ApplyRope(float* x, int64_t count, int64_t stride, int64_t offset, int64_t dim, const float* cos, const float* sin,
               RopeLayout layout, bool inverse) {
  const int64_t half = dim / 2;
  const int64_t pair_step = layout == RopeLayout::kInterleaved ? 2 : 1;
  const int64_t partner = layout == RopeLayout::kInterleaved ? 1 : half;
  for (int64_t v = 0; v < count; ++v) {
    float* base = x + v * stride + offset;
    for (int64_t i = 0; i < half; ++i) {
      float* a = base + i * pair_step;
      float* b = a + partner;
      const float c = cos[i], s = inverse ? -sin[i] : sin[i];
      const float a0 = *a, b0 = *b;
      *a = a0 * c - b0 * s;
      *b = a0 * s + b0 * c;
    }
  }
}

void TopK(const float* row, int64_t n, int64_t k, int32_t* indices, float* values) {
  if (k <= 0) return;
  // Strict weak order: larger value first, NaN last, ties by smaller index.
  auto before = [row](int32_t a, int32_t b) {
    const float va = row[a], vb = row[b];
    const bool na = std::isnan(va), nb = std::isnan(vb);
    if (na != nb) return nb;
    if (!na && va != vb) return va > vb;
    return a < b;
  };
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
  for (int64_t i = 0; i < k; ++i) {
    indices[i] = order[static_cast<size_t>(i)];
    if (values != nullptr) values[i] = row[order[static_cast<size_t>(i)]];
  }
}

}  // namespace deepinfer::kernels
