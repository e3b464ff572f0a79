// Decode-sized Linear (m ≤ 8 rows of x) over FP8-block and MXFP4 weights on AVX-512, with the fewest vector
// operations per weight: at m = 1 the product is bound by decoding, not by memory, so every operation
// counts. Results are bit-identical to the generic kernels (linear_vector_impl.h), which this falls back to
// wherever a shortcut's precondition fails.
//
// FP8 (scales that are powers of two: UE8M0, or fp32 scales that happen to be): each E4M3 byte q becomes the
// fp32 value q · 2^c for a fixed c, and the block scale s and 2^-c move onto x instead: xs = x · (s · 2^-c)
// once per block of weight rows. When xs is exact (checked: no overflow, no underflow) x·(q·s) and
// xs·(q·2^c) are the same real product, and an FMA rounds that product with the accumulator once, so the
// result is bit-identical.
// Every decode keeps every weight a normal fp32 number, E4M3 subnormals included: Intel cores take a
// microcode assist for each FMA that reads a subnormal, so a decode that produced them would run many times
// slower on weights with many subnormal codes. Where AVX512_VBMI is present, byte tables give c = -117
// (DecodeE4M3TableBytes); elsewhere a shift and a vpternlogd give c = -104 for codes with a nonzero
// exponent, and steps that hold codes with a zero exponent fix those lanes up (DecodeE4M3Shifted).
// NaN codes (0x7F, 0xFF) do not decode to NaN; they are detected as the bytes stream by, and a tile that
// holds one is recomputed by the generic kernel (which makes exactly those outputs NaN), unless the weight
// is marked fp8_nan_free (checked once by its owner), which saves the two operations per 64 bytes the watch
// costs (about 15% of the decode at m = 1).
// Why not the fp16 route (E4M3 bits placed in fp16, vcvtph2ps): the 512-bit conversion is the slowest
// step on Zen 4; the integer decode runs about 1.5 times as fast per core.
//
// MXFP4: one vpmultishiftqb spreads the 16 nibbles of a broadcast qword into the index bytes of 16 dwords,
// and one table lookup turns them into fp32: vpermw of the bf16 patterns of value · scale (built per
// 32-block by adding the scale's exponent to the patterns of the bare values) into each dword's high half,
// or, for scales where that would leave the normal range, vpermps of the fp32 table value · scale (the
// generic kernel's rounding). Needs AVX512_VBMI, checked at run time. (Measured alternatives that were
// slower on Zen 4: vpermps of an fp32 table, vpermb or vpmovzxbq instead of the broadcast, vpshufb +
// vpsrlvd spreading, 256-bit registers.)
//
// Both stream NR weight rows at a time and issue software prefetches one tile ahead: rows of small matrices
// are short, and the hardware prefetcher ramps up too slowly over many short interleaved streams.
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/cpu/avx512_ops.h"
#include "kernels/cpu/linear_kernels.h"
#include "kernels/cpu/linear_scratch.h"
#include "kernels/number_formats.h"

namespace deepinfer::kernels::cpu {
namespace {

constexpr int64_t kLanes = 16;
constexpr int kMaxRows = 8;  // of x
// Software prefetch runs at least this many bytes ahead of the weight rows being read.
constexpr int64_t kPrefetchBytes = 4096;
// Into L2: prefetches to L1 run out of L1 miss buffers and get dropped (measured: FP8 rows of 1 KiB
// streamed at 9 GB/s with T0 hints, 17 GB/s with T1, on one Zen 4 core).
constexpr auto kPrefetchHint = _MM_HINT_T1;

inline void StoreOutputs(const LinearTask& t, int valid_m, int valid_n, int64_t n0, const float* dots, int nr) {
  for (int i = 0; i < valid_m; ++i) {
    float* y = t.y + i * t.y_stride + n0;
    for (int j = 0; j < valid_n; ++j) {
      const float dot = dots[i * nr + j];
      y[j] = t.accumulate ? y[j] + dot : dot;
    }
  }
}

inline bool DenormalsAreZero() { return (_mm_getcsr() & 0x0040u) != 0; }

// ---------------------------------------------------------------------------------------------------
// FP8

// s · 2^exponent_shift for a block scale s that is a power of two in [2^-127, 2^7] (so q · s is exact for
// every E4M3 q, and for a shift of 104 or 117 the factor is a normal fp32 number); false otherwise.
bool Fp8PrescaleFactor(const WeightView& w, int64_t block, int exponent_shift, float* factor) {
  float s;
  if (w.scale_format == ScaleFormat::kUE8M0) {
    s = E8M0ToFloat(static_cast<const uint8_t*>(w.scales)[block]);
  } else {
    std::memcpy(&s, static_cast<const uint8_t*>(w.scales) + block * 4, 4);
  }
  int exponent = 0;
  const float mantissa = std::frexp(s, &exponent);  // |s| = 2^(exponent-1) when |mantissa| = 0.5
  if (std::fabs(mantissa) != 0.5f || exponent - 1 < -127 || exponent - 1 > 7) return false;
  *factor = std::ldexp(s, exponent_shift);
  return true;
}

// xs[i][k] = x[i][k] · factor(k) for the weight block row `block_row`, each row `stride` floats and
// zero-padded past in_features. False when a factor or a product is not exact (the caller then uses the
// generic kernel for these weight rows).
bool PrescaleX(const LinearTask& t, int64_t block_row, int exponent_shift, float* xs, int64_t stride) {
  const WeightView& w = *t.w;
  const int64_t in = w.in_features;
  const int64_t blocks = (in + w.block_in - 1) / w.block_in;
  __mmask16 inexact = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    float factor;
    if (!Fp8PrescaleFactor(w, block_row * blocks + b, exponent_shift, &factor)) return false;
    const __m512 f = _mm512_set1_ps(factor);
    const __m512 inverse = _mm512_set1_ps(1.0f / factor);  // a power of two: exact
    const int64_t k_begin = b * w.block_in, k_end = k_begin + w.block_in < in ? k_begin + w.block_in : in;
    for (int64_t i = 0; i < t.m; ++i) {
      const float* x = t.x + i * t.x_stride;
      float* out = xs + i * stride;
      for (int64_t k = k_begin; k < k_end; k += kLanes) {
        const int64_t n = k_end - k < kLanes ? k_end - k : kLanes;
        const __mmask16 lanes = static_cast<__mmask16>((1u << n) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(lanes, x + k);
        const __m512 scaled = _mm512_mul_ps(v, f);
        // Exact iff scaling back returns x (overflow gives inf, underflow loses bits; NaN x fails too).
        inexact |= _mm512_mask_cmp_ps_mask(lanes, _mm512_mul_ps(scaled, inverse), v, _CMP_NEQ_UQ);
        _mm512_mask_storeu_ps(out + k, lanes, scaled);
      }
    }
  }
  if (inexact != 0) return false;
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t k = in; k < stride; ++k) xs[i * stride + k] = 0.0f;
  }
  return true;
}

// The shift decode, 16 sign-extended E4M3 codes at a time: (code << 20) & 0x87F00000 | 16 << 23 is
// sign | (e + 16) << 23 | m << 20, exactly value · 2^-104 for every code with a nonzero exponent field e (one
// shift and one vpternlogd). Codes with e = 0 (zero and the subnormals m · 2^-9) come out wrong that way;
// E4M3ZeroExponentFix replaces them by m · 2^-113, normal like every other pattern. The fix costs three
// operations per 16 weights, so tiles run it only in 64-byte steps that hold such a code (rare in trained
// weights: magnitudes below 2^-6 of their block's scale). The same argument as for the tables below makes
// the products, and so the outputs, the same bits: for s in [2^-127, 2^7] the factor s · 2^104 is a normal
// power of two in [2^-23, 2^111].
constexpr int kShiftScaleExponent = -104;

inline __m512 DecodeE4M3Shifted(__m512i sign_extended) {
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_slli_epi32(sign_extended, 20),
                                                       _mm512_set1_epi32(static_cast<int>(0x87F00000u)),
                                                       _mm512_set1_epi32(16 << 23), 0xEA));  // (a & b) | c
}

// m · 2^-9 · 2^-104 for mantissa m (entries 8..15, unused, are 0).
constexpr float E4M3ZeroExponentValue(int m) {
  float value = m < 8 ? static_cast<float>(m) : 0.0f;
  for (int i = 0; i < 9 - kShiftScaleExponent; ++i) value /= 2.0f;
  return value;
}
alignas(64) constexpr float kE4M3ZeroExponentValues[16] = {
    E4M3ZeroExponentValue(0),  E4M3ZeroExponentValue(1),  E4M3ZeroExponentValue(2),  E4M3ZeroExponentValue(3),
    E4M3ZeroExponentValue(4),  E4M3ZeroExponentValue(5),  E4M3ZeroExponentValue(6),  E4M3ZeroExponentValue(7),
    E4M3ZeroExponentValue(8),  E4M3ZeroExponentValue(9),  E4M3ZeroExponentValue(10), E4M3ZeroExponentValue(11),
    E4M3ZeroExponentValue(12), E4M3ZeroExponentValue(13), E4M3ZeroExponentValue(14), E4M3ZeroExponentValue(15)};
static_assert(std::bit_cast<uint32_t>(E4M3ZeroExponentValue(1)) == 14u << 23);  // 2^-113: normal

// The lanes of `decoded` whose code has e = 0 replaced by the code's sign | m · 2^-113: vpermps reads the
// low 4 bits of each sign-extended code, which for these codes are 0mmm.
inline __m512 E4M3ZeroExponentFix(__m512i sign_extended, __m512 decoded) {
  const __mmask16 zero_exponent = _mm512_testn_epi32_mask(sign_extended, _mm512_set1_epi32(0x78));
  const __m512 magnitude = _mm512_permutexvar_ps(sign_extended, _mm512_load_ps(kE4M3ZeroExponentValues));
  return _mm512_castsi512_ps(_mm512_mask_ternarylogic_epi32(
      _mm512_castps_si512(decoded), zero_exponent, _mm512_castps_si512(magnitude),
      _mm512_set1_epi32(static_cast<int>(0x80000000u)), 0xEC));  // b | (a & c): the magnitude, a's sign
}

// Whether any of 64 bytes is an E4M3 code with a zero exponent field.
inline bool HasZeroExponent(const uint8_t* bytes) {
  return _mm512_testn_epi8_mask(_mm512_loadu_si512(bytes), _mm512_set1_epi8(0x78)) != 0;
}

// Where AVX512_VBMI is present the patterns come from byte tables instead, normal fp32 numbers for
// every code: value(q) · 2^-117 (kTableScaleExponent). Why 2^-117: the smallest nonzero E4M3 magnitude, the
// subnormal 2^-9, becomes 2^-126, the smallest normal fp32 number, and the largest, 448 < 2^9, stays far
// below the top of the range; so no weight pattern is subnormal and no FMA reads one. Why the bits do not
// change: (1) every pattern is exactly value(q) · 2^-117 (checked for all 128 magnitudes at compile time
// below; the sign is the code's); (2) the factor on x is f = s · 2^117, for
// s in [2^-127, 2^7] a normal power of two in [2^-10, 2^124], and xs = x · f is checked to be exact
// (PrescaleX), so xs = x · s · 2^117 as a real number; (3) the FMA multiplies xs by the pattern exactly,
// giving x · (q · s) as a real number, the same product the generic kernel forms from x and its exact
// dequantised weight q · s (exact for s in that range: at most 4 significant bits, none below 2^-149), and
// rounds that product plus the same accumulator once: the same bits. A value of at most 4 significant bits
// leaves the low 20 bits of its pattern zero, so only bytes 2 and 3 carry anything: each is a function of the
// code's low 7 bits (two 128-entry tables, one vpermi2b over two registers each), with the sign bit added to
// byte 3 by one vpternlogd; one zero-masking vpermt2b per 16 weights then moves both bytes into place. Seven
// vector operations per 64 weights.
constexpr int kTableScaleExponent = -117;

// The fp32 bit pattern of value(code) · 2^kTableScaleExponent for an E4M3 code without its sign (0..127; the
// NaN code 0x7F gets that of 480, as if it were finite: the NaN watch, or fp8_nan_free, deals with it).
constexpr uint32_t E4M3TablePattern(int code) {
  const int e = code >> 3, m = code & 7;
  if (e == 0 && m == 0) return 0;
  // value = significand · 2^exponent with the significand an integer in [8, 15]: normal codes are
  // (8 + m) · 2^(e - 10); subnormal codes m · 2^-9, normalised by shifting m up to bit 3.
  int significand = e == 0 ? m : 8 + m;
  int exponent = e == 0 ? -9 : e - 10;
  while (significand < 8) {
    significand <<= 1;
    --exponent;
  }
  // value · 2^-117 = (significand / 8) · 2^(exponent + 3 - 117): 1.mmm times that power, biased by 127.
  const int biased = exponent + 3 + kTableScaleExponent + 127;
  return static_cast<uint32_t>(biased) << 23 | static_cast<uint32_t>(significand - 8) << 20;
}

// The same value computed in fp32 arithmetic (every step exact: small integers and powers of two).
constexpr float E4M3TableValue(int code) {
  const int e = code >> 3, m = code & 7;
  // (1 + m/8) · 2^(e-1) for normal codes, m/8 for subnormals; then 2^-6: the E4M3 bias of 7.
  float value = e == 0 ? static_cast<float>(m) / 8.0f : static_cast<float>(8 + m) / 8.0f;
  for (int i = 1; i < e; ++i) value *= 2.0f;
  for (int i = 0; i < 6; ++i) value /= 2.0f;
  for (int i = 0; i < -kTableScaleExponent; ++i) value /= 2.0f;
  return value;
}

struct E4M3ByteTables {
  uint8_t byte2[128], byte3[128];
  constexpr E4M3ByteTables() : byte2(), byte3() {
    for (int code = 0; code < 128; ++code) {
      byte2[code] = static_cast<uint8_t>(E4M3TablePattern(code) >> 16);
      byte3[code] = static_cast<uint8_t>(E4M3TablePattern(code) >> 24);
    }
  }
};
alignas(64) constexpr E4M3ByteTables kE4M3ByteTables;

constexpr bool E4M3TablesAreExactAndNormal() {
  for (int code = 0; code < 127; ++code) {
    const uint32_t pattern = E4M3TablePattern(code);
    if (std::bit_cast<float>(pattern) != E4M3TableValue(code)) return false;
    if ((pattern & 0xFFFFu) != 0 || pattern >> 31 != 0) return false;
    if (code != 0 && (pattern >> 23) == 0) return false;  // a subnormal (or zero) pattern
  }
  return true;
}
static_assert(E4M3TablesAreExactAndNormal());
static_assert(E4M3TablePattern(1) == 0x00800000u);  // 2^-9 · 2^-117 = 2^-126, the smallest normal
static_assert(E4M3TablePattern(0x7E) == 0x09600000u);  // 448 · 2^-117 = 1.75 · 2^-109

// vpermt2b indices for the 16 weights of quarter q: byte 2 of dword d from byte 16q + d of the byte-2 register
// (the first source), byte 3 from byte 16q + d of the byte-3 register (the second: index bit 6 set).
constexpr std::array<uint8_t, 64> E4M3PlaceIndex(int quarter) {
  std::array<uint8_t, 64> index{};
  for (int d = 0; d < 16; ++d) {
    index[static_cast<size_t>(4 * d + 2)] = static_cast<uint8_t>(16 * quarter + d);
    index[static_cast<size_t>(4 * d + 3)] = static_cast<uint8_t>(64 + 16 * quarter + d);
  }
  return index;
}
alignas(64) constexpr std::array<uint8_t, 64> kE4M3PlaceIndex[4] = {E4M3PlaceIndex(0), E4M3PlaceIndex(1),
                                                                     E4M3PlaceIndex(2), E4M3PlaceIndex(3)};
constexpr __mmask64 kE4M3ByteMask = 0xCCCCCCCCCCCCCCCCu;  // bytes 2 and 3 of each dword

struct E4M3Tables {
  __m512i byte2_low, byte2_high, byte3_low, byte3_high, place[4];
};

__attribute__((target("avx512vbmi"))) inline E4M3Tables LoadE4M3Tables() {
  E4M3Tables t;
  t.byte2_low = _mm512_load_si512(kE4M3ByteTables.byte2);
  t.byte2_high = _mm512_load_si512(kE4M3ByteTables.byte2 + 64);
  t.byte3_low = _mm512_load_si512(kE4M3ByteTables.byte3);
  t.byte3_high = _mm512_load_si512(kE4M3ByteTables.byte3 + 64);
  for (int q = 0; q < 4; ++q) t.place[q] = _mm512_load_si512(kE4M3PlaceIndex[q].data());
  return t;
}

// Bytes 2 and 3 of the patterns of 64 E4M3 codes. vpermi2b reads the low 7 bits of each index byte, so the
// sign bit selects nothing; it is added to byte 3 after.
__attribute__((target("avx512vbmi"), always_inline)) inline void DecodeE4M3TableBytes(__m512i codes,
                                                                                      const E4M3Tables& t,
                                                                                      __m512i* byte2, __m512i* byte3) {
  *byte2 = _mm512_permutex2var_epi8(t.byte2_low, codes, t.byte2_high);
  *byte3 = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(t.byte3_low, codes, t.byte3_high), codes,
                                     _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);  // a | (b & c)
}

// The 16 fp32 patterns value · 2^-117 of codes 16q .. 16q + 15 of those 64.
__attribute__((target("avx512vbmi"), always_inline)) inline __m512 PlaceE4M3TableBytes(__m512i byte2, __m512i byte3,
                                                                                      const E4M3Tables& t, int q) {
  return _mm512_castsi512_ps(_mm512_maskz_permutex2var_epi8(kE4M3ByteMask, byte2, t.place[q], byte3));
}

// Lanes of 64 bytes that are E4M3 NaN codes.
inline __mmask64 NanCodes(__m512i bytes) {
  return _mm512_cmpeq_epi8_mask(_mm512_or_si512(bytes, _mm512_set1_epi8(static_cast<char>(0x80))),
                                _mm512_set1_epi8(static_cast<char>(0xFF)));
}

bool HasVbmi() {
  static const bool has = __builtin_cpu_supports("avx512vbmi");
  return has;
}

// The accumulators of MR prescaled x rows with NR FP8 weight rows, and the parts of a tile that do not
// depend on how the weights decode (inlined into either decode's tile).
template <int MR, int NR, bool kNanFree>
struct Fp8Accumulators {
  __m512 acc[MR][NR];
  __mmask64 nan = 0;

  __attribute__((always_inline)) Fp8Accumulators() {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  // Prefetches ahead of the 64 bytes at k of every row and watches them for NaN codes.
  __attribute__((always_inline)) void Begin64(const uint8_t* const* rows, int64_t k, int64_t prefetch) {
    for (int j = 0; j < NR; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(rows[j] + k + prefetch), kPrefetchHint);
      if constexpr (!kNanFree) nan |= NanCodes(_mm512_loadu_si512(rows[j] + k));
    }
  }
  // Watches the `lanes` of a tail step's bytes (those past the last whole 64, zero-padded) for NaN codes.
  __attribute__((always_inline)) void WatchTail(__m512i bytes, __mmask64 lanes) {
    if constexpr (!kNanFree) nan |= NanCodes(bytes) & lanes;
  }
  __attribute__((always_inline)) void Step(const float* xs, int64_t xs_stride, int64_t k, const __m512* wv) {
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_loadu_ps(xs + i * xs_stride + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  // The dots, or false if a NaN code was seen (watched for unless kNanFree).
  __attribute__((always_inline)) bool Dots(float* dots) {
    if (nan != 0) return false;
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) dots[i * NR + j] = V::Reduce(acc[i][j]);
    return true;
  }
};

// The inputs past the last whole 64 bytes go 16 at a time, zero-padded as the generic kernel pads its tail.
inline __mmask16 TailLanes(int64_t in, int64_t k) {
  const int64_t n = in - k < kLanes ? in - k : kLanes;
  return static_cast<__mmask16>((1u << n) - 1);
}

// The canonical dots of MR prescaled (by s · 2^104) x rows with NR FP8 weight rows, by the shift decode;
// false if a NaN code was seen (watched for unless kNanFree).
template <int MR, int NR, bool kNanFree>
bool Fp8Tile(const float* xs, int64_t xs_stride, const uint8_t* const* rows, int64_t in, int64_t prefetch,
             float* dots) {
  Fp8Accumulators<MR, NR, kNanFree> tile;
  for (int64_t k = 0; k < in / 64 * 64; k += 64) {
    tile.Begin64(rows, k, prefetch);
    bool zero_exponent = false;
    for (int j = 0; j < NR; ++j) zero_exponent |= HasZeroExponent(rows[j] + k);
    for (int s = 0; s < 64; s += 16) {
      __m512 wv[NR];
      for (int j = 0; j < NR; ++j) {
        const __m512i code = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j] + k + s)));
        wv[j] = DecodeE4M3Shifted(code);
        if (zero_exponent) wv[j] = E4M3ZeroExponentFix(code, wv[j]);
      }
      tile.Step(xs, xs_stride, k + s, wv);
    }
  }
  for (int64_t k = in / 64 * 64; k < in; k += kLanes) {
    const __mmask16 lanes = TailLanes(in, k);
    __m512 wv[NR];
    for (int j = 0; j < NR; ++j) {
      const __m128i bytes = _mm_maskz_loadu_epi8(lanes, rows[j] + k);
      tile.WatchTail(_mm512_zextsi128_si512(bytes), lanes);
      const __m512i code = _mm512_cvtepi8_epi32(bytes);
      wv[j] = E4M3ZeroExponentFix(code, DecodeE4M3Shifted(code));
    }
    tile.Step(xs, xs_stride, k, wv);
  }
  return tile.Dots(dots);
}

// The same with x prescaled by s · 2^117 and the weights decoded by the byte tables (needs AVX512_VBMI).
template <int MR, int NR, bool kNanFree>
__attribute__((target("avx512vbmi"))) bool Fp8TileTable(const float* xs, int64_t xs_stride, const uint8_t* const* rows,
                                                        int64_t in, int64_t prefetch, float* dots) {
  Fp8Accumulators<MR, NR, kNanFree> tile;
  const E4M3Tables tables = LoadE4M3Tables();
  for (int64_t k = 0; k < in / 64 * 64; k += 64) {
    tile.Begin64(rows, k, prefetch);
    __m512i byte2[NR], byte3[NR];
    for (int j = 0; j < NR; ++j) DecodeE4M3TableBytes(_mm512_loadu_si512(rows[j] + k), tables, &byte2[j], &byte3[j]);
    for (int q = 0; q < 4; ++q) {
      __m512 wv[NR];
      for (int j = 0; j < NR; ++j) wv[j] = PlaceE4M3TableBytes(byte2[j], byte3[j], tables, q);
      tile.Step(xs, xs_stride, k + 16 * q, wv);
    }
  }
  for (int64_t k = in / 64 * 64; k < in; k += kLanes) {
    const __mmask16 lanes = TailLanes(in, k);
    __m512 wv[NR];
    for (int j = 0; j < NR; ++j) {
      const __m512i bytes = _mm512_maskz_loadu_epi8(lanes, rows[j] + k);
      tile.WatchTail(bytes, lanes);
      __m512i byte2, byte3;
      DecodeE4M3TableBytes(bytes, tables, &byte2, &byte3);
      wv[j] = PlaceE4M3TableBytes(byte2, byte3, tables, 0);
    }
    tile.Step(xs, xs_stride, k, wv);
  }
  return tile.Dots(dots);
}

template <int MR, int NR, bool kNanFree>
void Fp8Rows(const LinearTask& t, int64_t n_begin, int64_t n_end, const float* xs, int64_t xs_stride, bool table,
             LinearRangeFn fallback) {
  const WeightView& w = *t.w;
  const int64_t in = w.in_features;
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t tile_bytes = NR * in;
  const int64_t prefetch = (kPrefetchBytes + tile_bytes - 1) / tile_bytes * tile_bytes;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += NR) {
    const int valid_n = static_cast<int>(n_end - n0 < NR ? n_end - n0 : NR);
    const uint8_t* rows[NR];
    for (int j = 0; j < NR; ++j) rows[j] = base + (j < valid_n ? n0 + j : n_end - 1) * in;
    float dots[MR * NR];
    const bool finite = table ? Fp8TileTable<MR, NR, kNanFree>(xs, xs_stride, rows, in, prefetch, dots)
                              : Fp8Tile<MR, NR, kNanFree>(xs, xs_stride, rows, in, prefetch, dots);
    if (finite) {
      StoreOutputs(t, MR, valid_n, n0, dots, NR);
    } else {
      fallback(t, n0, n0 + valid_n);
    }
  }
}

template <int MR, int NR>
void Fp8Gemv(const LinearTask& t, int64_t n_begin, int64_t n_end, LinearRangeFn fallback) {
  const WeightView& w = *t.w;
  const int64_t stride = (w.in_features + kLanes - 1) / kLanes * kLanes;
  float* xs = ThreadScratchX(static_cast<size_t>(MR * stride));
  const bool table = HasVbmi();
  const int prescale_exponent = table ? -kTableScaleExponent : -kShiftScaleExponent;
  for (int64_t block_begin = n_begin; block_begin < n_end;) {
    const int64_t block_row = block_begin / w.block_out;
    const int64_t block_end = (block_row + 1) * w.block_out < n_end ? (block_row + 1) * w.block_out : n_end;
    if (PrescaleX(t, block_row, prescale_exponent, xs, stride)) {
      if (w.fp8_nan_free) {
        Fp8Rows<MR, NR, true>(t, block_begin, block_end, xs, stride, table, fallback);
      } else {
        Fp8Rows<MR, NR, false>(t, block_begin, block_end, xs, stride, table, fallback);
      }
    } else {
      fallback(t, block_begin, block_end);
    }
    block_begin = block_end;
  }
}

// ---------------------------------------------------------------------------------------------------
// MXFP4

// Multishift controls: the byte that indexes each dword's lookup takes the 8 bits from bit 4d of the
// qword, so that nibble d (of 16 in the qword) sits in its low bits; the high-first order swaps each pair.
// The lookups read only the low 4 (vpermps) or 5 (vpermw) bits of their index, so the other bits may be
// anything. `kIndexByte` is the byte of the dword that holds the index: 0 for vpermps, 2 for vpermw (the
// index of the dword's high word).
constexpr std::array<uint8_t, 64> MultishiftControl(bool low_first, int index_byte) {
  std::array<uint8_t, 64> control{};
  for (int d = 0; d < 16; ++d) {
    const int nibble = low_first ? d : (d ^ 1);
    control[static_cast<size_t>(4 * d + index_byte)] = static_cast<uint8_t>(4 * nibble);
  }
  return control;
}
alignas(64) constexpr std::array<uint8_t, 64> kPermpsControl[2] = {MultishiftControl(false, 0),
                                                                    MultishiftControl(true, 0)};
alignas(64) constexpr std::array<uint8_t, 64> kPermwControl[2] = {MultishiftControl(false, 2),
                                                                   MultishiftControl(true, 2)};

// 16 weights from the 8 bytes at `bytes` through the 32-block's table (see Fp4Tile).
template <bool kWordTable>
__attribute__((target("avx512vbmi"))) inline __m512 Fp4Lookup(const uint8_t* bytes, __m512i control, __m512i table) {
  long long packed;
  std::memcpy(&packed, bytes, 8);
  const __m512i index = _mm512_multishift_epi64_epi8(control, _mm512_set1_epi64(packed));
  if constexpr (kWordTable) {
    return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, index, table));
  } else {
    return _mm512_permutexvar_ps(index, _mm512_castsi512_ps(table));
  }
}

// The canonical dots of MR rows of x with NR MXFP4 weight rows. kWordTable: the 32-block's table is built
// in the bf16 domain by an exponent add and read by vpermw into each dword's high half (scales must lie in
// [kE2M1Bf16ScaleMin, kE2M1Bf16ScaleMax]); otherwise it is the fp32 table value · scale read by vpermps, which is
// exact for every scale (it rounds as the generic kernel does).
template <int MR, int NR, bool kWordTable>
__attribute__((target("avx512vbmi"))) inline void Fp4Tile(const LinearTask& t, const uint8_t* const* rows,
                                                           const uint8_t* const* scales, int64_t in,
                                                           int64_t prefetch, __m512i control, float* dots) {
  const __m512 values = _mm512_loadu_ps(number_tables::kE2M1.data());
  const float* e8m0 = number_tables::kE8M0.data();
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < in; k += 32) {
    const int64_t byte = k / 2;
    __m512 wv[NR][2];
    for (int j = 0; j < NR; ++j) {
      if (byte % 64 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(rows[j] + byte + prefetch), kPrefetchHint);
      }
      const uint8_t e = scales[j][k / 32];
      __m512i table;
      if constexpr (kWordTable) {
        table = E2M1Bf16Table(e);
      } else {
        table = _mm512_castps_si512(_mm512_mul_ps(values, _mm512_set1_ps(e8m0[e])));
      }
      wv[j][0] = Fp4Lookup<kWordTable>(rows[j] + byte, control, table);
      wv[j][1] = Fp4Lookup<kWordTable>(rows[j] + byte + 8, control, table);
    }
    for (int s = 0; s < 2; ++s) {
      for (int i = 0; i < MR; ++i) {
        const __m512 xv = _mm512_loadu_ps(t.x + i * t.x_stride + k + 16 * s);
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j][s], acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) dots[i * NR + j] = V::Reduce(acc[i][j]);
}

// Whether every scale byte of the tile's rows lies in [kE2M1Bf16ScaleMin, kE2M1Bf16ScaleMax].
inline bool ScalesFitWordTable(const uint8_t* const* scales, int nr, int64_t count) {
  const __m512i low = _mm512_set1_epi8(static_cast<char>(kE2M1Bf16ScaleMin));
  const __m512i high = _mm512_set1_epi8(static_cast<char>(kE2M1Bf16ScaleMax));
  for (int j = 0; j < nr; ++j) {
    for (int64_t b = 0; b < count; b += 64) {
      const int64_t n = count - b < 64 ? count - b : 64;
      const __mmask64 lanes = n == 64 ? ~__mmask64{0} : ((__mmask64{1} << n) - 1);
      const __m512i v = _mm512_maskz_loadu_epi8(lanes, scales[j] + b);
      if ((_mm512_mask_cmplt_epu8_mask(lanes, v, low) | _mm512_mask_cmpgt_epu8_mask(lanes, v, high)) != 0) {
        return false;
      }
    }
  }
  return true;
}

template <int MR, int NR>
__attribute__((target("avx512vbmi"))) void Fp4Gemv(const LinearTask& t, int64_t n_begin, int64_t n_end) {
  const WeightView& w = *t.w;
  const int64_t in = w.in_features;
  const int64_t row_bytes = in / 2, scale_bytes = in / 32;
  const auto* data = static_cast<const uint8_t*>(w.data);
  const auto* scale_base = static_cast<const uint8_t*>(w.scales);
  const int order = w.nibble_order == NibbleOrder::kLowFirst ? 1 : 0;
  const __m512i permw_control = _mm512_load_si512(kPermwControl[order].data());
  const __m512i permps_control = _mm512_load_si512(kPermpsControl[order].data());
  const int64_t tile_bytes = NR * row_bytes;
  const int64_t tiles_ahead = (kPrefetchBytes + tile_bytes - 1) / tile_bytes;
  const int64_t prefetch = tiles_ahead * tile_bytes;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += NR) {
    const int valid_n = static_cast<int>(n_end - n0 < NR ? n_end - n0 : NR);
    const uint8_t* rows[NR];
    const uint8_t* scales[NR];
    for (int j = 0; j < NR; ++j) {
      const int64_t n = j < valid_n ? n0 + j : n_end - 1;
      rows[j] = data + n * row_bytes;
      scales[j] = scale_base + n * scale_bytes;
    }
    // The scales of the tile being prefetched: NR rows of scales, contiguous.
    const uint8_t* ahead = scale_base + (n0 + tiles_ahead * NR) * scale_bytes;
    for (int64_t b = 0; b < NR * scale_bytes; b += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + b), kPrefetchHint);
    }
    float dots[MR * NR];
    if (ScalesFitWordTable(scales, NR, scale_bytes)) {
      Fp4Tile<MR, NR, true>(t, rows, scales, in, prefetch, permw_control, dots);
    } else {
      Fp4Tile<MR, NR, false>(t, rows, scales, in, prefetch, permps_control, dots);
    }
    StoreOutputs(t, MR, valid_n, n0, dots, NR);
  }
}

template <int MR>
void RunRows(const LinearTask& t, int64_t n_begin, int64_t n_end, LinearRangeFn fallback) {
  // Tiles: 4 weight rows up to m = 4 (16 accumulators at most), 2 beyond.
  constexpr int NR = MR <= 4 ? 4 : 2;
  if (t.w->format == WeightFormat::kFP8Block) {
    Fp8Gemv<MR, NR>(t, n_begin, n_end, fallback);
  } else {
    Fp4Gemv<MR, NR>(t, n_begin, n_end);
  }
}

}  // namespace

bool LinearGemvAvx512(const LinearTask& t, int64_t n_begin, int64_t n_end, LinearRangeFn fallback) {
  if (t.m < 1 || t.m > kMaxRows) return false;
  const WeightView& w = *t.w;
  if (w.format == WeightFormat::kFP8Block) {
    // Subnormal FMA inputs must be honoured: the shift decode's weights, and prescaled x of either decode.
    if (DenormalsAreZero()) return false;
  } else if (w.format == WeightFormat::kMXFP4) {
    if (!HasVbmi()) return false;
  } else {
    return false;
  }
  switch (t.m) {
    case 1:
      RunRows<1>(t, n_begin, n_end, fallback);
      break;
    case 2:
      RunRows<2>(t, n_begin, n_end, fallback);
      break;
    case 3:
      RunRows<3>(t, n_begin, n_end, fallback);
      break;
    case 4:
      RunRows<4>(t, n_begin, n_end, fallback);
      break;
    case 5:
      RunRows<5>(t, n_begin, n_end, fallback);
      break;
    case 6:
      RunRows<6>(t, n_begin, n_end, fallback);
      break;
    case 7:
      RunRows<7>(t, n_begin, n_end, fallback);
      break;
    default:
      RunRows<8>(t, n_begin, n_end, fallback);
      break;
  }
  return true;
}

}  // namespace deepinfer::kernels::cpu
