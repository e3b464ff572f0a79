// The decode-sized kernels (m ≤ 8) take shortcuts that hold only under preconditions: FP8 block scales
// that are powers of two in range, rows of x that scale exactly, no E4M3 NaN codes, subnormal inputs
// honoured (no DAZ). Each test drives one precondition to both sides, for every m from 1 to 8, odd shapes
// and tails, and requires every ISA's result to be bit-identical to the scalar kernel (NaN where it is NaN).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/linear.h"
#include "kernels/linear_dispatch.h"
#include "test_weights.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace deepinfer::kernels {
namespace {

using test_support::MakeTestWeight;
using test_support::RandomVector;
using test_support::TestWeight;
using test_support::WeightOptions;

std::vector<Isa> VectorIsas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    if (IsaSupported(isa)) isas.push_back(isa);
  }
  return isas;
}

// Equal bit for bit, except that any NaN matches any NaN (payloads are not part of the contract).
bool SameResult(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0;
}

// Runs every m in 1..8 on every vector ISA (single- and two-threaded) and compares with the scalar kernel.
void ExpectEveryIsaMatchesScalar(const WeightView& w, const std::vector<float>& x, const std::string& what) {
  ThreadPool pool(2);
  const int64_t in = w.in_features, out = w.out_features;
  for (int64_t m = 1; m <= 8; ++m) {
    ASSERT_GE(static_cast<int64_t>(x.size()), m * in);
    std::vector<float> expected(static_cast<size_t>(m * out));
    LinearWithIsa(Isa::kScalar, x.data(), m, in, w, expected.data(), out, {}, nullptr);
    for (Isa isa : VectorIsas()) {
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> y(static_cast<size_t>(m * out), -3.0f);
        LinearWithIsa(isa, x.data(), m, in, w, y.data(), out, {}, p);
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_TRUE(SameResult(y[i], expected[i]))
              << what << " isa=" << IsaName(isa) << " m=" << m << " threads=" << (p ? 2 : 1) << " row "
              << static_cast<int64_t>(i) / out << " out " << static_cast<int64_t>(i) % out << ": " << y[i]
              << " vs scalar " << expected[i];
        }
      }
    }
  }
}

struct Shape {
  int64_t out, in;
};
// Tails of 16 and of 64 bytes, partial FP8 blocks, fewer rows than a tile, row blocks split among threads.
const Shape kFp8Shapes[] = {{1, 1}, {7, 15}, {9, 64}, {33, 100}, {130, 200}, {300, 1030}};

TEST(LinearGemvTest, Fp8EveryBatchSizeShapeAndScaleKind) {
  uint32_t seed = 100;
  for (const Shape& s : kFp8Shapes) {
    const std::vector<float> x = RandomVector(static_cast<size_t>(8 * s.in), seed++);
    // Power-of-two scales in both encodings (the prescaled path), and arbitrary fp32 scales (not).
    const TestWeight ue8m0 = MakeTestWeight(WeightFormat::kFP8Block, s.out, s.in, seed++);
    ExpectEveryIsaMatchesScalar(ue8m0.view, x, "ue8m0 " + std::to_string(s.out) + "x" + std::to_string(s.in));
    const TestWeight odd_blocks =
        MakeTestWeight(WeightFormat::kFP8Block, s.out, s.in, seed++, {ScaleFormat::kUE8M0, 5, 24});
    ExpectEveryIsaMatchesScalar(odd_blocks.view, x, "ue8m0 5x24 blocks");
    TestWeight pow2 = MakeTestWeight(WeightFormat::kFP8Block, s.out, s.in, seed++, {ScaleFormat::kF32, 16, 48});
    std::mt19937 rng(seed++);
    for (size_t i = 0; i + 4 <= pow2.scales.size(); i += 4) {
      const float scale = std::ldexp(rng() % 2 ? 1.0f : -1.0f, static_cast<int>(rng() % 30) - 25);
      std::memcpy(pow2.scales.data() + i, &scale, 4);
    }
    ExpectEveryIsaMatchesScalar(pow2.view, x, "f32 power-of-two scales");
    const TestWeight f32 = MakeTestWeight(WeightFormat::kFP8Block, s.out, s.in, seed++, {ScaleFormat::kF32});
    ExpectEveryIsaMatchesScalar(f32.view, x, "f32 scales");
  }
}

// Rows of x whose prescaled values would overflow or lose bits, and non-finite x: those weight blocks take
// the generic kernel, with the same results.
TEST(LinearGemvTest, Fp8XThatCannotBePrescaledFallsBack) {
  const int64_t out = 260, in = 300;
  TestWeight w = MakeTestWeight(WeightFormat::kFP8Block, out, in, 7);
  // Block row 1 gets tiny scales (2^-127 .. 2^-125): the prescale factor (s · 2^117, or s · 2^104 without
  // VBMI) is then below 1 and tiny x underflow.
  for (size_t i = 3; i < 6; ++i) w.scales[i] = static_cast<uint8_t>(i - 3);
  const float cases[] = {3e38f, -2e37f, 1.1e-38f, 3e-42f, INFINITY, -INFINITY, NAN, 0.0f, -0.0f};
  for (float special : cases) {
    for (int64_t position : {0, 131, 299}) {
      std::vector<float> x = RandomVector(static_cast<size_t>(8 * in), 8);
      x[static_cast<size_t>(5 * in + position)] = special;  // row 5 of x: present from m = 6
      x[static_cast<size_t>(position)] = special / 4;       // row 0
      ExpectEveryIsaMatchesScalar(w.view, x, "x=" + std::to_string(special) + " at " + std::to_string(position));
    }
  }
}

// Scales outside [2^-127, 2^7] (UE8M0 bytes above 134, and the NaN byte 255) leave the prescaled path.
TEST(LinearGemvTest, Fp8ScalesOutsideTheShortcutRange) {
  const int64_t out = 384, in = 512;
  TestWeight w = MakeTestWeight(WeightFormat::kFP8Block, out, in, 9);
  const uint8_t bytes[] = {0, 1, 134, 135, 136, 200, 254, 255, 127, 118, 140, 133};
  for (size_t i = 0; i < w.scales.size(); ++i) w.scales[i] = bytes[i % std::size(bytes)];
  ExpectEveryIsaMatchesScalar(w.view, RandomVector(static_cast<size_t>(8 * in), 10, 1e-3f), "extreme scales");
}

// Every E4M3 code, subnormals and both zeros included, at every position of the 64-byte steps and the tail;
// NaN codes make exactly their outputs NaN.
TEST(LinearGemvTest, Fp8EveryCodeAndNanCodes) {
  const int64_t out = 11, in = 256 + 64 + 13;
  TestWeight w = MakeTestWeight(WeightFormat::kFP8Block, out, in, 11);
  for (int64_t n = 0; n < out; ++n) {
    for (int64_t k = 0; k < in; ++k) {
      uint8_t code = static_cast<uint8_t>((k * 7 + n * 13) % 256);
      if ((code & 0x7F) == 0x7F) code ^= 0x01;
      w.data[static_cast<size_t>(n * in + k)] = code;
    }
  }
  w.data[2 * in + 5] = 0x7F;         // a main 64-byte step
  w.data[3 * in + in - 1] = 0xFF;    // the last tail byte
  w.data[8 * in + 320] = 0x7F;       // the first tail byte
  w.data[10 * in + 63] = 0xFF;       // the end of a 64-byte step, in the last (partial) tile
  const std::vector<float> x = RandomVector(static_cast<size_t>(8 * in), 12);
  ExpectEveryIsaMatchesScalar(w.view, x, "all codes");
  std::vector<float> y(static_cast<size_t>(8 * out));
  for (Isa isa : VectorIsas()) {
    LinearWithIsa(isa, x.data(), 8, in, w.view, y.data(), out, {}, nullptr);
    for (int64_t i = 0; i < 8; ++i) {
      for (int64_t n = 0; n < out; ++n) {
        EXPECT_EQ(std::isnan(y[static_cast<size_t>(i * out + n)]), n == 2 || n == 3 || n == 8 || n == 10)
            << IsaName(isa) << " row " << i << " out " << n;
      }
    }
  }
}

// Every finite E4M3 code at every byte position of the 64-byte steps: row n holds code (k + n) mod 256 at
// input k, so position p of a step sees codes p + n, p + n + 64, p + n + 128 and p + n + 192 across the 64
// rows, which are all 256 (the two NaN codes replaced by their neighbours: they send tiles to the generic
// kernel, tested above). Subnormal codes exercise the decodes' handling of the smallest magnitudes.
TEST(LinearGemvTest, Fp8EveryCodeAtEveryStepPosition) {
  const int64_t out = 64, in = 256 + 15;
  TestWeight w = MakeTestWeight(WeightFormat::kFP8Block, out, in, 15);
  for (int64_t n = 0; n < out; ++n) {
    for (int64_t k = 0; k < in; ++k) {
      uint8_t code = static_cast<uint8_t>((k + n) % 256);
      if ((code & 0x7F) == 0x7F) code ^= 0x01;
      w.data[static_cast<size_t>(n * in + k)] = code;
    }
  }
  const std::vector<float> x = RandomVector(static_cast<size_t>(8 * in), 16);
  ExpectEveryIsaMatchesScalar(w.view, x, "every code at every position");
  w.view.fp8_nan_free = true;
  ExpectEveryIsaMatchesScalar(w.view, x, "every code at every position, NaN-free");
}

#if defined(__x86_64__)
// The prescaled FP8 decode relies on subnormal FMA inputs being honoured (prescaled x, and weights whose
// product with their scale is subnormal in the generic kernel); with denormals-are-zero set it must not be
// used.
TEST(LinearGemvTest, Fp8ExactUnderDenormalsAreZero) {
  const int64_t out = 20, in = 128;
  TestWeight w = MakeTestWeight(WeightFormat::kFP8Block, out, in, 13);
  for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = static_cast<uint8_t>(i % 8 | (i % 3 == 0 ? 0x80 : 0));
  const std::vector<float> x = RandomVector(static_cast<size_t>(8 * in), 14);
  const unsigned int saved = _mm_getcsr();
  _mm_setcsr(saved | 0x0040u);  // DAZ
  ExpectEveryIsaMatchesScalar(w.view, x, "DAZ");
  std::vector<float> y(static_cast<size_t>(out));
  LinearWithIsa(BestIsa(), x.data(), 1, in, w.view, y.data(), out, {}, nullptr);
  _mm_setcsr(saved);
  int nonzero = 0;
  for (float v : y) nonzero += v != 0.0f;
  EXPECT_GT(nonzero, 0) << "subnormal weights read as zero";
}
#endif

TEST(LinearGemvTest, Mxfp4EveryBatchSizeOrderAndScale) {
  const Shape shapes[] = {{1, 32}, {3, 64}, {17, 96}, {40, 1024}, {129, 160}};
  uint32_t seed = 200;
  for (NibbleOrder order : {NibbleOrder::kLowFirst, NibbleOrder::kHighFirst}) {
    for (const Shape& s : shapes) {
      TestWeight w = MakeTestWeight(WeightFormat::kMXFP4, s.out, s.in, seed++, {ScaleFormat::kUE8M0, 128, 128, order});
      const std::vector<float> x = RandomVector(static_cast<size_t>(8 * s.in), seed++);
      ExpectEveryIsaMatchesScalar(w.view, x, "mxfp4 " + std::to_string(s.out) + "x" + std::to_string(s.in));
      // Extreme scales: subnormal products, overflow to infinity, and the NaN scale.
      const uint8_t extremes[] = {0, 1, 2, 127, 252, 253, 254, 255};
      for (size_t i = 0; i < w.scales.size(); i += 3) w.scales[i] = extremes[(i / 3) % std::size(extremes)];
      ExpectEveryIsaMatchesScalar(w.view, x, "mxfp4 extreme scales");
    }
  }
}

// kBf16Activations on MXFP4 and UE8M0 FP8 weights is the same computation as on BF16 weights holding the
// dequantised values (they are exact in bf16), so the results must agree bit for bit, whichever decode
// (table lookup, or the general decode for extreme scales) produced the bf16 weights.
TEST(LinearGemvTest, Bf16ActivationsQuantizedEqualsBf16OnDequantized) {
  if (!IsaSupported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16 here";
  LinearOptions options;
  options.precision = LinearPrecision::kBf16Activations;
  uint32_t seed = 300;
  for (int variant = 0; variant < 5; ++variant) {
    const int64_t out = 37, in = 320;
    TestWeight w = variant < 4 ? MakeTestWeight(WeightFormat::kMXFP4, out, in, seed++,
                                                {ScaleFormat::kUE8M0, 128, 128,
                                                 variant % 2 ? NibbleOrder::kHighFirst : NibbleOrder::kLowFirst})
                               : MakeTestWeight(WeightFormat::kFP8Block, out, in, seed++);
    if (variant == 2 || variant == 3) {  // scales at and beyond the ends of the table's range
      const uint8_t extremes[] = {1, 2, 3, 250, 252, 253, 127};
      for (size_t i = 0; i < w.scales.size(); ++i) {
        if (i % 2 == 0) w.scales[i] = extremes[(i / 2) % std::size(extremes)];
      }
      for (int64_t n = 0; n < out; ++n) {
        for (int64_t k = 0; k < in; ++k) {
          const uint8_t b = w.data[static_cast<size_t>(n * in / 2 + k / 2)];
          const bool low = (k % 2 == 0) == (w.view.nibble_order == NibbleOrder::kLowFirst);
          w.dequantized[static_cast<size_t>(n * in + k)] =
              static_cast<float>(test_support::ReferenceE2M1(low ? (b & 0xF) : (b >> 4)) *
                                 test_support::ReferenceE8M0(w.scales[static_cast<size_t>(n * in / 32 + k / 32)]));
        }
      }
    }
    std::vector<uint16_t> bf16(w.dequantized.size());
    for (size_t i = 0; i < bf16.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &w.dequantized[i], 4);
      ASSERT_EQ(bits & 0xFFFFu, 0u) << "dequantised value not exact in bf16";
      bf16[i] = static_cast<uint16_t>(bits >> 16);
    }
    WeightView dense{WeightFormat::kBF16, out, in, bf16.data()};
    for (int64_t m : {1, 3, 8}) {
      const std::vector<float> x = RandomVector(static_cast<size_t>(m * in), seed++);
      std::vector<float> quantized(static_cast<size_t>(m * out)), reference(quantized.size());
      LinearWithIsa(Isa::kAvx512Bf16, x.data(), m, in, w.view, quantized.data(), out, options, nullptr);
      LinearWithIsa(Isa::kAvx512Bf16, x.data(), m, in, dense, reference.data(), out, options, nullptr);
      for (size_t i = 0; i < quantized.size(); ++i) {
        ASSERT_TRUE(SameResult(quantized[i], reference[i])) << "variant " << variant << " m=" << m << " at " << i;
      }
    }
  }
}

TEST(LinearGemvTest, Fp8ContainsNanCodesFindsEveryPosition) {
  const int64_t out = 5, in = 37;  // 185 bytes: the eight-byte steps and a tail
  TestWeight w = MakeTestWeight(WeightFormat::kFP8Block, out, in, 15);
  EXPECT_FALSE(Fp8ContainsNanCodes(w.view));
  for (size_t position : {size_t{0}, size_t{7}, size_t{8}, size_t{100}, size_t{183}, size_t{184}}) {
    for (uint8_t code : {uint8_t{0x7F}, uint8_t{0xFF}}) {
      const uint8_t saved = w.data[position];
      w.data[position] = code;
      EXPECT_TRUE(Fp8ContainsNanCodes(w.view)) << "code " << int{code} << " at " << position;
      w.data[position] = saved;
    }
  }
  // Every other byte value is a number.
  for (int v = 0; v < 256; ++v) {
    if ((v & 0x7F) == 0x7F) continue;
    std::fill(w.data.begin(), w.data.end(), static_cast<uint8_t>(v));
    ASSERT_FALSE(Fp8ContainsNanCodes(w.view)) << v;
  }
  const TestWeight mxfp4 = MakeTestWeight(WeightFormat::kMXFP4, 4, 64, 16);
  EXPECT_FALSE(Fp8ContainsNanCodes(mxfp4.view)) << "not an FP8 weight";
}

// A weight marked NaN-free (the kernels then skip watching for NaN codes) gives the same results.
TEST(LinearGemvTest, Fp8MarkedNanFreeMatchesScalar) {
  uint32_t seed = 400;
  for (const Shape& s : kFp8Shapes) {
    TestWeight w = MakeTestWeight(WeightFormat::kFP8Block, s.out, s.in, seed++);
    ASSERT_FALSE(Fp8ContainsNanCodes(w.view));
    w.view.fp8_nan_free = true;
    ExpectEveryIsaMatchesScalar(w.view, RandomVector(static_cast<size_t>(8 * s.in), seed++), "nan-free");
  }
}

}  // namespace
}  // namespace deepinfer::kernels
