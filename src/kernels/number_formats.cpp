#include "kernels/number_formats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace deepinfer::kernels {
namespace {

constexpr float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }

constexpr float kQuietNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInfinity = std::numeric_limits<float>::infinity();

// Value of a minifloat with `man_bits` mantissa bits and the given exponent bias; the callers handle
// the special encodings.
constexpr float MinifloatValue(uint32_t sign, uint32_t exponent, uint32_t mantissa, int man_bits, int bias) {
  float magnitude;
  if (exponent == 0) {
    // Subnormal: mantissa · 2^(1 - bias - man_bits); every step is exact in fp32 for these formats.
    magnitude = static_cast<float>(mantissa);
    for (int i = 0; i < bias - 1 + man_bits; ++i) magnitude *= 0.5f;
  } else {
    magnitude = FromBits(((exponent - bias + 127) << 23) | (mantissa << (23 - man_bits)));
  }
  return sign ? -magnitude : magnitude;
}

constexpr std::array<float, 256> MakeE4M3() {
  std::array<float, 256> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    const uint32_t e = (b >> 3) & 0xF, m = b & 0x7;
    t[b] = (e == 15 && m == 7) ? kQuietNan : MinifloatValue(b >> 7, e, m, 3, 7);
  }
  return t;
}

constexpr std::array<float, 256> MakeE5M2() {
  std::array<float, 256> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    const uint32_t e = (b >> 2) & 0x1F, m = b & 0x3;
    if (e == 31) {
      t[b] = m != 0 ? kQuietNan : ((b >> 7) ? -kInfinity : kInfinity);
    } else {
      t[b] = MinifloatValue(b >> 7, e, m, 2, 15);
    }
  }
  return t;
}

constexpr std::array<float, 256> MakeE8M0() {
  std::array<float, 256> t{};
  t[0] = FromBits(0x00400000u);  // 2^-127 is a subnormal
  for (uint32_t e = 1; e < 255; ++e) t[e] = FromBits(e << 23);
  t[255] = kQuietNan;
  return t;
}

// The code of the value nearest to `magnitude` among the ascending non-negative `grid` (a minifloat's
// positive codes in order), ties to the even code; beyond the last value it saturates.
uint8_t NearestCode(float magnitude, const float* grid, int size) {
  if (!(magnitude < grid[size - 1])) return static_cast<uint8_t>(size - 1);
  const int hi = static_cast<int>(std::upper_bound(grid, grid + size, magnitude) - grid);  // grid[hi] > mag
  const int lo = hi - 1;
  const float below = magnitude - grid[lo], above = grid[hi] - magnitude;
  if (below < above) return static_cast<uint8_t>(lo);
  if (above < below) return static_cast<uint8_t>(hi);
  return static_cast<uint8_t>(lo % 2 == 0 ? lo : hi);
}

}  // namespace

namespace number_tables {
extern const std::array<float, 256> kFp8E4M3 = MakeE4M3();
extern const std::array<float, 256> kFp8E5M2 = MakeE5M2();
extern const std::array<float, 16> kE2M1 = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
extern const std::array<float, 256> kE8M0 = MakeE8M0();
}  // namespace number_tables

uint16_t FloatToBf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040);
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

void Bf16ToFloat(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}

void FloatToBf16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBf16(in[i]);
}

uint8_t FloatToFp8E4M3(float value) {
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  if (std::isnan(value)) return sign | 0x7F;
  static const std::array<float, 127> grid = [] {
    std::array<float, 127> g{};
    for (int c = 0; c < 127; ++c) g[c] = number_tables::kFp8E4M3[c];
    return g;
  }();
  return sign | NearestCode(std::fabs(value), grid.data(), 127);
}

uint8_t FloatToE2M1(float value) {
  if (std::isnan(value)) return 0;
  const uint8_t sign = std::signbit(value) ? 0x8 : 0x0;
  return sign | NearestCode(std::fabs(value), number_tables::kE2M1.data(), 8);
}

uint8_t FloatToE8M0Ceil(float value) {
  const float magnitude = std::fabs(value);
  if (!(magnitude > number_tables::kE8M0[0])) return 0;
  for (int e = 0; e < 255; ++e) {
    if (number_tables::kE8M0[e] >= magnitude) return static_cast<uint8_t>(e);
  }
  return 254;
}

}  // namespace deepinfer::kernels
