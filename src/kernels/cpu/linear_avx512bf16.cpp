// Linear with LinearPrecision::kBf16Activations on AVX512_BF16: weights decoded to bf16 (exactly: the
// dispatcher sends only formats whose dequantised values bf16 represents) and x pre-rounded to bf16 by the
// dispatcher, multiplied with vdpbf16ps. Lane j of an output's accumulator takes the pairs (32c + 2j,
// 32c + 2j + 1) of each 32-element chunk c in order; the lanes are then reduced as in the exact kernels.
// Each output depends only on its own row, so the result is batch invariant.
#include <cstring>

#include "kernels/cpu/avx512_ops.h"
#include "kernels/cpu/linear_kernels.h"
#include "kernels/cpu/linear_scratch.h"

namespace deepinfer::kernels::cpu {
namespace {

constexpr int64_t kChunk = 32;

// vpshufb control: qword q of each 128-bit lane (qword 2l + q of the register) gets bytes 2(2l+q) and
// 2(2l+q)+1 of the lane's 16 bytes in each of its four words.
struct PairSpread {
  alignas(64) uint8_t control[64];
  constexpr PairSpread() : control() {
    for (int b = 0; b < 64; ++b) {
      const int qword = b / 8;  // of the register
      control[b] = static_cast<uint8_t>(2 * qword + (b % 2));
    }
  }
};
alignas(64) constexpr PairSpread kPairSpreadTable;
constexpr const uint8_t* kPairSpread = kPairSpreadTable.control;
// Per-word right shifts selecting nibble i (low-first) or nibble i ^ 1 (high-first) of a qword's pair.
alignas(64) constexpr uint16_t kLowFirstShifts[32] = {0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12,
                                                      0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12};
alignas(64) constexpr uint16_t kHighFirstShifts[32] = {4, 0, 12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0, 12, 8,
                                                       4, 0, 12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0, 12, 8};

inline __m512bh ToBf16(__m512 lo, __m512 hi) { return _mm512_cvtne2ps_pbh(hi, lo); }

// Weight rows as bf16 chunks of 32; rows[j] may repeat (tile padding).
template <int NR, WeightFormat kFormat>
struct Bf16Chunks {
  const WeightView* w;
  int64_t rows[NR];
  const uint8_t* data[NR];
  const uint8_t* scales[NR];
  int block_shift = -1;  // FP8: log2(block_in) when a power of two ≥ 32
  bool low_first = true;

  Bf16Chunks(const WeightView& weights, const int64_t* row_indices) : w(&weights) {
    low_first = weights.nibble_order == NibbleOrder::kLowFirst;
    if (weights.format == WeightFormat::kFP8Block && weights.block_in >= kChunk &&
        (weights.block_in & (weights.block_in - 1)) == 0) {
      block_shift = 0;
      while ((int64_t{1} << block_shift) < weights.block_in) ++block_shift;
    }
    const int64_t in = weights.in_features;
    const int64_t fp8_scale_cols = (in + weights.block_in - 1) / weights.block_in;
    for (int j = 0; j < NR; ++j) {
      const int64_t n = rows[j] = row_indices[j];
      const uint8_t* base = static_cast<const uint8_t*>(weights.data);
      switch (weights.format) {
        case WeightFormat::kBF16:
          data[j] = base + n * in * 2;
          scales[j] = nullptr;
          break;
        case WeightFormat::kFP8Block:
          data[j] = base + n * in;
          scales[j] = static_cast<const uint8_t*>(weights.scales) + (n / weights.block_out) * fp8_scale_cols;
          break;
        case WeightFormat::kMXFP4:
          data[j] = base + n * (in / 2);
          scales[j] = static_cast<const uint8_t*>(weights.scales) + n * (in / 32);
          break;
        case WeightFormat::kF32:
          data[j] = base + n * in * 4;
          scales[j] = nullptr;
          break;
      }
    }
  }

  // Chunk [k, k + 32) of row j, k a multiple of 32 with k + 32 ≤ in.
  __m512bh Load(int j, int64_t k) const {
    switch (kFormat) {
      case WeightFormat::kBF16:
        return reinterpret_cast<__m512bh>(_mm512_loadu_si512(data[j] + k * 2));
      case WeightFormat::kMXFP4: {
        const uint8_t e = scales[j][k / 32];
        if (e >= kE2M1Bf16ScaleMin && e <= kE2M1Bf16ScaleMax) {
          // Word i of qword q is weight 4q + i: the 16 bytes go to every 128-bit lane, each qword gets
          // its two bytes in every word, and a per-word shift brings the word's nibble to bits 0..3, which
          // (with one garbage bit, hence the doubled table) index vpermw's table of bf16(value · scale).
          const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data[j] + k / 2));
          const __m512i spread = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(packed), _mm512_load_si512(kPairSpread));
          const __m512i shifts = _mm512_load_si512(low_first ? kLowFirstShifts : kHighFirstShifts);
          const __m512i index = _mm512_srlv_epi16(spread, shifts);
          return reinterpret_cast<__m512bh>(_mm512_permutexvar_epi16(index, E2M1Bf16Table(e)));
        }
        __m512 v[2];
        V::DecodeFp4(data[j] + k / 2, V::MakeFp4Table(E8M0ToFloat(e)), low_first, v);
        return ToBf16(v[0], v[1]);
      }
      case WeightFormat::kFP8Block:
        if (block_shift >= 0) {
          // E8M0 scales are powers of two, so value · scale is exact whichever way it is formed.
          const __m512 scale = _mm512_set1_ps(E8M0ToFloat(scales[j][k >> block_shift]));
          const __m512 unit = _mm512_set1_ps(256.0f);
          return ToBf16(_mm512_mul_ps(V::DecodeE4M3(data[j] + k, unit), scale),
                        _mm512_mul_ps(V::DecodeE4M3(data[j] + k + 16, unit), scale));
        }
        [[fallthrough]];
      default: {
        alignas(64) float tmp[kChunk];
        DecodeWeightRow(*w, rows[j], k, k + kChunk, tmp);
        return ToBf16(_mm512_load_ps(tmp), _mm512_load_ps(tmp + 16));
      }
    }
  }

  // The zero-padded last partial chunk starting at k.
  __m512bh Tail(int j, int64_t k) const {
    alignas(64) float tmp[kChunk] = {};
    DecodeWeightRow(*w, rows[j], k, w->in_features, tmp);
    return ToBf16(_mm512_load_ps(tmp), _mm512_load_ps(tmp + 16));
  }
};

// Rows of bf16 weights already decoded into a panel, `stride` elements apart, zero-padded to 32.
struct PanelChunks {
  const uint16_t* panel;
  int64_t stride;
  __m512bh Load(int j, int64_t k) const {
    return reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel + j * stride + k));
  }
  __m512bh Tail(int j, int64_t k) const { return Load(j, k); }
};

template <int MR, int NR, class Source>
inline void MicroKernel(const uint16_t* const* x, const Source& src, int64_t in, float* const* y, int64_t y_col,
                        int valid_m, int valid_n, bool accumulate, const int64_t* cols = nullptr) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  const int64_t full = in / kChunk * kChunk;
  auto step = [&](int64_t k, const __m512bh* wv) {
    for (int i = 0; i < MR; ++i) {
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(x[i] + k));
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  };
  for (int64_t k = 0; k < full; k += kChunk) {
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = src.Load(j, k);
    step(k, wv);
  }
  if (full < in) {  // x rows are zero-padded to a multiple of 32 by the dispatcher
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = src.Tail(j, full);
    step(full, wv);
  }
  for (int i = 0; i < valid_m; ++i) {
    for (int j = 0; j < (cols ? NR : valid_n); ++j) {
      if (cols && cols[j] < 0) continue;  // a padding row
      const float dot = V::Reduce(acc[i][j]);
      float& out = y[i][cols ? cols[j] : y_col + j];
      out = accumulate ? out + dot : dot;
    }
  }
}

// MicroKernel for a full 4-wide tile of a panel: the panel and the x rows are both zero-padded to whole
// chunks, so the tail chunk is one more step of the loop, and each row's four dots are reduced and stored
// together (V::Reduce4Store: the same additions), keeping the per-tile work outside the loop small.
template <int MR>
inline void PanelKernelN4(const uint16_t* const* x, const uint16_t* panel, int64_t stride, float* const* y,
                          int64_t y_col, int valid_m, bool accumulate) {
  __m512 acc[MR][4];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < stride; k += kChunk) {
    __m512bh wv[4];
    for (int j = 0; j < 4; ++j) wv[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel + j * stride + k));
    for (int i = 0; i < MR; ++i) {
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(x[i] + k));
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    if (i < valid_m) V::Reduce4Store(acc[i][0], acc[i][1], acc[i][2], acc[i][3], y[i] + y_col, accumulate);
  }
}

template <int NR>
void RowIndices(int64_t n0, int64_t n_end, int64_t* rows) {
  for (int j = 0; j < NR; ++j) rows[j] = n0 + j < n_end ? n0 + j : n_end - 1;
}

template <int MR, int NR, WeightFormat kFormat>
void DirectPath(const LinearTask& t, int64_t n_begin, int64_t n_end) {
  const uint16_t* x[MR];
  float* y[MR];
  for (int i = 0; i < MR; ++i) {
    x[i] = t.x_bf16 + i * t.x_bf16_stride;
    y[i] = t.y + i * t.y_stride;
  }
  const int64_t stretch = DecodeStretch(n_begin, n_end, NR);  // tiles from separate stretches
  for (int64_t s = 0; s < stretch; ++s) {
    int64_t rows[NR], cols[NR];
    StretchTile<NR>(n_begin, n_end, stretch, s, rows, cols);
    const Bf16Chunks<NR, kFormat> src(*t.w, rows);
    MicroKernel<MR, NR>(x, src, t.w->in_features, y, 0, MR, NR, t.accumulate, cols);
  }
}

// As the exact kernels' panel path: an L2-sized block of weight rows decoded to bf16 once, every tile of
// x rows run across it.
template <WeightFormat kFormat>
void PanelPath(const LinearTask& t, int64_t n_begin, int64_t n_end) {
  constexpr int MR = 4, NR = 4;
  const int64_t in = t.w->in_features;
  const int64_t stride = (in + kChunk - 1) / kChunk * kChunk;
  int64_t block_n = (int64_t{384} * 1024 / 2) / stride;
  block_n = block_n < NR ? NR : block_n / NR * NR;
  uint16_t* panel = reinterpret_cast<uint16_t*>(ThreadScratch(static_cast<size_t>(block_n * stride / 2)));
  const int64_t full = in / kChunk * kChunk;
  for (int64_t nb = n_begin; nb < n_end; nb += block_n) {
    const int64_t nb_end = nb + block_n < n_end ? nb + block_n : n_end;
    for (int64_t n0 = nb; n0 < nb_end; n0 += NR) {
      int64_t rows[NR];
      RowIndices<NR>(n0, nb_end, rows);
      const Bf16Chunks<NR, kFormat> src(*t.w, rows);
      for (int j = 0; j < NR; ++j) {
        uint16_t* dst = panel + (n0 - nb + j) * stride;
        for (int64_t k = 0; k < full; k += kChunk) {
          _mm512_storeu_si512(dst + k, reinterpret_cast<__m512i>(src.Load(j, k)));
        }
        if (full < in) _mm512_storeu_si512(dst + full, reinterpret_cast<__m512i>(src.Tail(j, full)));
      }
    }
    for (int64_t i0 = 0; i0 < t.m; i0 += MR) {
      const uint16_t* x[MR];
      float* y[MR];
      for (int i = 0; i < MR; ++i) {
        const int64_t row = i0 + i < t.m ? i0 + i : t.m - 1;
        x[i] = t.x_bf16 + row * t.x_bf16_stride;
        y[i] = t.y + row * t.y_stride;
      }
      const int valid_m = static_cast<int>(t.m - i0 < MR ? t.m - i0 : MR);
      for (int64_t n0 = nb; n0 < nb_end; n0 += NR) {
        const int valid_n = static_cast<int>(nb_end - n0 < NR ? nb_end - n0 : NR);
        if (valid_n == NR) {
          // A last tile of fewer rows runs only those (m is often not a multiple of MR: expert batches).
          const uint16_t* rows_panel = panel + (n0 - nb) * stride;
          switch (valid_m) {
            case 1:
              PanelKernelN4<1>(x, rows_panel, stride, y, n0, 1, t.accumulate);
              break;
            case 2:
              PanelKernelN4<2>(x, rows_panel, stride, y, n0, 2, t.accumulate);
              break;
            case 3:
              PanelKernelN4<3>(x, rows_panel, stride, y, n0, 3, t.accumulate);
              break;
            default:
              PanelKernelN4<MR>(x, rows_panel, stride, y, n0, valid_m, t.accumulate);
          }
          continue;
        }
        const PanelChunks panel_src{panel + (n0 - nb) * stride, stride};
        MicroKernel<MR, NR>(x, panel_src, in, y, n0, valid_m, valid_n, t.accumulate);
      }
    }
  }
}

// The most rows of x run as direct-path groups of 4. Each group decodes its weight chunks again: BF16
// chunks are loaded as they are, MXFP4's table lookup is cheap enough for two groups, while FP8's decode (and
// the portable decoder's for F32) costs more than the panel path's single decode and write-back.
template <WeightFormat kFormat>
constexpr int kGroupedRows = kFormat == WeightFormat::kBF16    ? V::kDirectGroupedRows
                             : kFormat == WeightFormat::kMXFP4 ? 8
                                                               : 4;

// The weight format is a template parameter so that the chunk decode has no per-chunk branch.
template <WeightFormat kFormat>
void RunFormat(const LinearTask& task, int64_t n_begin, int64_t n_end) {
  switch (task.m) {
    case 1:
      return DirectPath<1, 4, kFormat>(task, n_begin, n_end);
    case 2:
      return DirectPath<2, 4, kFormat>(task, n_begin, n_end);
    case 3:
      return DirectPath<3, 4, kFormat>(task, n_begin, n_end);
    case 4:
      return DirectPath<4, 4, kFormat>(task, n_begin, n_end);
    default:
      break;
  }
  // Up to kGroupedRows<kFormat> rows (a verify step of one sequence, a small decode batch) the direct path
  // runs on groups of 4 rows over blocks of about 256 KiB of weights, so that the later groups read the
  // block from cache: no panel is written and read back, which at these sizes costs more than the
  // products (each output is computed the same way on either path).
  if (task.m <= kGroupedRows<kFormat>) {
    const int64_t in = task.w->in_features > 0 ? task.w->in_features : 1;
    const int64_t block = (int64_t{256} * 1024) / (4 * in) > 64 ? (int64_t{256} * 1024) / (4 * in) : 64;
    LinearTask group = task;
    for (int64_t nb = n_begin; nb < n_end; nb += block) {
      const int64_t nb_end = nb + block < n_end ? nb + block : n_end;
      for (int64_t i0 = 0; i0 < task.m; i0 += 4) {
        group.x_bf16 = task.x_bf16 + i0 * task.x_bf16_stride;
        group.y = task.y + i0 * task.y_stride;
        group.m = task.m - i0 < 4 ? task.m - i0 : 4;
        RunFormat<kFormat>(group, nb, nb_end);
      }
    }
    return;
  }
  PanelPath<kFormat>(task, n_begin, n_end);
}

}  // namespace

void LinearRangeAvx512Bf16(const LinearTask& task, int64_t n_begin, int64_t n_end) {
  switch (task.w->format) {
    case WeightFormat::kBF16:
      return RunFormat<WeightFormat::kBF16>(task, n_begin, n_end);
    case WeightFormat::kFP8Block:
      return RunFormat<WeightFormat::kFP8Block>(task, n_begin, n_end);
    case WeightFormat::kMXFP4:
      return RunFormat<WeightFormat::kMXFP4>(task, n_begin, n_end);
    case WeightFormat::kF32:
      return RunFormat<WeightFormat::kF32>(task, n_begin, n_end);
  }
}

}  // namespace deepinfer::kernels::cpu
