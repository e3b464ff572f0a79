// Internal: AVX-512 register operations of the Linear kernels (the `V` of linear_vector_impl.h), shared by
// the AVX-512 translation units. Internal linkage: include only from files compiled with AVX-512 flags.
#pragma once

// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsics headers as uninitialised.
#if !defined(__clang__)  // clang has no such warning and warns about the unknown name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstdint>

#include "kernels/number_formats.h"

namespace deepinfer::kernels::cpu {
namespace {

// bf16 bit patterns of the 16 E2M1 values, twice (vpermw reads a table of 32 words).
alignas(64) constexpr uint16_t kE2M1Bf16[32] = {
    0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80,
    0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0, 0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040,
    0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};
// E8M0 scale bytes e for which every E2M1 value times 2^(e-127) is a normal fp32 number (|v| from 2^-1
// to 1.5·2^2): then that product is the bf16 pattern of the value with e - 127 added to its exponent.
constexpr int kE2M1Bf16ScaleMin = 2, kE2M1Bf16ScaleMax = 252;

// (e - 127) << 7 in both halves of a dword, broadcast from memory by E2M1Bf16Table.
struct E2M1ExponentSteps {
  uint32_t step[256];
  constexpr E2M1ExponentSteps() : step() {
    for (int e = 0; e < 256; ++e) {
      const uint32_t half = static_cast<uint16_t>(static_cast<int16_t>((e - 127) * 128));
      step[e] = half | half << 16;
    }
  }
};
alignas(64) constexpr E2M1ExponentSteps kE2M1ExponentSteps;

// The 32-word vpermw table of bf16(value · 2^(e-127)) for the 16 E2M1 codes (twice), for scale bytes e in
// [kE2M1Bf16ScaleMin, kE2M1Bf16ScaleMax]: the exponent step added to every nonzero pattern.
inline __m512i E2M1Bf16Table(uint8_t e) {
  const __m512i words = _mm512_load_si512(kE2M1Bf16);
  const __m512i step = _mm512_set1_epi32(static_cast<int>(kE2M1ExponentSteps.step[e]));
  return _mm512_mask_add_epi16(words, 0xFEFEFEFEu, words, step);
}

struct V {
  using Reg = __m512;
  using Fp4Table = __m512;
  static constexpr int kDirectNr1 = 4;
  static constexpr int kDirectNr = 4;
  static constexpr int kDirectGroupedRows = 16;
  static constexpr int kPanelMr = 4;
  static constexpr int kPanelNr = 4;

  static Reg Zero() { return _mm512_setzero_ps(); }
  static Reg Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, Reg r) { _mm512_storeu_ps(p, r); }
  static Reg Set1(float v) { return _mm512_set1_ps(v); }
  static Reg Mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }

  static float Reduce(Reg a) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
  }

  // Reduce of a0..a3 at once: the same additions with their operands in the same order, four registers per
  // instruction (128-bit blocks regrouped with vshuff32x4, then vpermilps within blocks). Returns the four
  // dots in lanes 0..3.
  static __m128 Reduce4(Reg a0, Reg a1, Reg a2, Reg a3) {
    const Reg s8_01 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_f32x4(a0, a1, _MM_SHUFFLE(3, 2, 3, 2)));
    const Reg s8_23 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_f32x4(a2, a3, _MM_SHUFFLE(3, 2, 3, 2)));
    // 128-bit block r of s4 holds the four j+4 sums of a_r.
    const Reg s4 = _mm512_add_ps(_mm512_shuffle_f32x4(s8_01, s8_23, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(s8_01, s8_23, _MM_SHUFFLE(3, 1, 3, 1)));
    const Reg s2 = _mm512_add_ps(s4, _mm512_permute_ps(s4, _MM_SHUFFLE(3, 2, 3, 2)));
    const Reg s1 = _mm512_add_ps(s2, _mm512_permute_ps(s2, _MM_SHUFFLE(1, 1, 1, 1)));
    const __m512i firsts = _mm512_set_epi32(12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0);
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(firsts, s1));
  }
  // out[0..4) = Reduce of a0..a3, added to out's values (out first, as the scalar `out + dot`) when
  // `accumulate`.
  static void Reduce4Store(Reg a0, Reg a1, Reg a2, Reg a3, float* out, bool accumulate) {
    const __m128 dots = Reduce4(a0, a1, a2, a3);
    _mm_storeu_ps(out, accumulate ? _mm_add_ps(_mm_loadu_ps(out), dots) : dots);
  }

  static Reg LoadBf16(const uint16_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }

  // E4M3 S.EEEE.MMM placed in fp16 as S.0EEEE.MMM0000000 is the same number times 2^-8 (bias 15 vs 7),
  // subnormals included, and the conversion to fp32 is exact (fp16 subnormals become fp32 normals, so no
  // slow denormal arithmetic follows). Returns that times `factor` (one rounding), with the NaN codes
  // (0x7F, 0xFF: the only bytes whose value + 1 has zero low 7 bits) as NaN.
  static Reg DecodeE4M3(const uint8_t* p, Reg factor) {
    const __m256i sign_extended = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i half =
        _mm256_and_si256(_mm256_slli_epi16(sign_extended, 7), _mm256_set1_epi16(static_cast<short>(0xBF80)));
    const __mmask16 nan =
        _mm256_testn_epi16_mask(_mm256_add_epi16(sign_extended, _mm256_set1_epi16(1)), _mm256_set1_epi16(0x7F));
    return _mm512_mask_mul_ps(_mm512_set1_ps(__builtin_nanf("")), static_cast<__mmask16>(~nan), _mm512_cvtph_ps(half),
                              factor);
  }

  static Fp4Table MakeFp4Table(float scale) {
    return _mm512_mul_ps(_mm512_loadu_ps(number_tables::kE2M1.data()), _mm512_set1_ps(scale));
  }

  // 16 bytes -> 32 values: each byte's dword is duplicated, shifted so that the wanted nibble is in bits
  // 0..3, and vpermps (which reads only those bits) looks the value up.
  static void DecodeFp4(const uint8_t* bytes, const Fp4Table& table, bool low_first, Reg* out) {
    const __m512i dwords = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
    const __m512i first = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i second = _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    const __m512i shifts = low_first ? _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0)
                                     : _mm512_set_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    out[0] = _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_permutexvar_epi32(first, dwords), shifts), table);
    out[1] = _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_permutexvar_epi32(second, dwords), shifts), table);
  }
};

}  // namespace
}  // namespace deepinfer::kernels::cpu
