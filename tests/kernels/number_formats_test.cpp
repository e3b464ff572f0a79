// The narrow-format decoders against values derived from each format's definition (test_weights.h, with
// ldexp), and the encoders as exact inverses with round-to-nearest-even between neighbours.
#include "kernels/number_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "test_weights.h"

namespace deepinfer::kernels {
namespace {

using test_support::ReferenceE2M1;
using test_support::ReferenceE4M3;
using test_support::ReferenceE5M2;
using test_support::ReferenceE8M0;

void ExpectSameValue(double expected, float actual, int code) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(actual)) << "code " << code;
  } else {
    EXPECT_EQ(static_cast<double>(actual), expected) << "code " << code;
    EXPECT_EQ(std::signbit(actual), std::signbit(expected)) << "code " << code;
  }
}

TEST(NumberFormatsTest, DecodersMatchTheFormatDefinitions) {
  for (int c = 0; c < 256; ++c) {
    ExpectSameValue(ReferenceE4M3(static_cast<uint8_t>(c)), Fp8E4M3ToFloat(static_cast<uint8_t>(c)), c);
    ExpectSameValue(ReferenceE5M2(static_cast<uint8_t>(c)), Fp8E5M2ToFloat(static_cast<uint8_t>(c)), c);
    ExpectSameValue(ReferenceE8M0(static_cast<uint8_t>(c)), E8M0ToFloat(static_cast<uint8_t>(c)), c);
  }
  for (int c = 0; c < 16; ++c)
    ExpectSameValue(ReferenceE2M1(static_cast<uint8_t>(c)), E2M1ToFloat(static_cast<uint8_t>(c)), c);
  // Landmarks stated by the OCP specification.
  EXPECT_EQ(Fp8E4M3ToFloat(0x7E), 448.0f);
  EXPECT_EQ(Fp8E4M3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(Fp8E5M2ToFloat(0x7B), 57344.0f);
  EXPECT_TRUE(std::isinf(Fp8E5M2ToFloat(0x7C)));
  EXPECT_EQ(E8M0ToFloat(127), 1.0f);
}

TEST(NumberFormatsTest, Bf16RoundsToNearestEven) {
  std::mt19937 rng(1);
  for (int i = 0; i < 100000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f))));
      continue;
    }
    const float r = Bf16ToFloat(FloatToBf16(f));
    if (std::isinf(r) && !std::isinf(f)) {
      // Overflow is right only from halfway between the largest bf16 (0x7F7F) and the next step up.
      const uint32_t halfway_bits = 0x7F7F8000u;
      float halfway;
      std::memcpy(&halfway, &halfway_bits, 4);
      ASSERT_GE(std::fabs(f), halfway) << std::hexfloat << f;
      continue;
    }
    // r is a bf16 value, and no bf16 value is nearer to f; on a tie the even one wins.
    const uint16_t code = FloatToBf16(f);
    const double err = std::fabs(static_cast<double>(r) - f);
    for (int delta : {-1, 1}) {
      const float neighbour = Bf16ToFloat(static_cast<uint16_t>(code + delta));
      if (std::isnan(neighbour) || std::isinf(neighbour)) continue;
      if (std::signbit(neighbour) != std::signbit(r) && r != 0) continue;
      const double other = std::fabs(static_cast<double>(neighbour) - f);
      ASSERT_LE(err, other) << std::hexfloat << f;
      if (err == other) {
        ASSERT_EQ(code % 2, 0) << std::hexfloat << f;
      }
    }
  }
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_TRUE(std::isinf(Bf16ToFloat(FloatToBf16(INFINITY))));
}

TEST(NumberFormatsTest, EncodersInvertDecodersAndRoundToNearest) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(FloatToFp8E4M3(Fp8E4M3ToFloat(static_cast<uint8_t>(c))), c);
  }
  for (int c = 0; c < 16; ++c) EXPECT_EQ(FloatToE2M1(E2M1ToFloat(static_cast<uint8_t>(c))), c);
  // Between neighbours: nearest wins, ties go to the even code (derived from the grids by hand).
  EXPECT_EQ(E2M1ToFloat(FloatToE2M1(2.5f)), 2.0f);  // tie 2|3 -> code 4 (even)
  EXPECT_EQ(E2M1ToFloat(FloatToE2M1(3.5f)), 4.0f);  // tie 3|4 -> code 6 (even)
  EXPECT_EQ(E2M1ToFloat(FloatToE2M1(5.1f)), 6.0f);
  EXPECT_EQ(E2M1ToFloat(FloatToE2M1(100.0f)), 6.0f);  // saturates
  EXPECT_EQ(Fp8E4M3ToFloat(FloatToFp8E4M3(1e6f)), 448.0f);
  EXPECT_EQ(Fp8E4M3ToFloat(FloatToFp8E4M3(-1.0625f)), -1.0f);  // tie 1|1.125 -> even mantissa 0
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 50.0f);
  for (int i = 0; i < 20000; ++i) {
    const float f = normal(rng);
    const float r = Fp8E4M3ToFloat(FloatToFp8E4M3(f));
    for (int c = 0; c < 256; ++c) {
      const float other = Fp8E4M3ToFloat(static_cast<uint8_t>(c));
      if (std::isnan(other) || std::fabs(f) > 448.0f) continue;
      ASSERT_LE(std::fabs(r - f), std::fabs(other - f)) << f;
    }
  }
  EXPECT_EQ(E8M0ToFloat(FloatToE8M0Ceil(3.0f)), 4.0f);
  EXPECT_EQ(E8M0ToFloat(FloatToE8M0Ceil(4.0f)), 4.0f);
  EXPECT_EQ(E8M0ToFloat(FloatToE8M0Ceil(0.3f)), 0.5f);
}

}  // namespace
}  // namespace deepinfer::kernels
