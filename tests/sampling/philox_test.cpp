#include "sampling/philox.h"

#include <set>

#include <gtest/gtest.h>

namespace deepinfer::sampling {
namespace {

// Known-answer vectors of Random123's tests/kat_vectors ("philox4x32 10" lines: counter, key, result).
TEST(Philox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(Philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(Philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(Philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, DrawsArePureFunctionsOfTheirKey) {
  DrawKey key{.seed = 42, .stream = 3, .sequence = 1, .position = 1000};
  const double a = UniformDraw(key);
  for (int64_t p = 0; p < 100; ++p) (void)UniformDraw({.seed = 7, .position = p});
  EXPECT_EQ(UniformDraw(key), a);
}

TEST(Philox, EveryKeyFieldChangesTheDraw) {
  const DrawKey base{.seed = 1, .stream = 2, .sequence = 3, .position = 4};
  std::set<double> seen{UniformDraw(base)};
  DrawKey k = base;
  k.seed = 1ull << 40;  // the seed's high word matters too
  seen.insert(UniformDraw(k));
  k = base;
  k.stream = 9;
  seen.insert(UniformDraw(k));
  k = base;
  k.sequence = 0;
  seen.insert(UniformDraw(k));
  k = base;
  k.position = int64_t{1} << 33;
  seen.insert(UniformDraw(k));
  EXPECT_EQ(seen.size(), 5u);
}

TEST(Philox, UniformDrawsFillTheUnitIntervalEvenly) {
  // 100,000 draws over consecutive positions into 10 bins: chi-square with 9 degrees of freedom stays far
  // below 27.9 (the 0.1% tail) for a uniform generator; a bias of 1% per bin would give ~100.
  constexpr int kDraws = 100000;
  int bins[10] = {};
  for (int i = 0; i < kDraws; ++i) {
    const double u = UniformDraw({.seed = 12345, .position = i});
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++bins[static_cast<int>(u * 10)];
  }
  double chi2 = 0;
  for (int b : bins) chi2 += (b - kDraws / 10.0) * (b - kDraws / 10.0) / (kDraws / 10.0);
  EXPECT_LT(chi2, 27.9);
}

}  // namespace
}  // namespace deepinfer::sampling
