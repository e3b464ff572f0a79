// DeepSeek-V4.1's in-model quantizers as real storage: the formats its attention keeps its caches in, and
// the quantize / dequantize functions whose round trip equals transformers' fake quantization bit for bit
// (deepseek_v41 `_fake_quant_fp8_block` and `_fake_quant_fp4_block`):
//
//   * kFp8Pow2x32 (window KV, after RoPE): E4M3 values, one power-of-two scale per 32 values,
//     scale = 2^ceil(log2(max(amax, 1e-4) · fl(1/448))), values clamped to ±448 before rounding;
//   * kFp4E4m3x16 (compressed KV latents, after RoPE): E2M1 values, one E4M3 scale per 16 values,
//     scale = E4M3(max(amax, 6·2^-9) / 6) (torch's cast: round to nearest even, NaN from 480 up);
//   * kFp4Pow2x32 (indexer keys and queries): E2M1 values, one power-of-two scale per 32 values,
//     scale = 2^ceil(log2(max(amax, 6·2^-126) · fl(1/6))).
// ceil(log2) is taken from the fp32 bits (exponent − 127, plus one if the mantissa is non-zero); E2M1
// rounds to the nearest grid value with ties to the even code; values are divided by the scale in fp32.
// A vector whose length is not a multiple of the block is not quantized (the reference skips it) and is
// stored as fp32. A block holding a NaN or an infinity dequantizes to all NaN, as the reference's does.
//
// Storage of one vector of n values: the codes (FP8: n bytes; FP4: n/2 bytes, element 2i in the low
// nibble, sign in bit 3), then the n/block scale bytes (E8M0 exponent k + 127, 255 = NaN; or E4M3).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

enum class KvQuant {
  kNone,        // fp32 as is
  kFp8Pow2x32,  // window KV
  kFp4E4m3x16,  // compressed KV latents
  kFp4Pow2x32,  // indexer keys and queries
};

const char* KvQuantName(KvQuant q);

// The values per scale (1 for kNone).
int64_t KvQuantBlock(KvQuant q);

// The format a vector of n values is actually stored in: q, or kNone when n is not a multiple of its block.
KvQuant EffectiveKvQuant(KvQuant q, int64_t n);

// Bytes of one stored vector of n values (in its effective format).
int64_t KvQuantBytes(KvQuant q, int64_t n);

// Encodes x[0..n) into `out` (KvQuantBytes(q, n) bytes) in the effective format.
void KvQuantize(KvQuant q, const float* x, int64_t n, uint8_t* out);

// Decodes a stored vector into out[0..n): exactly the values of the reference's fake quantization.
void KvDequantize(KvQuant q, const uint8_t* in, int64_t n, float* out);

// out = dequantize(quantize(x)) without the storage (the indexer queries, which are never stored). out may
// equal x.
void KvFakeQuantize(KvQuant q, const float* x, int64_t n, float* out);

// The pieces, for tests against their definitions.
namespace kv_quant_internal {
// 2^ceil(log2(t)) from the fp32 bits of t > 0, as the exponent k (the scale is 2^k); NaN and infinity give
// k = 129 and 128 (the reference's scale is then infinite).
int PowerOfTwoCeilExponent(float t);
// torch's fp32 → float8_e4m3fn cast: round to nearest even, NaN code (0x7F with the sign) for NaN and for
// magnitudes that round beyond 448.
uint8_t TorchFloatToE4M3(float x);
// The E2M1 code (sign in bit 3) of a value already clamped to [-6, 6]; NaN gives a zero of its sign.
uint8_t E2M1Code(float q);
}  // namespace kv_quant_internal

}  // namespace deepinfer::kernels
