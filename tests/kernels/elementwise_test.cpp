// Elementwise kernels against plain double-precision references written from their definitions.
#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "test_weights.h"

namespace deepinfer::kernels {
namespace {

using test_support::RandomVector;

// Relative error of a few fp32 roundings on an O(1) result.
constexpr double kTolerance = 1e-6;

TEST(ElementwiseTest, RmsNormMatchesDefinition) {
  for (int64_t n : {1, 7, 64, 513}) {
    const std::vector<float> x = RandomVector(static_cast<size_t>(n), 1, 3.0f);
    const std::vector<float> w = RandomVector(static_cast<size_t>(n), 2);
    std::vector<float> out(static_cast<size_t>(n)), unweighted(static_cast<size_t>(n));
    RmsNorm(x.data(), w.data(), 1e-6f, n, out.data());
    RmsNorm(x.data(), nullptr, 1e-6f, n, unweighted.data());
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
    for (int64_t i = 0; i < n; ++i) {
      const double ref = x[i] * inv;
      EXPECT_NEAR(unweighted[i], ref, kTolerance * (1 + std::fabs(ref)));
      EXPECT_NEAR(out[i], ref * w[i], kTolerance * (1 + std::fabs(ref * w[i])));
    }
  }
  // Rows with strides, in place.
  std::vector<float> rows = RandomVector(3 * 10, 3);
  std::vector<float> expected(3 * 10);
  for (int r = 0; r < 3; ++r) RmsNorm(rows.data() + r * 10, nullptr, 1e-5f, 8, expected.data() + r * 10);
  RmsNormRows(rows.data(), 10, nullptr, 1e-5f, 3, 8, rows.data(), 10);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 8; ++i) EXPECT_EQ(rows[r * 10 + i], expected[r * 10 + i]);
}

TEST(ElementwiseTest, SiluAndClampedSwiGlu) {
  const std::vector<float> gate = RandomVector(200, 4, 8.0f);
  const std::vector<float> up = RandomVector(200, 5, 8.0f);
  std::vector<float> silu = gate;
  Silu(silu.data(), 200);
  std::vector<float> plain(200), clamped(200);
  SwiGlu(gate.data(), up.data(), 200, 0.0f, plain.data());
  SwiGlu(gate.data(), up.data(), 200, 10.0f, clamped.data());
  auto silu_ref = [](double v) { return v / (1.0 + std::exp(-v)); };
  int clamped_count = 0;
  for (int i = 0; i < 200; ++i) {
    EXPECT_NEAR(silu[i], silu_ref(gate[i]), kTolerance * (1 + std::fabs(gate[i])));
    EXPECT_NEAR(plain[i], silu_ref(gate[i]) * up[i], kTolerance * (1 + std::fabs(silu_ref(gate[i]) * up[i])));
    const double g = std::min<double>(gate[i], 10.0), u = std::clamp<double>(up[i], -10.0, 10.0);
    clamped_count += (gate[i] > 10 || std::fabs(up[i]) > 10);
    EXPECT_NEAR(clamped[i], silu_ref(g) * u, kTolerance * (1 + std::fabs(silu_ref(g) * u)));
  }
  EXPECT_GT(clamped_count, 0) << "the data should exercise the clamp";
}

TEST(ElementwiseTest, SoftmaxMatchesDefinitionAndHandlesMaskedRows) {
  std::vector<float> x = RandomVector(37, 6, 10.0f);
  x[3] = -INFINITY;
  const std::vector<float> original = x;
  Softmax(x.data(), 37);
  double denominator = 0;
  for (float v : original) denominator += std::exp(static_cast<double>(v));
  double total = 0;
  for (int i = 0; i < 37; ++i) {
    const double ref = std::exp(static_cast<double>(original[i])) / denominator;
    EXPECT_NEAR(x[i], ref, 1e-6 * ref + 1e-12);
    total += x[i];
  }
  EXPECT_EQ(x[3], 0.0f);
  EXPECT_NEAR(total, 1.0, 1e-5);
  std::vector<float> masked(5, -INFINITY);
  Softmax(masked.data(), 5);
  for (float v : masked) EXPECT_EQ(v, 0.0f);
}

TEST(ElementwiseTest, RopeRotatesPairsOfEitherLayoutAndInverseUndoesIt) {
  const int64_t count = 3, stride = 20, offset = 4, dim = 8;
  const std::vector<float> angles = {0.3f, -1.2f, 2.5f, 0.01f};
  std::vector<float> cos(4), sin(4);
  for (int i = 0; i < 4; ++i) {
    cos[i] = std::cos(angles[i]);
    sin[i] = std::sin(angles[i]);
  }
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
    const std::vector<float> original = RandomVector(count * stride, 7);
    std::vector<float> x = original;
    ApplyRope(x.data(), count, stride, offset, dim, cos.data(), sin.data(), layout);
    for (int64_t v = 0; v < count; ++v) {
      const float* o = original.data() + v * stride;
      const float* r = x.data() + v * stride;
      for (int64_t d = 0; d < stride; ++d) {
        if (d < offset || d >= offset + dim) {
          EXPECT_EQ(r[d], o[d]) << "outside the rotated slice";
        }
      }
      for (int i = 0; i < 4; ++i) {
        const int64_t a = offset + (layout == RopeLayout::kInterleaved ? 2 * i : i);
        const int64_t b = layout == RopeLayout::kInterleaved ? a + 1 : a + dim / 2;
        const double ca = std::cos(static_cast<double>(angles[i])), sa = std::sin(static_cast<double>(angles[i]));
        EXPECT_NEAR(r[a], o[a] * ca - o[b] * sa, 1e-5);
        EXPECT_NEAR(r[b], o[a] * sa + o[b] * ca, 1e-5);
      }
    }
    ApplyRope(x.data(), count, stride, offset, dim, cos.data(), sin.data(), layout, /*inverse=*/true);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], original[i], 1e-5);
  }
}

TEST(ElementwiseTest, TopKOrdersByValueThenIndex) {
  std::vector<float> row = RandomVector(300, 8);
  row[10] = row[20] = 5.0f;  // a tie at the top: the smaller index first
  row[30] = NAN;
  std::vector<int32_t> idx(50);
  std::vector<float> val(50);
  TopK(row.data(), 300, 50, idx.data(), val.data());
  std::vector<int32_t> order(300);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (std::isnan(row[a]) != std::isnan(row[b])) return std::isnan(row[b]);
    return row[a] > row[b];
  });
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(idx[i], order[i]) << i;
    EXPECT_EQ(val[i], row[order[i]]);
  }
  EXPECT_EQ(idx[0], 10);
  EXPECT_EQ(idx[1], 20);
  std::vector<int32_t> all(300);
  TopK(row.data(), 300, 300, all.data(), nullptr);
  EXPECT_EQ(all[299], 30) << "NaN ranks last";
}

}  // namespace
}  // namespace deepinfer::kernels
