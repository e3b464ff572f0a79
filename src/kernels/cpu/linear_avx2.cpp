// Linear on AVX2: a pair of ymm registers holds the 16 lanes of the canonical order, so results equal the
// AVX-512 and scalar kernels bit for bit.
#include <immintrin.h>

#include <cstdint>

#include "kernels/number_formats.h"

namespace deepinfer::kernels::cpu {
namespace {

struct V {
  struct Reg {
    __m256 lo, hi;  // lanes 0..7 and 8..15
  };
  struct Fp4Table {
    __m256 magnitude;  // |E2M1| · scale for codes 0..7
  };
  static constexpr int kDirectNr1 = 3;
  static constexpr int kDirectNr = 2;
  static constexpr int kDirectGroupedRows = 4;
  // The panel tile: 4 rows of x against one panel row (8 ymm accumulators). Each panel vector, read from L2,
  // then feeds 4 rows of FMAs instead of 2, and the 16 registers hold the tile without spilling.
  static constexpr int kPanelMr = 4;
  static constexpr int kPanelNr = 1;
  // The lane-major panel (linear_vector_impl.h, LanePanelPath) from this many rows of x: 6 rows of x against
  // lane j of 16 outputs (12 ymm accumulators) take 8 loads per 12 FMAs where the tile above takes 10 per 8,
  // which pays for transposing the panel from about this batch size on.
  static constexpr int kLanePanelMr = 6;
  static constexpr int kLanePanelMinRows = 8;

  static Reg Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static Reg Load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static void Store(float* p, Reg r) {
    _mm256_storeu_ps(p, r.lo);
    _mm256_storeu_ps(p + 8, r.hi);
  }
  static Reg Set1(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
  static Reg Mul(Reg a, Reg b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static Reg Fma(Reg a, Reg b, Reg c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
  static Reg Add(Reg a, Reg b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }

  // r[c] lane j becomes r[j] lane c, for an 8 x 8 block of floats.
  static void Transpose8(__m256* r) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
  }
  // The 16 x 16 block at `in` (rows `in_stride` floats apart) transposed into `out` (rows `out_stride` floats
  // apart): out[j][c] = in[c][j].
  static void Transpose16(const float* in, int64_t in_stride, float* out, int64_t out_stride) {
    for (int cb = 0; cb < 16; cb += 8) {
      for (int jb = 0; jb < 16; jb += 8) {
        __m256 r[8];
        for (int c = 0; c < 8; ++c) r[c] = _mm256_loadu_ps(in + (cb + c) * in_stride + jb);
        Transpose8(r);
        for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + (jb + j) * out_stride + cb, r[j]);
      }
    }
  }

  static float Reduce(Reg a) {
    const __m256 s8 = _mm256_add_ps(a.lo, a.hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
  }

  static __m256 Bf16x8(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static Reg LoadBf16(const uint16_t* p) { return {Bf16x8(p), Bf16x8(p + 8)}; }
  // As Transpose16 over 16 bf16 rows (rows[c] + k), widened to fp32 on the way.
  static void Transpose16Bf16(const uint16_t* const* rows, int64_t k, float* out, int64_t out_stride) {
    for (int cb = 0; cb < 16; cb += 8) {
      for (int jb = 0; jb < 16; jb += 8) {
        __m256 r[8];
        for (int c = 0; c < 8; ++c) r[c] = Bf16x8(rows[cb + c] + k + jb);
        Transpose8(r);
        for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + (jb + j) * out_stride + cb, r[j]);
      }
    }
  }

  // As on AVX-512: E4M3 bits placed in fp16 are the value times 2^-8; NaN codes are patched.
  static __m256 E4M3x8(const uint8_t* p, __m256 factor) {
    const __m128i sign_extended = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m128i half = _mm_and_si128(_mm_slli_epi16(sign_extended, 7), _mm_set1_epi16(static_cast<short>(0xBF80)));
    const __m128i low7 = _mm_and_si128(_mm_add_epi16(sign_extended, _mm_set1_epi16(1)), _mm_set1_epi16(0x7F));
    const __m256 nan = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_cmpeq_epi16(low7, _mm_setzero_si128())));
    const __m256 product = _mm256_mul_ps(_mm256_cvtph_ps(half), factor);
    return _mm256_blendv_ps(product, _mm256_set1_ps(__builtin_nanf("")), nan);
  }
  static Reg DecodeE4M3(const uint8_t* p, Reg factor) { return {E4M3x8(p, factor.lo), E4M3x8(p + 8, factor.hi)}; }

  static Fp4Table MakeFp4Table(float scale) {
    return {_mm256_mul_ps(_mm256_loadu_ps(number_tables::kE2M1.data()), _mm256_set1_ps(scale))};
  }

  // Eight values from bytes 4g .. 4g+3: each byte duplicated into two dwords, shifted so the wanted nibble
  // sits in bits 0..3; vpermps looks up the magnitude (bits 0..2) and bit 3 becomes the sign.
  static __m256 Fp4x8(__m128i bytes, int group, __m256i shifts, const Fp4Table& table) {
    const char b = static_cast<char>(4 * group);
    const __m128i spread = _mm_setr_epi8(b, b, static_cast<char>(b + 1), static_cast<char>(b + 1),
                                         static_cast<char>(b + 2), static_cast<char>(b + 2), static_cast<char>(b + 3),
                                         static_cast<char>(b + 3), -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i codes = _mm256_srlv_epi32(_mm256_cvtepu8_epi32(_mm_shuffle_epi8(bytes, spread)), shifts);
    const __m256 magnitude = _mm256_permutevar8x32_ps(table.magnitude, codes);
    const __m256i sign =
        _mm256_and_si256(_mm256_slli_epi32(codes, 28), _mm256_set1_epi32(static_cast<int>(0x80000000u)));
    return _mm256_xor_ps(magnitude, _mm256_castsi256_ps(sign));
  }
  static void DecodeFp4(const uint8_t* bytes, const Fp4Table& table, bool low_first, Reg* out) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
    const __m256i shifts =
        low_first ? _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4) : _mm256_setr_epi32(4, 0, 4, 0, 4, 0, 4, 0);
    out[0] = {Fp4x8(raw, 0, shifts, table), Fp4x8(raw, 1, shifts, table)};
    out[1] = {Fp4x8(raw, 2, shifts, table), Fp4x8(raw, 3, shifts, table)};
  }
};

}  // namespace
}  // namespace deepinfer::kernels::cpu

#include "kernels/cpu/linear_vector_impl.h"

namespace deepinfer::kernels::cpu {

void LinearRangeAvx2(const LinearTask& task, int64_t n_begin, int64_t n_end) {
  LinearRangeVector(task, n_begin, n_end);
}

}  // namespace deepinfer::kernels::cpu
