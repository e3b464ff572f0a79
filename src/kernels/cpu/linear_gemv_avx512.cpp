// Decode-sized Linear (m ≤ 8 rows of x) over FP8-block and MXFP4 weights on AVX-512, with the fewest vector
// operations per weight: at m = 1 the product is bound by decoding, not by memory, so every operation
// counts. Results are bit-identical to the generic kernels (linear_vector_impl.h), which this falls back to
// wherever a shortcut's precondition fails.
//
// FP8 (scales that are powers of two: UE8M0, or fp32 scales that happen to be): an E4M3 byte b becomes
// the fp32 bit pattern sign(b) << 31 | (b & 0x7F) << 20, which is exactly value(b) · 2^-120, in three
// integer operations. E4M3 subnormals land on fp32 subnormals: Zen 4's FMA takes them at full speed, but
// Intel cores take a microcode assist for each FMA with a subnormal input, so there a weight with many
// subnormal codes decodes many times slower (the bench presets' random weights have none).
// The block scale s and the 2^120 move onto x instead: xs = x · (s · 2^120) once per block of weight rows.
// When xs is exact (checked: no overflow, no underflow) x·(q·s) and xs·(q·2^-120) are the same real
// product, and an FMA rounds that product with the accumulator once, so the result is bit-identical.
// NaN codes (0x7F, 0xFF) do not decode to NaN this way; they are detected as the bytes stream by, and a
// tile that holds one is recomputed by the generic kernel (which makes exactly those outputs NaN), unless
// the weight is marked fp8_nan_free (checked once by its owner), which saves the two operations per 64
// bytes the watch costs (about 15% of the decode at m = 1).
// Where AVX512_VBMI and GFNI are present the same patterns come from a bit-matrix shuffle and byte permutes
// instead (DecodeE4M3Scaled32: fewer operations per weight, same bits).
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

// s · 2^120 for a block scale s that is a power of two in [2^-127, 2^7] (so the product stays a normal
// fp32 number and q · s is exact for every E4M3 q); false otherwise.
bool Fp8PrescaleFactor(const WeightView& w, int64_t block, float* factor) {
  float s;
  if (w.scale_format == ScaleFormat::kUE8M0) {
    s = E8M0ToFloat(static_cast<const uint8_t*>(w.scales)[block]);
  } else {
    std::memcpy(&s, static_cast<const uint8_t*>(w.scales) + block * 4, 4);
  }
  int exponent = 0;
  const float mantissa = std::frexp(s, &exponent);  // |s| = 2^(exponent-1) when |mantissa| = 0.5
  if (std::fabs(mantissa) != 0.5f || exponent - 1 < -127 || exponent - 1 > 7) return false;
  *factor = std::ldexp(s, 120);
  return true;
}

// xs[i][k] = x[i][k] · factor(k) for the weight block row `block_row`, each row `stride` floats and
// zero-padded past in_features. False when a factor or a product is not exact (the caller then uses the
// generic kernel for these weight rows).
bool PrescaleX(const LinearTask& t, int64_t block_row, float* xs, int64_t stride) {
  const WeightView& w = *t.w;
  const int64_t in = w.in_features;
  const int64_t blocks = (in + w.block_in - 1) / w.block_in;
  __mmask16 inexact = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    float factor;
    if (!Fp8PrescaleFactor(w, block_row * blocks + b, &factor)) return false;
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

// 16 E4M3 bytes -> value · 2^-120 as fp32 bit patterns.
inline __m512 DecodeE4M3Scaled(__m128i bytes) {
  const __m512i sign_extended = _mm512_cvtepi8_epi32(bytes);
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_slli_epi32(sign_extended, 20), _mm512_set1_epi32(static_cast<int>(0x87F00000u))));
}

// The same patterns for 32 weights at a time with one bit shuffle and two byte permutes. Of the pattern
// sign(b) << 31 | (b & 0x7F) << 20 only bytes 2 and 3 are nonzero: byte 3 is b's bits 7, 6, 5, 4 in bits 7, 2,
// 1, 0 and byte 2 is b << 4. One vgf2p8affineqb (an 8×8 bit matrix per qword) makes both from 32 bytes
// broadcast to both halves of a register (byte 2's matrix in the low half, byte 3's in the high half), and a
// zero-masking vpermb per 16 weights moves them into place: two and a half vector operations per 16 weights
// at m = 1 instead of four (the sign extension, shift and mask above), where at m = 1 the decode, not the
// FMA, bounds the product. The broadcast is a plain load (no shuffle port), and neither permute overwrites
// its operands, so the bytes need no copies.

// The gf2p8affine matrix that copies input bit source[i] to output bit i (source[i] < 0: bit i is 0). Row i
// of the matrix is byte 7 - i of the qword.
constexpr uint64_t BitMatrix(const int (&source)[8]) {
  uint64_t matrix = 0;
  for (int i = 0; i < 8; ++i) {
    if (source[i] >= 0) matrix |= uint64_t{1} << source[i] << (8 * (7 - i));
  }
  return matrix;
}
constexpr uint64_t kE4M3Byte2 = BitMatrix({-1, -1, -1, -1, 0, 1, 2, 3});  // b << 4
constexpr uint64_t kE4M3Byte3 = BitMatrix({4, 5, 6, -1, -1, -1, -1, 7});  // exponent bits 3..1, sign
static_assert(kE4M3Byte2 == 0x0000000001020408u && kE4M3Byte3 == 0x1020400000000080u);

// vpermb indices: dword d of half h takes byte 2 from byte 16h + d of the low (byte-2) half and byte 3 from
// byte 32 + 16h + d of the high half; bytes 0 and 1 are zeroed by kE4M3ByteMask.
constexpr std::array<uint8_t, 64> E4M3PermuteIndex(int half) {
  std::array<uint8_t, 64> index{};
  for (int d = 0; d < 16; ++d) {
    index[static_cast<size_t>(4 * d + 2)] = static_cast<uint8_t>(16 * half + d);
    index[static_cast<size_t>(4 * d + 3)] = static_cast<uint8_t>(32 + 16 * half + d);
  }
  return index;
}
alignas(64) constexpr std::array<uint8_t, 64> kE4M3PermuteIndex[2] = {E4M3PermuteIndex(0), E4M3PermuteIndex(1)};
constexpr __mmask64 kE4M3ByteMask = 0xCCCCCCCCCCCCCCCCu;

struct E4M3ByteShuffle {
  __m512i matrices, index0, index1;
};

__attribute__((target("avx512vbmi,gfni"))) inline E4M3ByteShuffle LoadE4M3ByteShuffle() {
  const auto byte2 = static_cast<long long>(kE4M3Byte2), byte3 = static_cast<long long>(kE4M3Byte3);
  return {_mm512_set_epi64(byte3, byte3, byte3, byte3, byte2, byte2, byte2, byte2),
          _mm512_load_si512(kE4M3PermuteIndex[0].data()), _mm512_load_si512(kE4M3PermuteIndex[1].data())};
}

// 32 E4M3 bytes -> two registers of value · 2^-120 as fp32 bit patterns (bytes 0..15, then 16..31).
__attribute__((target("avx512vbmi,gfni"))) inline void DecodeE4M3Scaled32(const uint8_t* bytes,
                                                                          const E4M3ByteShuffle& shuffle,
                                                                          __m512* low, __m512* high) {
  const __m512i both = _mm512_gf2p8affine_epi64_epi8(
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes))), shuffle.matrices, 0);
  *low = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi8(kE4M3ByteMask, shuffle.index0, both));
  *high = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi8(kE4M3ByteMask, shuffle.index1, both));
}

// Lanes of 64 bytes that are E4M3 NaN codes.
inline __mmask64 NanCodes(__m512i bytes) {
  return _mm512_cmpeq_epi8_mask(_mm512_or_si512(bytes, _mm512_set1_epi8(static_cast<char>(0x80))),
                                _mm512_set1_epi8(static_cast<char>(0xFF)));
}

// The accumulators of MR prescaled x rows with NR FP8 weight rows, and the parts of a tile that do not
// depend on how the main 64-byte steps decode (inlined into either decode's tile).
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
  __attribute__((always_inline)) void Step(const float* xs, int64_t xs_stride, int64_t k, const __m512* wv) {
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_loadu_ps(xs + i * xs_stride + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  // The inputs past the last whole 64 bytes, 16 at a time, zero-padded as the generic kernel pads its tail;
  // then the dots, or false if a NaN code was seen (watched for unless kNanFree).
  __attribute__((always_inline)) bool Finish(const float* xs, int64_t xs_stride, const uint8_t* const* rows,
                                             int64_t in, float* dots) {
    for (int64_t k = in / 64 * 64; k < in; k += kLanes) {
      const int64_t n = in - k < kLanes ? in - k : kLanes;
      const __mmask16 lanes = static_cast<__mmask16>((1u << n) - 1);
      __m512 wv[NR];
      for (int j = 0; j < NR; ++j) {
        const __m128i bytes = _mm_maskz_loadu_epi8(lanes, rows[j] + k);
        if constexpr (!kNanFree) nan |= NanCodes(_mm512_zextsi128_si512(bytes)) & lanes;
        wv[j] = DecodeE4M3Scaled(bytes);
      }
      Step(xs, xs_stride, k, wv);
    }
    if (nan != 0) return false;
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) dots[i * NR + j] = V::Reduce(acc[i][j]);
    return true;
  }
};

// The canonical dots of MR prescaled x rows with NR FP8 weight rows, decoded by DecodeE4M3Scaled; false if
// a NaN code was seen (watched for unless kNanFree).
template <int MR, int NR, bool kNanFree>
bool Fp8Tile(const float* xs, int64_t xs_stride, const uint8_t* const* rows, int64_t in, int64_t prefetch,
             float* dots) {
  Fp8Accumulators<MR, NR, kNanFree> tile;
  for (int64_t k = 0; k < in / 64 * 64; k += 64) {
    tile.Begin64(rows, k, prefetch);
    for (int s = 0; s < 64; s += 16) {
      __m512 wv[NR];
      for (int j = 0; j < NR; ++j) {
        wv[j] = DecodeE4M3Scaled(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j] + k + s)));
      }
      tile.Step(xs, xs_stride, k + s, wv);
    }
  }
  return tile.Finish(xs, xs_stride, rows, in, dots);
}

// The same, decoded by DecodeE4M3Scaled32 (needs AVX512_VBMI and GFNI).
template <int MR, int NR, bool kNanFree>
__attribute__((target("avx512vbmi,gfni"))) bool Fp8TileByteShuffle(const float* xs, int64_t xs_stride,
                                                                    const uint8_t* const* rows, int64_t in,
                                                                    int64_t prefetch, float* dots) {
  Fp8Accumulators<MR, NR, kNanFree> tile;
  const E4M3ByteShuffle shuffle = LoadE4M3ByteShuffle();
  for (int64_t k = 0; k < in / 64 * 64; k += 64) {
    tile.Begin64(rows, k, prefetch);
    for (int s = 0; s < 64; s += 32) {
      __m512 low[NR], high[NR];
      for (int j = 0; j < NR; ++j) DecodeE4M3Scaled32(rows[j] + k + s, shuffle, &low[j], &high[j]);
      tile.Step(xs, xs_stride, k + s, low);
      tile.Step(xs, xs_stride, k + s + 16, high);
    }
  }
  return tile.Finish(xs, xs_stride, rows, in, dots);
}

bool HasVbmiAndGfni() {
  static const bool has = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("gfni");
  return has;
}

template <int MR, int NR, bool kNanFree>
void Fp8Rows(const LinearTask& t, int64_t n_begin, int64_t n_end, const float* xs, int64_t xs_stride,
             LinearRangeFn fallback) {
  const WeightView& w = *t.w;
  const int64_t in = w.in_features;
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t tile_bytes = NR * in;
  const int64_t prefetch = (kPrefetchBytes + tile_bytes - 1) / tile_bytes * tile_bytes;
  const bool byte_shuffle = HasVbmiAndGfni();
  for (int64_t n0 = n_begin; n0 < n_end; n0 += NR) {
    const int valid_n = static_cast<int>(n_end - n0 < NR ? n_end - n0 : NR);
    const uint8_t* rows[NR];
    for (int j = 0; j < NR; ++j) rows[j] = base + (j < valid_n ? n0 + j : n_end - 1) * in;
    float dots[MR * NR];
    const bool finite = byte_shuffle ? Fp8TileByteShuffle<MR, NR, kNanFree>(xs, xs_stride, rows, in, prefetch, dots)
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
  for (int64_t block_begin = n_begin; block_begin < n_end;) {
    const int64_t block_row = block_begin / w.block_out;
    const int64_t block_end = (block_row + 1) * w.block_out < n_end ? (block_row + 1) * w.block_out : n_end;
    if (PrescaleX(t, block_row, xs, stride)) {
      if (w.fp8_nan_free) {
        Fp8Rows<MR, NR, true>(t, block_begin, block_end, xs, stride, fallback);
      } else {
        Fp8Rows<MR, NR, false>(t, block_begin, block_end, xs, stride, fallback);
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

bool HasVbmi() {
  static const bool has = __builtin_cpu_supports("avx512vbmi");
  return has;
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
    if (DenormalsAreZero()) return false;  // the decode relies on subnormal FMA inputs
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
