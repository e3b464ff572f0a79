// Exact conversions between fp32 and the narrow number formats of checkpoints: bfloat16, FP8 E4M3 and
// E5M2 (OCP FP8), E2M1 (MXFP4 elements) and E8M0 (MX scales). Decoders are table-based and exact.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

namespace deepinfer::kernels {

inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &wide, sizeof(out));
  return out;
}

// Round to nearest, ties to even; NaN stays NaN (quietened), infinities stay infinite.
uint16_t FloatToBf16(float value);

void Bf16ToFloat(const uint16_t* in, float* out, int64_t n);
void FloatToBf16(const float* in, uint16_t* out, int64_t n);

namespace number_tables {
extern const std::array<float, 256> kFp8E4M3;  // OCP E4M3: bias 7, no infinities, 0x7F/0xFF NaN, max 448
extern const std::array<float, 256> kFp8E5M2;  // OCP E5M2: bias 15, IEEE-like infinities and NaNs
extern const std::array<float, 16> kE2M1;      // sign bit 3; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6
extern const std::array<float, 256> kE8M0;     // 2^(e-127); e = 255 is NaN
}  // namespace number_tables

inline float Fp8E4M3ToFloat(uint8_t bits) { return number_tables::kFp8E4M3[bits]; }
inline float Fp8E5M2ToFloat(uint8_t bits) { return number_tables::kFp8E5M2[bits]; }
inline float E2M1ToFloat(uint8_t nibble) { return number_tables::kE2M1[nibble & 0xF]; }
inline float E8M0ToFloat(uint8_t bits) { return number_tables::kE8M0[bits]; }

// Encoders (round to nearest, ties to even), for fixtures and tests. Out-of-range values saturate to the
// largest finite magnitude (E4M3 ±448, E2M1 ±6). NaN becomes E4M3 NaN (0x7F with its sign); E2M1 has no
// NaN, so NaN encodes as +0.
uint8_t FloatToFp8E4M3(float value);
uint8_t FloatToE2M1(float value);
// The E8M0 exponent e whose 2^(e-127) is the smallest power of two ≥ |value| (clamped to 0..254).
uint8_t FloatToE8M0Ceil(float value);

}  // namespace deepinfer::kernels
