// DeepSeek-V4.1's in-model quantizers (kernels/kv_quant.h) against their definitions in transformers'
// deepseek_v41 (`_fake_quant_fp8_block`, `_fake_quant_fp4_block`, `_pow2_ceil_scale`, `_e2m1_codes`),
// written out here independently: scales from frexp in double, values as the nearest grid point found by
// exhaustive search with ties to the even code. Edge values by hand: ties, clamps, tiny and huge amax, NaN
// and infinities.
#include "kernels/kv_quant.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "test_weights.h"

namespace deepinfer::kernels {
namespace {

using test_support::ReferenceE2M1;
using test_support::ReferenceE4M3;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// 2^ceil(log2 t) for t > 0 from frexp (t = f·2^e, f in [0.5, 1): a power of two iff f == 0.5).
double ReferencePow2Ceil(float t) {
  if (std::isnan(t) || std::isinf(t)) return INFINITY;
  int e;
  const double f = std::frexp(static_cast<double>(t), &e);
  return std::ldexp(1.0, f == 0.5 ? e - 1 : e);
}

// Nearest value among the non-negative grid codes [0, count), ties to the even code; beyond the last it
// is the last. Returns the signed grid value.
template <class Decode>
double NearestOnGrid(double x, int count, Decode decode) {
  const double m = std::fabs(x);
  int best = 0;
  for (int c = 1; c < count; ++c) {
    const double dc = std::fabs(decode(c) - m), db = std::fabs(decode(best) - m);
    if (dc < db || (dc == db && c % 2 == 0)) best = c;
  }
  const double v = decode(best);
  return std::signbit(x) ? -v : v;
}

// torch's fp32 → float8_e4m3fn: nearest even among the finite codes and 480 (the NaN code 0x7F's place).
double ReferenceTorchE4M3(float x) {
  if (std::isnan(x) || std::fabs(x) >= 480.0f) return NAN;
  const double r = NearestOnGrid(x, 128, [](int c) { return c == 127 ? 480.0 : ReferenceE4M3(static_cast<uint8_t>(c)); });
  return std::fabs(r) == 480.0 ? NAN : r;
}

// The reference fake quantization of one vector, block by block, in double where that is exact.
std::vector<double> ReferenceFakeQuant(KvQuant q, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size()), block = KvQuantBlock(q);
  std::vector<double> out(x.begin(), x.end());
  if (n % block) return out;
  for (int64_t b = 0; b < n; b += block) {
    float amax = 0;
    bool nan = false;
    for (int64_t i = b; i < b + block; ++i) {
      nan |= std::isnan(x[i]);
      amax = std::max(amax, std::fabs(x[i]));
    }
    if (nan) amax = kNan;
    double scale;
    if (q == KvQuant::kFp8Pow2x32) {
      const float clamped = std::isnan(amax) ? amax : std::max(amax, 1e-4f);
      scale = ReferencePow2Ceil(clamped * static_cast<float>(1.0 / 448.0));
    } else if (q == KvQuant::kFp4Pow2x32) {
      const float clamped = std::isnan(amax) ? amax : std::max(amax, 6.0f * std::ldexp(1.0f, -126));
      scale = ReferencePow2Ceil(clamped * static_cast<float>(1.0 / 6.0));
    } else {
      const float clamped = std::isnan(amax) ? amax : std::max(amax, 6.0f * std::ldexp(1.0f, -9));
      scale = ReferenceTorchE4M3(clamped / 6.0f);
    }
    const double limit = q == KvQuant::kFp8Pow2x32 ? 448.0 : 6.0;
    for (int64_t i = b; i < b + block; ++i) {
      float v = static_cast<float>(x[i] / scale);  // the reference divides in fp32
      if (!std::isnan(v)) v = std::clamp(v, static_cast<float>(-limit), static_cast<float>(limit));
      double grid;
      if (std::isnan(v)) grid = q == KvQuant::kFp8Pow2x32 ? NAN : (std::signbit(v) ? -0.0 : 0.0);
      else if (q == KvQuant::kFp8Pow2x32) grid = NearestOnGrid(v, 127, [](int c) { return ReferenceE4M3(static_cast<uint8_t>(c)); });
      else grid = NearestOnGrid(v, 8, [](int c) { return ReferenceE2M1(static_cast<uint8_t>(c)); });
      out[i] = grid * scale;
    }
  }
  return out;
}

// Bit-exact comparison (signed zeros included); any NaN matches any NaN.
void ExpectSame(const std::vector<double>& expected, const std::vector<float>& actual, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(actual[i])) << what << " [" << i << "] = " << actual[i];
      continue;
    }
    EXPECT_EQ(static_cast<float>(expected[i]), actual[i]) << what << " [" << i << "]";
    EXPECT_EQ(std::signbit(expected[i]), std::signbit(actual[i])) << what << " [" << i << "]";
    EXPECT_EQ(static_cast<double>(static_cast<float>(expected[i])), expected[i]) << what << ": not exact in fp32";
  }
}

// Quantizes into storage, dequantizes, and checks the storage size and the fake quantization too.
std::vector<float> RoundTrip(KvQuant q, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> stored(static_cast<size_t>(KvQuantBytes(q, n)), 0xCD);
  KvQuantize(q, x.data(), n, stored.data());
  std::vector<float> out(x.size());
  KvDequantize(q, stored.data(), n, out.data());
  std::vector<float> fake(x.size());
  KvFakeQuantize(q, x.data(), n, fake.data());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(fake[i]) == std::bit_cast<uint32_t>(out[i]) ||
                  (std::isnan(fake[i]) && std::isnan(out[i])),
              true)
        << "fake vs stored at " << i;
  }
  return out;
}

constexpr KvQuant kAll[] = {KvQuant::kFp8Pow2x32, KvQuant::kFp4E4m3x16, KvQuant::kFp4Pow2x32};

TEST(KvQuantTest, StorageSizes) {
  EXPECT_EQ(KvQuantBytes(KvQuant::kFp8Pow2x32, 512), 512 + 16);
  EXPECT_EQ(KvQuantBytes(KvQuant::kFp4E4m3x16, 512), 256 + 32);
  EXPECT_EQ(KvQuantBytes(KvQuant::kFp4Pow2x32, 128), 64 + 4);
  // Not a multiple of the block: stored unquantized, as the reference leaves it.
  EXPECT_EQ(KvQuantBytes(KvQuant::kFp8Pow2x32, 48), 48 * 4);
  EXPECT_EQ(KvQuantBytes(KvQuant::kFp4E4m3x16, 40), 40 * 4);
  EXPECT_EQ(EffectiveKvQuant(KvQuant::kFp4Pow2x32, 16), KvQuant::kNone);
  EXPECT_EQ(EffectiveKvQuant(KvQuant::kFp4E4m3x16, 16), KvQuant::kFp4E4m3x16);
}

TEST(KvQuantTest, RandomVectorsMatchTheDefinitions) {
  std::mt19937 rng(7);
  for (KvQuant q : kAll) {
    for (int trial = 0; trial < 300; ++trial) {
      // Magnitudes over many octaves, so that scales span their range.
      const float octave = std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30);
      std::normal_distribution<float> normal(0.0f, octave);
      std::vector<float> x(64);
      for (float& v : x) v = normal(rng);
      ExpectSame(ReferenceFakeQuant(q, x), RoundTrip(q, x), KvQuantName(q));
    }
  }
}

TEST(KvQuantTest, E2M1TiesGoToTheEvenCode) {
  // amax 6 makes the power-of-two scale exactly 1 (6 · fl(1/6) rounds to 1): values are the grid inputs.
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -0.25f, -0.75f, -5.0f};
  const float expected[] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f, -0.0f, -1.0f, -4.0f};
  for (size_t i = 0; i < std::size(ties); ++i) x[1 + i] = ties[i];
  // Just off the ties they go to the nearer value.
  x[20] = std::nextafter(0.25f, 1.0f);
  x[21] = std::nextafter(0.75f, 0.0f);
  x[22] = std::nextafter(5.0f, 6.0f);
  std::vector<float> out = RoundTrip(KvQuant::kFp4Pow2x32, x);
  EXPECT_EQ(out[0], 6.0f);
  for (size_t i = 0; i < std::size(ties); ++i) {
    EXPECT_EQ(out[1 + i], expected[i]) << ties[i];
    EXPECT_EQ(std::signbit(out[1 + i]), std::signbit(expected[i])) << ties[i];
  }
  EXPECT_EQ(out[20], 0.5f);
  EXPECT_EQ(out[21], 0.5f);
  EXPECT_EQ(out[22], 6.0f);
  ExpectSame(ReferenceFakeQuant(KvQuant::kFp4Pow2x32, x), out, "ties");
}

TEST(KvQuantTest, Fp8TiesAndSubnormals) {
  // amax 448 → scale 2^ceil(log2(448 · fl(1/448))) = 1: values round on the E4M3 grid itself.
  std::vector<float> x(32, 0.0f);
  x[0] = 448.0f;
  x[1] = 1.0625f;                    // between 1 and 1.125: tie → 1 (even mantissa 000)
  x[2] = 1.1875f;                    // between 1.125 and 1.25: tie → 1.25 (even mantissa 010)
  x[3] = std::ldexp(1.5f, -9);       // subnormal tie between 2^-9 and 2·2^-9 → 2·2^-9 (even code 2)
  x[4] = std::ldexp(0.5f, -9);       // tie between 0 and 2^-9 → 0
  x[5] = -std::ldexp(2.5f, -9);      // → -2·2^-9
  x[6] = 432.0f;                     // between 416 and 448: tie → 448 (even mantissa 110)
  std::vector<float> out = RoundTrip(KvQuant::kFp8Pow2x32, x);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], 1.25f);
  EXPECT_EQ(out[3], std::ldexp(2.0f, -9));
  EXPECT_EQ(out[4], 0.0f);
  EXPECT_EQ(out[5], -std::ldexp(2.0f, -9));
  EXPECT_EQ(out[6], 448.0f);
  ExpectSame(ReferenceFakeQuant(KvQuant::kFp8Pow2x32, x), out, "fp8 ties");
}

TEST(KvQuantTest, E4m3ScaleRoundingDownMakesTheClampBind) {
  // amax 6.3: 6.3/6 = 1.05 rounds to the E4M3 scale 1, so 6.3 / 1 is clamped to 6.
  std::vector<float> x(16, 0.0f);
  x[0] = 6.3f;
  x[1] = -6.25f;
  x[2] = 2.9f;  // → 3
  std::vector<float> out = RoundTrip(KvQuant::kFp4E4m3x16, x);
  EXPECT_EQ(out[0], 6.0f);
  EXPECT_EQ(out[1], -6.0f);
  EXPECT_EQ(out[2], 3.0f);
  ExpectSame(ReferenceFakeQuant(KvQuant::kFp4E4m3x16, x), out, "clamp");
}

TEST(KvQuantTest, Fp8ScaleStepsAtPowersOfTwoOf448) {
  // fl(1/448) lies just above 1/448, so amax · fl(1/448) never rounds below amax/448 and the ±448 clamp
  // cannot bind: amax = 448·2^e keeps the scale 2^e and is exact; the next float up doubles the scale and
  // lands on 224 (the grid step there is 16), i.e. the same value.
  for (int e = -8; e <= 8; ++e) {
    std::vector<float> x(32, 0.0f);
    x[0] = std::ldexp(448.0f, e);
    x[1] = -std::nextafter(std::ldexp(448.0f, e), 0.0f);
    std::vector<float> out = RoundTrip(KvQuant::kFp8Pow2x32, x);
    EXPECT_EQ(out[0], x[0]);
    EXPECT_EQ(out[1], -x[0]);  // 447.99997·2^e rounds to 448·2^e
    x[0] = std::nextafter(std::ldexp(448.0f, e), INFINITY);
    out = RoundTrip(KvQuant::kFp8Pow2x32, x);
    EXPECT_EQ(out[0], std::ldexp(448.0f, e));
    ExpectSame(ReferenceFakeQuant(KvQuant::kFp8Pow2x32, x), out, "fp8 scale step");
  }
}

TEST(KvQuantTest, TinyAmax) {
  for (KvQuant q : kAll) {
    std::vector<float> zeros(32, 0.0f);
    zeros[3] = -0.0f;
    std::vector<float> out = RoundTrip(q, zeros);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], 0.0f) << KvQuantName(q);
    EXPECT_TRUE(std::signbit(out[3])) << KvQuantName(q);
    // Subnormal inputs below the clamped amax.
    std::vector<float> tiny(32);
    for (size_t i = 0; i < tiny.size(); ++i) tiny[i] = std::ldexp(static_cast<float>(i) - 16.0f, -140);
    ExpectSame(ReferenceFakeQuant(q, tiny), RoundTrip(q, tiny), std::string("tiny ") + KvQuantName(q));
    std::vector<float> small(32);
    for (size_t i = 0; i < small.size(); ++i) small[i] = std::ldexp(static_cast<float>(i) - 16.0f, -20);
    ExpectSame(ReferenceFakeQuant(q, small), RoundTrip(q, small), std::string("small ") + KvQuantName(q));
  }
  // The FP4 E4M3 scale bottoms at its smallest subnormal 2^-9 (amax clamped to 6 · 2^-9).
  std::vector<float> x(16, 0.0f);
  x[0] = std::ldexp(1.0f, -9);  // / 2^-9 = 1
  EXPECT_EQ(RoundTrip(KvQuant::kFp4E4m3x16, x)[0], std::ldexp(1.0f, -9));
}

TEST(KvQuantTest, HugeAmax) {
  // E4M3 scale: 2784 / 6 = 464 is the tie between 448 and 480 and goes to 448; above it the scale is NaN
  // (torch's cast gives NaN from 464 exclusive), and so is the whole block.
  std::vector<float> x(16, 1.0f);
  x[0] = 2784.0f;
  std::vector<float> out = RoundTrip(KvQuant::kFp4E4m3x16, x);
  EXPECT_EQ(out[0], 6.0f * 448.0f);
  EXPECT_EQ(out[1], 0.0f);  // 1 / 448 rounds to 0 on the E2M1 grid
  x[0] = 2800.0f;
  out = RoundTrip(KvQuant::kFp4E4m3x16, x);
  for (float v : out) EXPECT_TRUE(std::isnan(v));
  ExpectSame(ReferenceFakeQuant(KvQuant::kFp4E4m3x16, x), out, "huge e4m3");
  // Power-of-two scales go as high as fp32 allows.
  for (KvQuant q : {KvQuant::kFp8Pow2x32, KvQuant::kFp4Pow2x32}) {
    std::vector<float> big(32, 1.0f);
    big[5] = 2.0e38f;
    big[6] = -1.0e38f;
    std::vector<float> r = RoundTrip(q, big);
    EXPECT_TRUE(std::isfinite(r[5]) && r[5] > 1e38f) << KvQuantName(q);
    ExpectSame(ReferenceFakeQuant(q, big), r, std::string("huge ") + KvQuantName(q));
  }
}

TEST(KvQuantTest, NanAndInfinityPoisonTheirBlockOnly) {
  for (KvQuant q : kAll) {
    for (float bad : {kNan, -kNan, kInf, -kInf}) {
      std::vector<float> x(64);
      for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i) - 3.0f;
      const int64_t block = KvQuantBlock(q);
      x[block + 1] = bad;  // the second block
      std::vector<float> out = RoundTrip(q, x);
      for (int64_t i = 0; i < 64; ++i) {
        const bool in_bad_block = i >= block && i < 2 * block;
        EXPECT_EQ(std::isnan(out[i]), in_bad_block) << KvQuantName(q) << " " << bad << " at " << i;
      }
      ExpectSame(ReferenceFakeQuant(q, x), out, KvQuantName(q));
    }
  }
}

TEST(KvQuantTest, UnblockableLengthsPassThrough) {
  std::vector<float> x = {1.1f, -2.2f, 3.3f, kNan, 1e-30f, -0.0f};
  for (KvQuant q : kAll) {
    std::vector<float> out = RoundTrip(q, x);
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(x[i])) << KvQuantName(q);
  }
}

TEST(KvQuantTest, PieceDefinitions) {
  using namespace kv_quant_internal;
  EXPECT_EQ(PowerOfTwoCeilExponent(1.0f), 0);
  EXPECT_EQ(PowerOfTwoCeilExponent(std::nextafter(1.0f, 2.0f)), 1);
  EXPECT_EQ(PowerOfTwoCeilExponent(0.75f), 0);
  EXPECT_EQ(PowerOfTwoCeilExponent(std::ldexp(1.0f, -126)), -126);
  EXPECT_EQ(PowerOfTwoCeilExponent(kInf), 128);
  EXPECT_EQ(PowerOfTwoCeilExponent(kNan), 129);
  // Every fp32 bit pattern of a few octaves around the E4M3 range: the cast is the definition's.
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(static_cast<float>(rng()) / 4294967296.0f, static_cast<int>(rng() % 24) - 14) *
                    ((rng() & 1) ? -1.0f : 1.0f);
    const double want = ReferenceTorchE4M3(x);
    const float got = ReferenceE4M3(TorchFloatToE4M3(x));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << x;
    else EXPECT_EQ(got, want) << x;
  }
  EXPECT_EQ(TorchFloatToE4M3(464.0f), 0x7E);
  EXPECT_EQ(TorchFloatToE4M3(std::nextafter(464.0f, 500.0f)), 0x7F);
  EXPECT_EQ(TorchFloatToE4M3(-1e9f), 0xFF);
  for (int c = 0; c < 16; ++c) {
    const float v = static_cast<float>(ReferenceE2M1(static_cast<uint8_t>(c)));
    EXPECT_EQ(E2M1Code(v), c) << v;  // every grid value is its own code (−0 keeps its sign)
  }
  EXPECT_EQ(E2M1Code(kNan), 0);
}

}  // namespace
}  // namespace deepinfer::kernels
