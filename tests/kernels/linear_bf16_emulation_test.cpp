// LinearPrecision::kBf16Activations means the same arithmetic on every CPU: where AVX512_BF16 is missing,
// an emulation of vdpbf16ps runs (kernels/linear.h). Here the emulations (portable, and AVX2, which AVX-512
// CPUs without AVX512_BF16 also run) are compared bit for bit with the instruction itself wherever this
// CPU has it, on ordinary values and on the edges of the instruction's rules (denormal inputs read as zero,
// denormal results flushed, the odd element of each pair first, overflow, cancellation, NaN); and with each
// other everywhere.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/linear.h"
#include "kernels/linear_dispatch.h"
#include "test_weights.h"

namespace deepinfer::kernels {
namespace {

using test_support::MakeTestWeight;
using test_support::RandomVector;
using test_support::TestWeight;
using test_support::WeightOptions;

// Bit equality, NaN matching any NaN (payload propagation is not part of the contract).
::testing::AssertionResult SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], 4) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << std::hexfloat << a[i] << " vs " << b[i];
  }
  return ::testing::AssertionSuccess();
}

std::vector<Isa> EmulatingIsas() {
  std::vector<Isa> isas = {Isa::kScalar};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    if (IsaSupported(isa)) isas.push_back(isa);
  return isas;
}

struct Case {
  WeightFormat format;
  WeightOptions options;
};

std::vector<Case> Bf16Formats() {
  WeightOptions fp8;
  fp8.block_out = 32;
  fp8.block_in = 64;
  WeightOptions mx_high;
  mx_high.nibble_order = NibbleOrder::kHighFirst;
  return {{WeightFormat::kBF16, {}}, {WeightFormat::kFP8Block, fp8}, {WeightFormat::kMXFP4, {}},
          {WeightFormat::kMXFP4, mx_high}};
}

std::vector<float> RunBf16(Isa isa, const std::vector<float>& x, int64_t m, const WeightView& w, bool accumulate,
                       const std::vector<float>& initial) {
  LinearOptions options;
  options.precision = LinearPrecision::kBf16Activations;
  options.accumulate = accumulate;
  std::vector<float> y = initial;
  y.resize(static_cast<size_t>(m * w.out_features), 0.0f);
  LinearWithIsa(isa, x.data(), m, w.in_features, w, y.data(), w.out_features, options, nullptr);
  return y;
}

// x values that exercise the rules: ordinary ones, tiny ones (bf16 denormals after rounding, and products
// that land in fp32's denormal range), huge ones (products that overflow), exact negatives of neighbours
// (cancellation to ±0), and the odd NaN or infinity.
std::vector<float> EdgeVector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    switch (rng() % 10) {
      case 0: v[i] = std::ldexp(normal(rng), -128 - static_cast<int>(rng() % 10)); break;  // denormal
      case 1: v[i] = std::ldexp(normal(rng), -120 + static_cast<int>(rng() % 12)); break;  // tiny products
      case 2: v[i] = std::ldexp(normal(rng), 120 + static_cast<int>(rng() % 7)); break;    // overflow
      case 3: v[i] = i > 0 ? -v[i - 1] : 1.0f; break;
      case 4: v[i] = rng() % 50 == 0 ? (rng() % 2 ? INFINITY : NAN) : 0.0f; break;
      default: v[i] = normal(rng);
    }
  }
  return v;
}

TEST(LinearBf16Emulation, EqualsTheInstructionBitForBit) {
  if (!IsaSupported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16 here to compare with";
  for (const Case& c : Bf16Formats()) {
    for (int64_t in : {32, 33, 64, 96, 100, 392, 1000}) {
      if (c.format == WeightFormat::kMXFP4 && in % 32 != 0) continue;
      const TestWeight w = MakeTestWeight(c.format, 37, in, static_cast<uint32_t>(in), c.options);
      for (int64_t m : {1, 2, 3, 4, 5, 8, 17}) {
        for (bool edge : {false, true}) {
          const std::vector<float> x = edge ? EdgeVector(static_cast<size_t>(m * in), static_cast<uint32_t>(m * 7 + in))
                                            : RandomVector(static_cast<size_t>(m * in), static_cast<uint32_t>(m + in));
          const std::vector<float> initial = RandomVector(static_cast<size_t>(m * 37), 3);
          for (bool accumulate : {false, true}) {
            const std::vector<float> want = RunBf16(Isa::kAvx512Bf16, x, m, w.view, accumulate, initial);
            for (Isa isa : EmulatingIsas()) {
              EXPECT_TRUE(SameBits(RunBf16(isa, x, m, w.view, accumulate, initial), want))
                  << test_support::FormatName(c.format) << " in " << in << " m " << m << (edge ? " edge" : "")
                  << (accumulate ? " accumulate" : "") << " on " << IsaName(isa);
            }
          }
        }
      }
    }
  }
}

// Weights at the edges too: bf16 weights with tiny and denormal values, so that products underflow and
// weight denormals are read as zero; and whole rows of tiny values (x and weights near 2^-64), so that every
// lane's running sum lives around fp32's smallest normal, where flushing denormal results decides the bits.
TEST(LinearBf16Emulation, EqualsTheInstructionOnTinyValues) {
  if (!IsaSupported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16 here to compare with";
  const int64_t out = 21, in = 160, m = 6;
  std::mt19937 rng(11);
  for (bool all_tiny : {false, true}) {
    std::vector<uint16_t> bits(static_cast<size_t>(out * in));
    for (uint16_t& b : bits) {
      const uint16_t sign = static_cast<uint16_t>((rng() & 1) << 15), mantissa = static_cast<uint16_t>(rng() & 0x7F);
      const uint16_t exponent = static_cast<uint16_t>(all_tiny ? 57 + rng() % 13
                                                    : rng() % 3 == 0 ? rng() % 4 : 1 + rng() % 254);
      b = static_cast<uint16_t>(sign | (exponent << 7) | mantissa);
    }
    const WeightView w{WeightFormat::kBF16, out, in, bits.data()};
    std::vector<float> x = EdgeVector(static_cast<size_t>(m * in), 12);
    if (all_tiny) {
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (float& v : x) v = std::ldexp(normal(rng), -70 + static_cast<int>(rng() % 13));
    }
    const std::vector<float> want = RunBf16(Isa::kAvx512Bf16, x, m, w, false, {});
    int64_t tiny_outputs = 0;
    for (float v : want) tiny_outputs += v != 0 && std::fabs(v) < 1e-36f;
    if (all_tiny) {
      EXPECT_GT(tiny_outputs, 0) << "the case must reach the smallest normals";
    }
    for (Isa isa : EmulatingIsas())
      EXPECT_TRUE(SameBits(RunBf16(isa, x, m, w, false, {}), want)) << IsaName(isa) << (all_tiny ? " all tiny" : "");
  }
}

// Everywhere (with or without the instruction): the emulations agree with each other, are batch invariant,
// and round only x (each output within the documented bound of the exact product's value).
TEST(LinearBf16Emulation, EmulationsAgreeAndStayWithinTheDocumentedRounding) {
  for (const Case& c : Bf16Formats()) {
    const int64_t in = 256, out = 29, m = 9;
    const TestWeight w = MakeTestWeight(c.format, out, in, 5, c.options);
    const std::vector<float> x = RandomVector(static_cast<size_t>(m * in), 6);
    const std::vector<float> scalar = RunBf16(Isa::kScalar, x, m, w.view, false, {});
    for (Isa isa : EmulatingIsas()) {
      const std::vector<float> y = RunBf16(isa, x, m, w.view, false, {});
      EXPECT_TRUE(SameBits(y, scalar)) << IsaName(isa);
      for (int64_t i = 0; i < m; ++i) {
        const std::vector<float> row(x.begin() + i * in, x.begin() + (i + 1) * in);
        const std::vector<float> alone = RunBf16(isa, row, 1, w.view, false, {});
        EXPECT_TRUE(SameBits(alone, std::vector<float>(y.begin() + i * out, y.begin() + (i + 1) * out)));
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t n = 0; n < out; ++n) {
        double ref = 0, magnitude = 0;
        for (int64_t k = 0; k < in; ++k) {
          ref += static_cast<double>(x[i * in + k]) * w.At(n, k);
          magnitude += std::fabs(static_cast<double>(x[i * in + k]) * w.At(n, k));
        }
        // x rounded to bf16: relative error ≤ 2^-9 per product; plus fp32 accumulation over `in` terms.
        EXPECT_NEAR(scalar[i * out + n], ref, std::ldexp(1.0, -9) * magnitude + in * 6e-8 * magnitude);
      }
    }
    // And the rounding really happens (else this would be kExact).
    std::vector<float> exact(static_cast<size_t>(m * out));
    LinearWithIsa(Isa::kScalar, x.data(), m, in, w.view, exact.data(), out, {}, nullptr);
    EXPECT_FALSE(SameBits(exact, scalar));
  }
}

}  // namespace
}  // namespace deepinfer::kernels
