// Test helpers: random weight matrices in every stored format, with their dequantised values computed
// independently of the library (from the format definitions, with ldexp), and a double-precision
// reference product.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/linear.h"

namespace deepinfer::kernels::test_support {

// Value of an E4M3 byte from its definition: bias 7, subnormals at exponent 0, S.1111.111 is NaN.
inline double ReferenceE4M3(uint8_t b) {
  const int sign = b >> 7, e = (b >> 3) & 0xF, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  const double magnitude = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return sign ? -magnitude : magnitude;
}

inline double ReferenceE5M2(uint8_t b) {
  const int sign = b >> 7, e = (b >> 2) & 0x1F, m = b & 3;
  double magnitude;
  if (e == 31)
    magnitude = m == 0 ? INFINITY : NAN;
  else if (e == 0)
    magnitude = std::ldexp(m / 4.0, -14);
  else
    magnitude = std::ldexp(1.0 + m / 4.0, e - 15);
  return sign ? -magnitude : magnitude;
}

// E2M1: bias 1, one mantissa bit; exponent 0 is subnormal (0 or 0.5).
inline double ReferenceE2M1(uint8_t nibble) {
  const int sign = (nibble >> 3) & 1, e = (nibble >> 1) & 3, m = nibble & 1;
  const double magnitude = e == 0 ? m * 0.5 : std::ldexp(1.0 + m / 2.0, e - 1);
  return sign ? -magnitude : magnitude;
}

inline double ReferenceE8M0(uint8_t e) { return e == 255 ? NAN : std::ldexp(1.0, e - 127); }

inline float ReferenceBf16(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

inline std::string FormatName(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
      return "F32";
    case WeightFormat::kBF16:
      return "BF16";
    case WeightFormat::kFP8Block:
      return "FP8";
    case WeightFormat::kMXFP4:
      return "MXFP4";
  }
  return "?";
}

// A weight matrix that owns its storage, plus its exact dequantised values.
struct TestWeight {
  std::vector<uint8_t> data;
  std::vector<uint8_t> scales;
  WeightView view;
  std::vector<float> dequantized;  // [out, in]: decode(q) · scale rounded to fp32, as the kernels define it

  float At(int64_t n, int64_t k) const { return dequantized[static_cast<size_t>(n * view.in_features + k)]; }
};

struct WeightOptions {
  ScaleFormat scale_format = ScaleFormat::kUE8M0;
  int64_t block_out = 128, block_in = 128;
  NibbleOrder nibble_order = NibbleOrder::kLowFirst;
};

inline TestWeight MakeTestWeight(WeightFormat format, int64_t out, int64_t in, uint32_t seed,
                                 const WeightOptions& options = {}) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  TestWeight t;
  t.view.format = format;
  t.view.out_features = out;
  t.view.in_features = in;
  t.dequantized.resize(static_cast<size_t>(out * in));
  switch (format) {
    case WeightFormat::kF32: {
      t.data.resize(static_cast<size_t>(out * in * 4));
      std::vector<float> values(static_cast<size_t>(out * in));
      for (float& v : values) v = normal(rng);
      std::memcpy(t.data.data(), values.data(), t.data.size());
      t.dequantized = values;
      break;
    }
    case WeightFormat::kBF16: {
      t.data.resize(static_cast<size_t>(out * in * 2));
      for (int64_t i = 0; i < out * in; ++i) {
        const float v = normal(rng);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const uint16_t b = static_cast<uint16_t>(bits >> 16);  // truncation: any bf16 value will do
        std::memcpy(t.data.data() + i * 2, &b, 2);
        t.dequantized[static_cast<size_t>(i)] = ReferenceBf16(b);
      }
      break;
    }
    case WeightFormat::kFP8Block: {
      t.view.block_out = options.block_out;
      t.view.block_in = options.block_in;
      t.view.scale_format = options.scale_format;
      const int64_t rows = (out + options.block_out - 1) / options.block_out;
      const int64_t cols = (in + options.block_in - 1) / options.block_in;
      std::vector<double> scale_values(static_cast<size_t>(rows * cols));
      if (options.scale_format == ScaleFormat::kF32) {
        std::uniform_real_distribution<float> uniform(0.001f, 0.1f);
        t.scales.resize(scale_values.size() * 4);
        for (size_t s = 0; s < scale_values.size(); ++s) {
          const float v = uniform(rng);
          std::memcpy(t.scales.data() + s * 4, &v, 4);
          scale_values[s] = v;
        }
      } else {
        std::uniform_int_distribution<int> exponent(117, 130);
        t.scales.resize(scale_values.size());
        for (size_t s = 0; s < scale_values.size(); ++s) {
          t.scales[s] = static_cast<uint8_t>(exponent(rng));
          scale_values[s] = ReferenceE8M0(t.scales[s]);
        }
      }
      t.data.resize(static_cast<size_t>(out * in));
      std::uniform_int_distribution<int> byte(0, 255);
      for (int64_t n = 0; n < out; ++n) {
        for (int64_t k = 0; k < in; ++k) {
          uint8_t b;
          do b = static_cast<uint8_t>(byte(rng));
          while ((b & 0x7F) == 0x7F);  // no NaN weights
          t.data[static_cast<size_t>(n * in + k)] = b;
          const double scale = scale_values[static_cast<size_t>((n / options.block_out) * cols + k / options.block_in)];
          t.dequantized[static_cast<size_t>(n * in + k)] =
              static_cast<float>(static_cast<float>(ReferenceE4M3(b)) * static_cast<float>(scale));
        }
      }
      break;
    }
    case WeightFormat::kMXFP4: {
      t.view.nibble_order = options.nibble_order;
      t.data.resize(static_cast<size_t>(out * in / 2));
      t.scales.resize(static_cast<size_t>(out * in / 32));
      std::uniform_int_distribution<int> byte(0, 255);
      std::uniform_int_distribution<int> exponent(120, 132);
      for (uint8_t& b : t.data) b = static_cast<uint8_t>(byte(rng));
      for (uint8_t& s : t.scales) s = static_cast<uint8_t>(exponent(rng));
      const bool low_first = options.nibble_order == NibbleOrder::kLowFirst;
      for (int64_t n = 0; n < out; ++n) {
        for (int64_t k = 0; k < in; ++k) {
          const uint8_t b = t.data[static_cast<size_t>(n * in / 2 + k / 2)];
          const uint8_t nibble = ((k % 2 == 0) == low_first) ? (b & 0xF) : (b >> 4);
          const double scale = ReferenceE8M0(t.scales[static_cast<size_t>(n * in / 32 + k / 32)]);
          t.dequantized[static_cast<size_t>(n * in + k)] = static_cast<float>(ReferenceE2M1(nibble) * scale);
        }
      }
      break;
    }
  }
  t.view.data = t.data.data();
  t.view.scales = t.scales.empty() ? nullptr : t.scales.data();
  return t;
}

inline std::vector<float> RandomVector(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(n);
  for (float& f : v) f = normal(rng);
  return v;
}

}  // namespace deepinfer::kernels::test_support
