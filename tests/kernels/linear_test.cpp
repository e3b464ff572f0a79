// Linear against a double-precision reference for every weight format and every ISA this CPU runs, plus
// the properties the engine relies on: bit-identical results across ISAs, across batch sizes and row
// positions, across thread counts, and between a quantised matrix and its dequantised F32 copy.
#include "kernels/linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/linear_dispatch.h"
#include "test_weights.h"

namespace deepinfer::kernels {
namespace {

using test_support::MakeTestWeight;
using test_support::RandomVector;
using test_support::TestWeight;
using test_support::WeightOptions;

std::vector<Isa> LinearIsasToTest() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    if (IsaSupported(isa)) isas.push_back(isa);
  }
  return isas;
}

struct LinearShape {
  int64_t m, out, in;
};

// Odd sizes on purpose: tails of the 16-lane reduction, partial FP8 blocks, tiny and single-row cases.
const LinearShape kLinearShapes[] = {{1, 1, 1},    {1, 17, 33},   {2, 5, 64},    {3, 31, 127},  {5, 16, 128}, {7, 33, 200},
                         {8, 129, 96}, {13, 40, 257}, {33, 23, 320}, {16, 70, 512}, {4, 3, 1000}, {20, 48, 48}};

struct FormatCase {
  WeightFormat format;
  WeightOptions options;
  std::string name;
};

std::vector<FormatCase> FormatCases() {
  std::vector<FormatCase> cases;
  cases.push_back({WeightFormat::kF32, {}, "F32"});
  cases.push_back({WeightFormat::kBF16, {}, "BF16"});
  cases.push_back({WeightFormat::kFP8Block, {ScaleFormat::kUE8M0, 128, 128, NibbleOrder::kLowFirst}, "FP8-ue8m0"});
  cases.push_back({WeightFormat::kFP8Block, {ScaleFormat::kF32, 128, 128, NibbleOrder::kLowFirst}, "FP8-f32"});
  cases.push_back({WeightFormat::kFP8Block, {ScaleFormat::kF32, 5, 24, NibbleOrder::kLowFirst}, "FP8-f32-5x24"});
  cases.push_back({WeightFormat::kMXFP4, {ScaleFormat::kUE8M0, 128, 128, NibbleOrder::kLowFirst}, "MXFP4-low"});
  cases.push_back({WeightFormat::kMXFP4, {ScaleFormat::kUE8M0, 128, 128, NibbleOrder::kHighFirst}, "MXFP4-high"});
  return cases;
}

int64_t AdjustIn(WeightFormat format, int64_t in) { return format == WeightFormat::kMXFP4 ? (in + 31) / 32 * 32 : in; }

// Σ_k x·w in double, and Σ_k |x·w| for the error bound.
void Reference(const float* x, const TestWeight& w, int64_t n, double* value, double* magnitude) {
  double sum = 0, abs_sum = 0;
  for (int64_t k = 0; k < w.view.in_features; ++k) {
    const double p = static_cast<double>(x[k]) * w.At(n, k);
    sum += p;
    abs_sum += std::fabs(p);
  }
  *value = sum;
  *magnitude = abs_sum;
}

// fp32 accumulation error bound for the canonical order: each lane adds ceil(in/16) rounded terms, the
// lane tree adds 4 more roundings, the optional accumulate one more; γ_n ≤ 1.01·n·u with u = 2^-24.
// Doubled for margin.
double Bound(int64_t in, double magnitude) {
  const double roundings = static_cast<double>((in + 15) / 16 + 5);
  return 2.0 * roundings * std::ldexp(1.0, -24) * magnitude + 1e-30;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(LinearTest, MatchesReferenceOnEveryFormatShapeAndIsa) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (const FormatCase& fc : FormatCases()) {
    for (const LinearShape& shape : kLinearShapes) {
      const int64_t in = AdjustIn(fc.format, shape.in);
      const int64_t x_stride = in + 3, y_stride = shape.out + 5;
      const TestWeight w = MakeTestWeight(fc.format, shape.out, in, seed++, fc.options);
      const std::vector<float> x = RandomVector(static_cast<size_t>(shape.m * x_stride), seed++);
      std::vector<float> scalar_result;
      for (Isa isa : LinearIsasToTest()) {
        SCOPED_TRACE(fc.name + " m=" + std::to_string(shape.m) + " out=" + std::to_string(shape.out) +
                     " in=" + std::to_string(in) + " isa=" + std::string(IsaName(isa)));
        std::vector<float> y(static_cast<size_t>(shape.m * y_stride), -7.0f);
        LinearWithIsa(isa, x.data(), shape.m, x_stride, w.view, y.data(), y_stride, {}, &pool);
        for (int64_t i = 0; i < shape.m; ++i) {
          for (int64_t n = 0; n < shape.out; ++n) {
            double ref, magnitude;
            Reference(x.data() + i * x_stride, w, n, &ref, &magnitude);
            ASSERT_NEAR(y[static_cast<size_t>(i * y_stride + n)], ref, Bound(in, magnitude))
                << "row " << i << " output " << n;
          }
          for (int64_t n = shape.out; n < y_stride; ++n) {
            ASSERT_EQ(y[static_cast<size_t>(i * y_stride + n)], -7.0f) << "wrote past out_features";
          }
        }
        // Every ISA computes the same canonical order, so results agree bit for bit.
        if (isa == Isa::kScalar)
          scalar_result = y;
        else
          EXPECT_TRUE(BitEqual(y, scalar_result)) << "differs from the scalar kernel";
      }
    }
  }
}

TEST(LinearTest, QuantizedEqualsF32OnDequantizedWeights) {
  for (const FormatCase& fc : FormatCases()) {
    if (fc.format == WeightFormat::kF32) continue;
    const int64_t m = 6, out = 37, in = AdjustIn(fc.format, 300);
    const TestWeight w = MakeTestWeight(fc.format, out, in, 99, fc.options);
    WeightView dense{WeightFormat::kF32, out, in, w.dequantized.data()};
    const std::vector<float> x = RandomVector(static_cast<size_t>(m * in), 5);
    for (Isa isa : LinearIsasToTest()) {
      SCOPED_TRACE(fc.name + " isa=" + std::string(IsaName(isa)));
      std::vector<float> quantized(static_cast<size_t>(m * out)), reference(static_cast<size_t>(m * out));
      LinearWithIsa(isa, x.data(), m, in, w.view, quantized.data(), out, {}, nullptr);
      LinearWithIsa(isa, x.data(), m, in, dense, reference.data(), out, {}, nullptr);
      EXPECT_TRUE(BitEqual(quantized, reference));
    }
  }
}

// FP8 scales so large that scale · 256 overflows (the vector kernels fold 256 into the scale otherwise).
TEST(LinearTest, Fp8HugeScalesStayExact) {
  const int64_t out = 20, in = 256;
  TestWeight w = MakeTestWeight(WeightFormat::kFP8Block, out, in, 31, {ScaleFormat::kF32, 16, 128});
  const float huge = std::ldexp(1.0f, 121);
  float* scales = reinterpret_cast<float*>(w.scales.data());
  const size_t scale_count = w.scales.size() / 4;
  for (size_t s = 0; s < scale_count; s += 2) scales[s] = huge;
  for (int64_t n = 0; n < out; ++n) {
    for (int64_t k = 0; k < in; ++k) {
      uint8_t& q = w.data[static_cast<size_t>(n * in + k)];
      q &= 0xBF;  // exponent field < 8: |value| < 2, so value · 2^121 stays finite
      const float scale = scales[(n / 16) * 2 + k / 128];
      w.dequantized[static_cast<size_t>(n * in + k)] = static_cast<float>(test_support::ReferenceE4M3(q)) * scale;
    }
  }
  const std::vector<float> x = RandomVector(3 * in, 32, 1e-30f);
  WeightView dense{WeightFormat::kF32, out, in, w.dequantized.data()};
  for (Isa isa : LinearIsasToTest()) {
    std::vector<float> quantized(3 * out), reference(3 * out);
    LinearWithIsa(isa, x.data(), 3, in, w.view, quantized.data(), out, {}, nullptr);
    LinearWithIsa(isa, x.data(), 3, in, dense, reference.data(), out, {}, nullptr);
    EXPECT_TRUE(BitEqual(quantized, reference)) << IsaName(isa);
    for (float v : quantized) EXPECT_TRUE(std::isfinite(v));
  }
}

// E4M3 NaN codes (0x7F, 0xFF) in the weights make exactly their outputs NaN, on every ISA and path.
TEST(LinearTest, Fp8NanCodesGiveNan) {
  const int64_t out = 9, in = 200;
  TestWeight w = MakeTestWeight(WeightFormat::kFP8Block, out, in, 41);
  w.data[2 * in + 17] = 0x7F;
  w.data[5 * in + 130] = 0xFF;
  const std::vector<float> x = RandomVector(6 * in, 42);
  for (Isa isa : LinearIsasToTest()) {
    for (int64_t m : {1, 6}) {  // the in-register and the panel path
      std::vector<float> y(static_cast<size_t>(m * out));
      LinearWithIsa(isa, x.data(), m, in, w.view, y.data(), out, {}, nullptr);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t n = 0; n < out; ++n) {
          EXPECT_EQ(std::isnan(y[static_cast<size_t>(i * out + n)]), n == 2 || n == 5)
              << IsaName(isa) << " m=" << m << " row " << i << " out " << n;
        }
      }
    }
  }
}

// The result for a row depends on that row alone: not on m, on its position, or on the thread count.
TEST(LinearTest, BatchInvariance) {
  ThreadPool pool1(1), pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool1, &pool2, &pool3};
  for (const FormatCase& fc : FormatCases()) {
    const int64_t rows = 33, out = 150, in = AdjustIn(fc.format, 392);
    const TestWeight w = MakeTestWeight(fc.format, out, in, 7, fc.options);
    const std::vector<float> x = RandomVector(static_cast<size_t>(rows * in), 8);
    for (Isa isa : LinearIsasToTest()) {
      for (LinearPrecision precision : {LinearPrecision::kExact, LinearPrecision::kBf16Activations}) {
        LinearOptions options;
        options.precision = precision;
        SCOPED_TRACE(fc.name + " isa=" + std::string(IsaName(isa)) +
                     (precision == LinearPrecision::kExact ? " exact" : " bf16"));
        // Each row alone, single-threaded.
        std::vector<float> alone(static_cast<size_t>(rows * out));
        for (int64_t i = 0; i < rows; ++i) {
          LinearWithIsa(isa, x.data() + i * in, 1, in, w.view, alone.data() + i * out, out, options, nullptr);
        }
        // Every prefix batch size m, every pool; the rows reversed so that each row moves position.
        std::vector<float> reversed_x(x.size());
        for (int64_t i = 0; i < rows; ++i) {
          std::memcpy(reversed_x.data() + i * in, x.data() + (rows - 1 - i) * in, static_cast<size_t>(in) * 4);
        }
        for (int64_t m : {2, 3, 7, 8, 9, 16, 17, 32, 33}) {
          ThreadPool* pool = pools[m % 4];
          std::vector<float> batch(static_cast<size_t>(m * out));
          LinearWithIsa(isa, x.data(), m, in, w.view, batch.data(), out, options, pool);
          ASSERT_EQ(0, std::memcmp(batch.data(), alone.data(), batch.size() * 4)) << "m=" << m;
          const float* tail = reversed_x.data() + (rows - m) * in;  // rows m-1 .. 0 of x, in reverse
          LinearWithIsa(isa, tail, m, in, w.view, batch.data(), out, options, pools[(m + 1) % 4]);
          for (int64_t i = 0; i < m; ++i) {
            ASSERT_EQ(0, std::memcmp(batch.data() + i * out, alone.data() + (m - 1 - i) * out, out * 4))
                << "m=" << m << " row " << i;
          }
        }
      }
    }
  }
}

TEST(LinearTest, AccumulateAddsOnceToExistingOutput) {
  for (const FormatCase& fc : FormatCases()) {
    const int64_t m = 9, out = 45, in = AdjustIn(fc.format, 160);
    const TestWeight w = MakeTestWeight(fc.format, out, in, 3, fc.options);
    const std::vector<float> x = RandomVector(static_cast<size_t>(m * in), 4);
    const std::vector<float> initial = RandomVector(static_cast<size_t>(m * out), 6);
    for (Isa isa : LinearIsasToTest()) {
      SCOPED_TRACE(fc.name + " isa=" + std::string(IsaName(isa)));
      std::vector<float> plain(initial.size()), accumulated = initial;
      LinearWithIsa(isa, x.data(), m, in, w.view, plain.data(), out, {}, nullptr);
      LinearOptions options;
      options.accumulate = true;
      LinearWithIsa(isa, x.data(), m, in, w.view, accumulated.data(), out, options, nullptr);
      for (size_t i = 0; i < initial.size(); ++i) ASSERT_EQ(accumulated[i], initial[i] + plain[i]) << i;
    }
  }
}

TEST(LinearTest, DefaultEntryUsesBestIsa) {
  const TestWeight w = MakeTestWeight(WeightFormat::kBF16, 19, 70, 11);
  const std::vector<float> x = RandomVector(3 * 70, 12);
  std::vector<float> a(3 * 19), b(3 * 19);
  Linear(x.data(), 3, 70, w.view, a.data(), 19);
  LinearWithIsa(BestIsa(), x.data(), 3, 70, w.view, b.data(), 19, {}, nullptr);
  EXPECT_TRUE(BitEqual(a, b));
}

// On every ISA: with AVX512_BF16 the instruction runs, elsewhere its emulation (same bits; see
// linear_bf16_emulation_test.cpp).
TEST(LinearTest, Bf16ActivationsStayWithinTheirDocumentedRounding) {
  LinearOptions options;
  options.precision = LinearPrecision::kBf16Activations;
  for (Isa isa : LinearIsasToTest()) {
    SCOPED_TRACE(IsaName(isa));
    for (const FormatCase& fc : FormatCases()) {
      const int64_t m = 5, out = 41, in = AdjustIn(fc.format, 333);
      const bool takes_bf16_path =
          fc.format == WeightFormat::kBF16 || fc.format == WeightFormat::kMXFP4 ||
          (fc.format == WeightFormat::kFP8Block && fc.options.scale_format == ScaleFormat::kUE8M0);
      const TestWeight w = MakeTestWeight(fc.format, out, in, 21, fc.options);
      const std::vector<float> x = RandomVector(static_cast<size_t>(m * in), 22);
      std::vector<float> y(static_cast<size_t>(m * out)), single(static_cast<size_t>(out));
      LinearWithIsa(isa, x.data(), m, in, w.view, y.data(), out, options, nullptr);
      std::vector<float> exact(y.size());
      LinearWithIsa(isa, x.data(), m, in, w.view, exact.data(), out, {}, nullptr);
      // Rounding x to bf16 must show somewhere, or the fast path did not run; where it does not apply, the
      // result is the exact one.
      EXPECT_EQ(BitEqual(y, exact), !takes_bf16_path) << fc.name;
      for (int64_t i = 0; i < m; ++i) {
        LinearWithIsa(isa, x.data() + i * in, 1, in, w.view, single.data(), out, options, nullptr);
        ASSERT_EQ(0, std::memcmp(single.data(), y.data() + i * out, out * 4)) << fc.name << " row " << i;
        for (int64_t n = 0; n < out; ++n) {
          double ref, magnitude;
          Reference(x.data() + i * in, w, n, &ref, &magnitude);
          // x rounded to bf16: relative error ≤ 2^-9 per product, plus fp32 accumulation.
          const double bound = std::ldexp(1.0, -9) * magnitude + Bound(in, magnitude);
          ASSERT_NEAR(y[static_cast<size_t>(i * out + n)], ref, bound) << fc.name << " row " << i << " out " << n;
        }
      }
    }
  }
}

// Degenerate shapes: an empty reduction gives zeros (or leaves y unchanged when accumulating); m = 0 and
// out = 0 touch nothing.
TEST(LinearTest, EmptyShapes) {
  const float x[6] = {1, 2, 3, 4, 5, 6};
  const float weight = 0;
  for (Isa isa : LinearIsasToTest()) {
    for (int64_t m : {1, 6}) {
      WeightView w{WeightFormat::kF32, 3, 0, &weight};
      std::vector<float> y(static_cast<size_t>(m * 3), 9.0f);
      LinearWithIsa(isa, x, m, 1, w, y.data(), 3, {}, nullptr);
      for (float v : y) EXPECT_EQ(v, 0.0f) << IsaName(isa);
      std::fill(y.begin(), y.end(), 9.0f);
      LinearOptions options;
      options.accumulate = true;
      LinearWithIsa(isa, x, m, 1, w, y.data(), 3, options, nullptr);
      for (float v : y) EXPECT_EQ(v, 9.0f) << IsaName(isa);
    }
    float y = 7.0f;
    WeightView none{WeightFormat::kBF16, 0, 4, nullptr};
    LinearWithIsa(isa, x, 1, 4, none, &y, 1, {}, nullptr);
    WeightView some{WeightFormat::kF32, 1, 1, &weight};
    LinearWithIsa(isa, x, 0, 1, some, &y, 1, {}, nullptr);
    EXPECT_EQ(y, 7.0f);
  }
}

// A row slice computes exactly the corresponding outputs of the whole matrix.
TEST(LinearTest, SliceRowsMatchesTheWholeProduct) {
  for (const FormatCase& fc : FormatCases()) {
    const int64_t out = 300, in = AdjustIn(fc.format, 160), m = 3;
    const TestWeight w = MakeTestWeight(fc.format, out, in, 51, fc.options);
    const std::vector<float> x = RandomVector(static_cast<size_t>(m * in), 52);
    std::vector<float> whole(static_cast<size_t>(m * out));
    Linear(x.data(), m, in, w.view, whole.data(), out, nullptr);
    const int64_t begin = fc.format == WeightFormat::kFP8Block ? 2 * fc.options.block_out : 77;
    const int64_t count = 40;
    Result<WeightView> slice = SliceRows(w.view, begin, count);
    ASSERT_TRUE(slice.ok()) << fc.name;
    std::vector<float> part(static_cast<size_t>(m * count));
    Linear(x.data(), m, in, slice.value(), part.data(), count, nullptr);
    for (int64_t i = 0; i < m; ++i) {
      ASSERT_EQ(0, std::memcmp(part.data() + i * count, whole.data() + i * out + begin, count * 4)) << fc.name;
    }
  }
  const TestWeight fp8 = MakeTestWeight(WeightFormat::kFP8Block, 256, 128, 53);
  EXPECT_FALSE(SliceRows(fp8.view, 5, 10).ok()) << "not on a block boundary";
  EXPECT_FALSE(SliceRows(fp8.view, 128, 200).ok()) << "past the end";
}

TEST(LinearTest, ValidationNamesTheProblem) {
  WeightView w{WeightFormat::kMXFP4, 4, 48, nullptr};
  uint8_t storage[4 * 48] = {};
  w.data = storage;
  w.scales = storage;
  Status status = ValidateWeightView(w);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.ToString().find("multiple of 32"), std::string::npos) << status.ToString();
  w.in_features = 64;
  EXPECT_TRUE(ValidateWeightView(w).ok());
  w.scales = nullptr;
  EXPECT_FALSE(ValidateWeightView(w).ok());
  WeightView fp8{WeightFormat::kFP8Block, 4, 64, storage, storage};
  fp8.block_in = 0;
  EXPECT_FALSE(ValidateWeightView(fp8).ok());
}

TEST(LinearTest, WeightBytesCountsDataAndScales) {
  // 256x512 weights: FP8 128x128 blocks -> 2x4 scales; MXFP4 -> 256 * 512/32 scales.
  WeightView w{WeightFormat::kFP8Block, 256, 512, nullptr};
  w.scale_format = ScaleFormat::kF32;
  EXPECT_EQ(WeightBytes(w), 256 * 512 + 8 * 4);
  w.format = WeightFormat::kMXFP4;
  EXPECT_EQ(WeightBytes(w), 256 * 256 + 256 * 16);
  w.format = WeightFormat::kBF16;
  EXPECT_EQ(WeightBytes(w), 256 * 512 * 2);
}

}  // namespace
}  // namespace deepinfer::kernels
