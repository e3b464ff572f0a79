#include "kernels/kv_quant.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/number_formats.h"

namespace deepinfer::kernels {
namespace kv_quant_internal {

int PowerOfTwoCeilExponent(float t) {
  const uint32_t bits = std::bit_cast<uint32_t>(t);
  const int exponent = static_cast<int>((bits >> 23) & 0xFF);
  const int mantissa_nonzero = (bits & 0x7FFFFF) != 0 ? 1 : 0;
  return exponent - 127 + mantissa_nonzero;
}

uint8_t TorchFloatToE4M3(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint8_t code;
  constexpr uint32_t k480 = 1087u << 20;  // the first magnitude that is NaN whatever the rounding
  if (bits >= k480) {
    code = 0x7F;  // NaN, infinity and overflow
  } else if (bits < (121u << 23)) {
    // Below the smallest normal (2^-6): adding 2^14 leaves the value's multiple of 2^-9 (the subnormal step)
    // rounded to nearest even in the low mantissa bits.
    constexpr uint32_t k2pow14 = 141u << 23;
    const float sum = std::bit_cast<float>(bits) + std::bit_cast<float>(k2pow14);
    code = static_cast<uint8_t>(std::bit_cast<uint32_t>(sum) - k2pow14);
  } else {
    // Round the mantissa to 3 bits, nearest even, and rebias the exponent (7 − 127); a carry moves into the
    // exponent, and 464 < x < 480 rounds to the NaN code 0x7F as torch's does.
    const uint32_t odd = (bits >> 20) & 1;
    bits += (static_cast<uint32_t>(7 - 127) << 23) + 0x7FFFF + odd;
    code = static_cast<uint8_t>(bits >> 20);
  }
  return static_cast<uint8_t>(code | (sign >> 24));
}

uint8_t E2M1Code(float q) {
  // Grid 0, 0.5, 1, 1.5, 2, 3, 4, 6. Midpoints below an even code (0.25, 1.25, 2.5, 5) round down, so the
  // value must exceed them; midpoints below an odd code (0.75, 1.75, 3.5) round up.
  const float m = std::fabs(q);
  uint8_t code = 0;
  code += m > 0.25f;
  code += m >= 0.75f;
  code += m > 1.25f;
  code += m >= 1.75f;
  code += m > 2.5f;
  code += m >= 3.5f;
  code += m > 5.0f;
  return static_cast<uint8_t>(code | (std::signbit(q) ? 0x8 : 0x0));
}

}  // namespace kv_quant_internal

namespace {

using kv_quant_internal::E2M1Code;
using kv_quant_internal::PowerOfTwoCeilExponent;
using kv_quant_internal::TorchFloatToE4M3;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// The reference multiplies by these reciprocals (Python doubles cast to fp32 by torch's scalar multiply).
const float kInv448 = static_cast<float>(1.0 / 448.0);
const float kInv6 = static_cast<float>(1.0 / 6.0);

// max |x| over a block; NaN if any element is NaN (torch's amax propagates NaN).
float BlockAmax(const float* x, int64_t n) {
  float amax = 0.0f;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    nan |= std::isnan(a);
    amax = std::max(amax, a);
  }
  return nan ? kNan : amax;
}

// torch.clamp_min: NaN stays NaN.
float ClampMin(float x, float lo) { return std::isnan(x) ? x : std::max(x, lo); }

// The power-of-two scale byte: E8M0 exponent k + 127 (k ≥ 128, an infinite reference scale, is stored as
// the NaN code: its block dequantizes to NaN either way).
uint8_t Pow2ScaleByte(int k) { return k >= 128 ? uint8_t{255} : static_cast<uint8_t>(std::max(k + 127, 0)); }

float Pow2Scale(int k) { return k >= 128 ? std::numeric_limits<float>::infinity() : std::ldexp(1.0f, k); }

void QuantizeFp8Pow2(const float* x, int64_t n, uint8_t* codes, uint8_t* scales) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    const float amax = ClampMin(BlockAmax(xb, 32), 1e-4f);
    const int k = PowerOfTwoCeilExponent(amax * kInv448);
    const float scale = Pow2Scale(k);
    scales[b] = Pow2ScaleByte(k);
    for (int i = 0; i < 32; ++i) {
      float q = xb[i] / scale;
      if (!std::isnan(q)) q = std::clamp(q, -448.0f, 448.0f);
      codes[b * 32 + i] = TorchFloatToE4M3(q);
    }
  }
}

void DequantizeFp8Pow2(const uint8_t* codes, const uint8_t* scales, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float scale = E8M0ToFloat(scales[b]);
    for (int i = 0; i < 32; ++i) out[b * 32 + i] = Fp8E4M3ToFloat(codes[b * 32 + i]) * scale;
  }
}

// FP4 with a per-block scale; `e4m3_scales` picks the compressed-KV rule, else the indexer's power of two.
template <int kBlock, bool kE4m3Scales>
void QuantizeFp4(const float* x, int64_t n, uint8_t* codes, uint8_t* scales) {
  std::memset(codes, 0, static_cast<size_t>(n / 2));
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    const float amax = BlockAmax(xb, kBlock);
    float scale;
    if constexpr (kE4m3Scales) {
      const uint8_t s = TorchFloatToE4M3(ClampMin(amax, 6.0f * 0x1p-9f) / 6.0f);
      scales[b] = s;
      scale = Fp8E4M3ToFloat(s);
    } else {
      const int k = PowerOfTwoCeilExponent(ClampMin(amax, 6.0f * 0x1p-126f) * kInv6);
      scales[b] = Pow2ScaleByte(k);
      scale = Pow2Scale(k);
    }
    for (int i = 0; i < kBlock; ++i) {
      float q = xb[i] / scale;
      if (!std::isnan(q)) q = std::clamp(q, -6.0f, 6.0f);
      const int64_t at = b * kBlock + i;
      codes[at / 2] |= static_cast<uint8_t>(E2M1Code(q) << ((at & 1) * 4));
    }
  }
}

template <int kBlock, bool kE4m3Scales>
void DequantizeFp4(const uint8_t* codes, const uint8_t* scales, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float scale = kE4m3Scales ? Fp8E4M3ToFloat(scales[b]) : E8M0ToFloat(scales[b]);
    for (int i = 0; i < kBlock; i += 2) {
      const uint8_t byte = codes[(b * kBlock + i) / 2];
      out[b * kBlock + i] = E2M1ToFloat(byte & 0xF) * scale;
      out[b * kBlock + i + 1] = E2M1ToFloat(byte >> 4) * scale;
    }
  }
}

}  // namespace

const char* KvQuantName(KvQuant q) {
  switch (q) {
    case KvQuant::kNone: return "f32";
    case KvQuant::kFp8Pow2x32: return "fp8-e4m3/pow2x32";
    case KvQuant::kFp4E4m3x16: return "fp4-e2m1/e4m3x16";
    case KvQuant::kFp4Pow2x32: return "fp4-e2m1/pow2x32";
  }
  return "?";
}

int64_t KvQuantBlock(KvQuant q) {
  switch (q) {
    case KvQuant::kNone: return 1;
    case KvQuant::kFp8Pow2x32: return 32;
    case KvQuant::kFp4E4m3x16: return 16;
    case KvQuant::kFp4Pow2x32: return 32;
  }
  return 1;
}

KvQuant EffectiveKvQuant(KvQuant q, int64_t n) { return n % KvQuantBlock(q) == 0 ? q : KvQuant::kNone; }

int64_t KvQuantBytes(KvQuant q, int64_t n) {
  switch (EffectiveKvQuant(q, n)) {
    case KvQuant::kNone: return n * 4;
    case KvQuant::kFp8Pow2x32: return n + n / 32;
    case KvQuant::kFp4E4m3x16: return n / 2 + n / 16;
    case KvQuant::kFp4Pow2x32: return n / 2 + n / 32;
  }
  return n * 4;
}

void KvQuantize(KvQuant q, const float* x, int64_t n, uint8_t* out) {
  switch (EffectiveKvQuant(q, n)) {
    case KvQuant::kNone: std::memcpy(out, x, static_cast<size_t>(n) * 4); return;
    case KvQuant::kFp8Pow2x32: QuantizeFp8Pow2(x, n, out, out + n); return;
    case KvQuant::kFp4E4m3x16: QuantizeFp4<16, true>(x, n, out, out + n / 2); return;
    case KvQuant::kFp4Pow2x32: QuantizeFp4<32, false>(x, n, out, out + n / 2); return;
  }
}

void KvDequantize(KvQuant q, const uint8_t* in, int64_t n, float* out) {
  switch (EffectiveKvQuant(q, n)) {
    case KvQuant::kNone: std::memcpy(out, in, static_cast<size_t>(n) * 4); return;
    case KvQuant::kFp8Pow2x32: DequantizeFp8Pow2(in, in + n, n, out); return;
    case KvQuant::kFp4E4m3x16: DequantizeFp4<16, true>(in, in + n / 2, n, out); return;
    case KvQuant::kFp4Pow2x32: DequantizeFp4<32, false>(in, in + n / 2, n, out); return;
  }
}

void KvFakeQuantize(KvQuant q, const float* x, int64_t n, float* out) {
  if (EffectiveKvQuant(q, n) == KvQuant::kNone) {
    if (out != x) std::memmove(out, x, static_cast<size_t>(n) * 4);
    return;
  }
  // One block at a time through a small buffer, so that out may alias x.
  const int64_t block = KvQuantBlock(q);
  uint8_t buffer[64];  // codes and scale of one block (≤ 32 + 1 bytes)
  for (int64_t b = 0; b < n; b += block) {
    KvQuantize(q, x + b, block, buffer);
    KvDequantize(q, buffer, block, out + b);
  }
}

}  // namespace deepinfer::kernels
