// The batched (panel) paths of Linear (m ≥ 5), tile by tile: every mix of full and partial register tiles
// in m and out_features, inputs that are and are not whole 16-lane steps, plain and accumulating stores,
// on every ISA, against the canonical order of linear.h written out here from its definition.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/linear.h"
#include "kernels/linear_dispatch.h"
#include "test_weights.h"

namespace deepinfer::kernels {
namespace {

using test_support::MakeTestWeight;
using test_support::RandomVector;
using test_support::TestWeight;

std::vector<Isa> IsasToTest() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    if (IsaSupported(isa)) isas.push_back(isa);
  }
  return isas;
}

// linear.h's kExact order: lane j sums x[k]·w[k] for k ≡ j (mod 16) in increasing k with FMA from +0,
// then lanes are added by halving (j + 8, j + 4, j + 2, j + 1), lower lane first.
float CanonicalDot(const float* x, const TestWeight& w, int64_t n) {
  float lanes[16] = {};
  for (int64_t k = 0; k < w.view.in_features; ++k) {
    lanes[k % 16] = std::fma(x[k], w.At(n, k), lanes[k % 16]);
  }
  for (int half = 8; half >= 1; half /= 2) {
    for (int j = 0; j < half; ++j) lanes[j] = lanes[j] + lanes[j + half];
  }
  return lanes[0];
}

// x whose lanes differ in magnitude by factors of 2^5, so a reduction that pairs lanes differently rounds
// differently and shows up as a bit difference.
std::vector<float> SpreadX(int64_t rows, int64_t stride, uint32_t seed) {
  std::vector<float> x = RandomVector(static_cast<size_t>(rows * stride), seed);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < stride; ++k) x[static_cast<size_t>(i * stride + k)] *= std::ldexp(1.0f, (k % 16) * 5 - 40);
  }
  return x;
}

// Runs Linear on every ISA, plain and accumulating, from `initial` outputs, and checks each output bit for
// bit against `dots[i·out + n]` (the canonical order); columns past out_features must stay untouched.
void ExpectCanonicalOnEveryIsa(const std::vector<float>& x, int64_t m, int64_t x_stride, const TestWeight& w,
                               const std::vector<float>& initial, int64_t y_stride, const std::vector<float>& dots,
                               WeightFormat format) {
  const int64_t out = w.view.out_features, in = w.view.in_features;
  for (bool accumulate : {false, true}) {
    for (Isa isa : IsasToTest()) {
      SCOPED_TRACE(test_support::FormatName(format) + " m=" + std::to_string(m) + " out=" + std::to_string(out) +
                   " in=" + std::to_string(in) + (accumulate ? " accumulate" : "") + " isa=" + std::string(IsaName(isa)));
      std::vector<float> y = initial;
      LinearOptions options;
      options.accumulate = accumulate;
      LinearWithIsa(isa, x.data(), m, x_stride, w.view, y.data(), y_stride, options, nullptr);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t n = 0; n < y_stride; ++n) {
          const size_t at = static_cast<size_t>(i * y_stride + n);
          float expected = initial[at];  // past out_features: untouched
          if (n < out) {
            const float dot = dots[static_cast<size_t>(i * out + n)];
            expected = accumulate ? initial[at] + dot : dot;
          }
          ASSERT_EQ(0, std::memcmp(&y[at], &expected, 4))
              << "row " << i << " output " << n << ": " << y[at] << " vs " << expected;
        }
      }
    }
  }
}

// The canonical dots of every row of x against every output of w.
std::vector<float> CanonicalDots(const std::vector<float>& x, int64_t m, int64_t x_stride, const TestWeight& w) {
  const int64_t out = w.view.out_features;
  std::vector<float> dots(static_cast<size_t>(m * out));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t n = 0; n < out; ++n) dots[static_cast<size_t>(i * out + n)] = CanonicalDot(x.data() + i * x_stride, w, n);
  }
  return dots;
}

TEST(LinearPanelTest, EveryTileMixMatchesTheCanonicalOrderBitForBit) {
  uint32_t seed = 100;
  // At() is the decoded fp32 weight exactly as the kernels define it, so it is the FMA's operand.
  for (WeightFormat format : {WeightFormat::kBF16, WeightFormat::kF32, WeightFormat::kFP8Block, WeightFormat::kMXFP4}) {
    for (int64_t in_asked : {16, 48, 64, 200, 512}) {
      const int64_t in = format == WeightFormat::kMXFP4 ? (in_asked + 31) / 32 * 32 : in_asked;
      for (int64_t out : {1, 3, 4, 5, 8, 13}) {
        const TestWeight w = MakeTestWeight(format, out, in, seed++);
        for (int64_t m : {5, 6, 7, 8, 11, 48, 49}) {
          const int64_t x_stride = in + 3, y_stride = out + 2;
          const std::vector<float> x = SpreadX(m, x_stride, seed++);
          const std::vector<float> initial = RandomVector(static_cast<size_t>(m * y_stride), seed++);
          ExpectCanonicalOnEveryIsa(x, m, x_stride, w, initial, y_stride, CanonicalDots(x, m, x_stride, w), format);
        }
      }
    }
  }
}

// Larger batches take the lane-major panel where the ISA has one (AVX2): whole and partial groups of 16
// outputs, tiles of 6 rows of x and every remainder of 1 to 5 rows, runs of k longer than one chunk of
// 512 (in = 600, 1040), more than one panel block (out = 120 at in = 600 is two), inputs that are and are
// not whole 16-lane steps (200, 600), rows of x and y wider than the product, more rows of x than one padded
// copy of them holds (m = 1000 at in = 1040: a group of 990 rows, then one of 10); each output bit for bit
// the canonical order, plain and accumulating.
TEST(LinearPanelTest, LargeBatchesMatchTheCanonicalOrderBitForBit) {
  struct ProductShape {
    int64_t m, out, in;
  };
  const ProductShape shapes[] = {{8, 16, 16}, {13, 33, 48}, {17, 120, 600}, {9, 17, 200}, {22, 40, 1040}, {12, 3, 64},
                                  {1000, 17, 1040}};
  uint32_t seed = 500;
  for (WeightFormat format : {WeightFormat::kBF16, WeightFormat::kF32, WeightFormat::kFP8Block, WeightFormat::kMXFP4}) {
    for (const ProductShape& shape : shapes) {
      const int64_t m = shape.m, out = shape.out;
      const int64_t in = format == WeightFormat::kMXFP4 ? (shape.in + 31) / 32 * 32 : shape.in;
      const TestWeight w = MakeTestWeight(format, out, in, seed++);
      const int64_t x_stride = in + 5, y_stride = out + 3;
      const std::vector<float> x = SpreadX(m, x_stride, seed++);
      const std::vector<float> initial = RandomVector(static_cast<size_t>(m * y_stride), seed++);
      ExpectCanonicalOnEveryIsa(x, m, x_stride, w, initial, y_stride, CanonicalDots(x, m, x_stride, w), format);
    }
  }
}

// kBf16Activations (AVX512_BF16): the panel path of every tile mix gives each row bit for bit what the
// in-register path gives it alone (m = 1), and accumulating adds that once to the existing output.
TEST(LinearPanelTest, Bf16ActivationPanelsEqualSingleRows) {
  if (!IsaSupported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16 here";
  LinearOptions options;
  options.precision = LinearPrecision::kBf16Activations;
  uint32_t seed = 300;
  for (WeightFormat format : {WeightFormat::kBF16, WeightFormat::kFP8Block, WeightFormat::kMXFP4}) {
    for (int64_t in_asked : {32, 40, 200, 512}) {  // 40, 200: a zero-padded last 32-element chunk
      const int64_t in = format == WeightFormat::kMXFP4 ? (in_asked + 31) / 32 * 32 : in_asked;
      for (int64_t out : {1, 4, 5, 8, 13}) {
        const TestWeight w = MakeTestWeight(format, out, in, seed++);
        for (int64_t m : {5, 7, 8, 49}) {
          SCOPED_TRACE(test_support::FormatName(format) + " m=" + std::to_string(m) + " out=" + std::to_string(out) +
                       " in=" + std::to_string(in));
          const std::vector<float> x = RandomVector(static_cast<size_t>(m * in), seed++);
          std::vector<float> alone(static_cast<size_t>(m * out));
          for (int64_t i = 0; i < m; ++i) {
            LinearWithIsa(Isa::kAvx512Bf16, x.data() + i * in, 1, in, w.view, alone.data() + i * out, out, options,
                          nullptr);
          }
          std::vector<float> batch(alone.size());
          LinearWithIsa(Isa::kAvx512Bf16, x.data(), m, in, w.view, batch.data(), out, options, nullptr);
          ASSERT_EQ(0, std::memcmp(batch.data(), alone.data(), batch.size() * 4));
          const std::vector<float> initial = RandomVector(alone.size(), seed++);
          std::vector<float> accumulated = initial;
          LinearOptions accumulating = options;
          accumulating.accumulate = true;
          LinearWithIsa(Isa::kAvx512Bf16, x.data(), m, in, w.view, accumulated.data(), out, accumulating, nullptr);
          for (size_t a = 0; a < initial.size(); ++a) ASSERT_EQ(accumulated[a], initial[a] + alone[a]) << a;
        }
      }
    }
  }
}

// NaN weight codes and infinite activations inside whole-tile panels (in % 16 == 0) come out exactly as
// the scalar kernel has them, including which NaN.
TEST(LinearPanelTest, NanAndInfinityInFullTilesMatchScalar) {
  const int64_t m = 9, out = 12, in = 256;
  TestWeight w = MakeTestWeight(WeightFormat::kFP8Block, out, in, 5);
  w.data[1 * in + 3] = 0x7F;
  w.data[6 * in + 200] = 0xFF;
  std::vector<float> x = RandomVector(static_cast<size_t>(m * in), 6);
  x[2 * in + 40] = INFINITY;
  x[7 * in + 41] = -INFINITY;
  std::vector<float> scalar(static_cast<size_t>(m * out));
  LinearWithIsa(Isa::kScalar, x.data(), m, in, w.view, scalar.data(), out, {}, nullptr);
  EXPECT_TRUE(std::isnan(scalar[1]));
  EXPECT_TRUE(std::isnan(scalar[6]));
  EXPECT_TRUE(std::isinf(scalar[2 * out]) || std::isnan(scalar[2 * out]));
  for (Isa isa : IsasToTest()) {
    std::vector<float> y(scalar.size());
    LinearWithIsa(isa, x.data(), m, in, w.view, y.data(), out, {}, nullptr);
    EXPECT_EQ(0, std::memcmp(y.data(), scalar.data(), y.size() * 4)) << IsaName(isa);
  }
}

}  // namespace
}  // namespace deepinfer::kernels
