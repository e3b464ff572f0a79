// Internal: the vector Linear, written once over a 16-lane register type and instantiated per ISA.
//
// Include this from an ISA's translation unit after defining, in an anonymous namespace, `struct V` with:
//   using Reg;                                  16 fp32 lanes (one zmm, or two ymm)
//   Reg Zero(); Reg Load(const float*); Reg Set1(float); Reg Mul(Reg, Reg); Reg Fma(Reg a, Reg b, Reg c);
//   float Reduce(Reg)                           lanes summed by halving: j+8, j+4, j+2, j+1 (linear.h)
//   Reg LoadBf16(const uint16_t*)               16 bf16 -> fp32
//   Reg DecodeE4M3(const uint8_t*, Reg factor)  16 E4M3 bytes -> (value · 2^-8) · factor, NaN codes NaN
//   void Store(float*, Reg)
//   constexpr int kDirectNr1, kDirectNr         weight rows per tile of the direct path (m = 1, m = 2..4)
//   constexpr int kDirectGroupedRows            the largest m run as direct-path groups of 4 rows (4: none)
//   using Fp4Table; Fp4Table MakeFp4Table(float scale);
//   void DecodeFp4(const uint8_t* bytes16, const Fp4Table&, bool low_first, Reg out[2])   32 E2M1 values
//   constexpr int kPanelMr, kPanelNr            register tile of the batched (panel) path
// Everything here has internal linkage so that the per-ISA copies never merge at link time.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/linear_kernels.h"
#include "kernels/cpu/linear_scratch.h"
#include "kernels/number_formats.h"

namespace deepinfer::kernels::cpu {
namespace {

constexpr int64_t kLanes = 16;
constexpr float kTwoTo8 = 256.0f;
// Weight sources prefetch this far ahead of each row's reads, once per 64 bytes read, into L2 (prefetches
// into L1 run out of miss buffers and are dropped). The hardware prefetcher alone ramps up too slowly over
// the several interleaved streams of a tile (measured with bench kernels: decode-sized BF16 products at every
// shape). In the direct path each row lies in a stretch of consecutive rows (StretchTile), so the bytes ahead
// are the ones it reads next; elsewhere a prefetch past what is read costs one load-port operation.
constexpr int64_t kStreamPrefetchBytes = 4096;
inline void PrefetchAhead(const void* p) {
  _mm_prefetch(static_cast<const char*>(p) + kStreamPrefetchBytes, _MM_HINT_T1);
}

// Weight sources: give the fp32 values of rows rows[j] at k .. k + kStep (kStep/16 registers), and the
// zero-padded tail (k .. in) through the portable decoder.
template <int NR>
struct SourceBase {
  const WeightView* w;
  int64_t rows[NR];
  void Tail(int j, int64_t k, float* out16) const {
    std::memset(out16, 0, kLanes * sizeof(float));
    DecodeWeightRow(*w, rows[j], k, w->in_features, out16);
  }
};

template <int NR>
struct F32Source : SourceBase<NR> {
  static constexpr int kStep = 16;
  const float* ptr[NR];
  F32Source(const WeightView& weights, const int64_t* row_indices) {
    this->w = &weights;
    for (int j = 0; j < NR; ++j) {
      this->rows[j] = row_indices[j];
      ptr[j] = static_cast<const float*>(weights.data) + row_indices[j] * weights.in_features;
    }
  }
  int64_t Span() const { return this->w->in_features; }
  void Begin(int64_t) {}
  void Load(int j, int64_t k, V::Reg* out) const {
    PrefetchAhead(ptr[j] + k);
    out[0] = V::Load(ptr[j] + k);
  }
};

template <int NR>
struct Bf16Source : SourceBase<NR> {
  static constexpr int kStep = 16;
  const uint16_t* ptr[NR];
  Bf16Source(const WeightView& weights, const int64_t* row_indices) {
    this->w = &weights;
    for (int j = 0; j < NR; ++j) {
      this->rows[j] = row_indices[j];
      ptr[j] = static_cast<const uint16_t*>(weights.data) + row_indices[j] * weights.in_features;
    }
  }
  int64_t Span() const { return this->w->in_features; }
  void Begin(int64_t) {}
  void Load(int j, int64_t k, V::Reg* out) const {
    if (k % 32 == 0) PrefetchAhead(ptr[j] + k);
    out[0] = V::LoadBf16(ptr[j] + k);
  }
};

template <int NR>
struct Fp8Source : SourceBase<NR> {
  static constexpr int kStep = 16;
  const uint8_t* ptr[NR];
  const uint8_t* scale_row[NR];  // of the row's block row, in bytes (4 per F32 scale)
  bool f32_scales;
  bool aligned_blocks;  // block_in % 16 == 0: one scale per 16 weights
  // The current block's scales, times 2^8 when that stays finite (then one multiply of the decoded
  // value · 2^-8 rounds exactly like value · scale); else `fold_ok` is false and Load multiplies twice.
  float scale[NR], folded[NR];
  bool fold_ok = true;
  Fp8Source(const WeightView& weights, const int64_t* row_indices) {
    this->w = &weights;
    f32_scales = weights.scale_format == ScaleFormat::kF32;
    aligned_blocks = weights.block_in % 16 == 0;
    const int64_t scale_cols = (weights.in_features + weights.block_in - 1) / weights.block_in;
    for (int j = 0; j < NR; ++j) {
      this->rows[j] = row_indices[j];
      ptr[j] = static_cast<const uint8_t*>(weights.data) + row_indices[j] * weights.in_features;
      scale_row[j] = static_cast<const uint8_t*>(weights.scales) +
                     (row_indices[j] / weights.block_out) * scale_cols * (f32_scales ? 4 : 1);
    }
  }
  int64_t Span() const { return aligned_blocks ? this->w->block_in : kLanes; }
  void Begin(int64_t k) {
    if (!aligned_blocks) return;
    const int64_t block = k / this->w->block_in;
    fold_ok = true;
    for (int j = 0; j < NR; ++j) {
      if (f32_scales) {
        std::memcpy(&scale[j], scale_row[j] + block * 4, 4);
      } else {
        scale[j] = E8M0ToFloat(scale_row[j][block]);
      }
      folded[j] = scale[j] * kTwoTo8;
      // Overflow of the folded scale alone would change the product; inf/NaN scales fold consistently.
      if (folded[j] - folded[j] != 0.0f && scale[j] - scale[j] == 0.0f) fold_ok = false;
    }
  }
  void Load(int j, int64_t k, V::Reg* out) const {
    if (!aligned_blocks) {  // a scale boundary may fall inside these 16 weights: decode portably
      alignas(64) float tmp[kLanes];
      DecodeWeightRow(*this->w, this->rows[j], k, k + kLanes, tmp);
      out[0] = V::Load(tmp);
      return;
    }
    if (k % 64 == 0) PrefetchAhead(ptr[j] + k);
    out[0] = fold_ok ? V::DecodeE4M3(ptr[j] + k, V::Set1(folded[j]))
                     : V::Mul(V::DecodeE4M3(ptr[j] + k, V::Set1(kTwoTo8)), V::Set1(scale[j]));
  }
};

template <int NR>
struct Fp4Source : SourceBase<NR> {
  static constexpr int kStep = 32;
  const uint8_t* ptr[NR];
  const uint8_t* scales[NR];
  bool low_first;
  typename V::Fp4Table table[NR];  // the current 32-block's values times its scale
  Fp4Source(const WeightView& weights, const int64_t* row_indices) {
    this->w = &weights;
    low_first = weights.nibble_order == NibbleOrder::kLowFirst;
    for (int j = 0; j < NR; ++j) {
      this->rows[j] = row_indices[j];
      ptr[j] = static_cast<const uint8_t*>(weights.data) + row_indices[j] * (weights.in_features / 2);
      scales[j] = static_cast<const uint8_t*>(weights.scales) + row_indices[j] * (weights.in_features / 32);
    }
  }
  int64_t Span() const { return 32; }
  void Begin(int64_t k) {
    for (int j = 0; j < NR; ++j) table[j] = V::MakeFp4Table(E8M0ToFloat(scales[j][k / 32]));
  }
  // (No prefetch: measured with bench kernels, the decode bounds this source, not the memory.)
  void Load(int j, int64_t k, V::Reg* out) const { V::DecodeFp4(ptr[j] + k / 2, table[j], low_first, out); }
};

// A decoded panel of NR rows, each `stride` floats (≥ in rounded up to 16, zero-padded).
template <int NR>
struct PanelSource {
  static constexpr int kStep = 16;
  const float* panel;
  int64_t stride;
  int64_t Span() const { return stride; }
  void Begin(int64_t) {}
  void Load(int j, int64_t k, V::Reg* out) const { out[0] = V::Load(panel + j * stride + k); }
  void Tail(int j, int64_t k, float* out16) const { std::memcpy(out16, panel + j * stride + k, kLanes * 4); }
};

template <class Vec>
concept HasReduce4 = requires(typename Vec::Reg r) { Vec::Reduce4(r, r, r, r); };

// y[i][j] (+)= canonical dot of x row i with weight row j, for an MR x NR tile; rows beyond `valid_m`
// / columns beyond `valid_n` are computed on duplicates and not stored.
// `cols` (optional) names each column's output index instead of y_col + j; a negative entry is not stored.
// On ISAs with V::Reduce4 each four accumulators are reduced together (the same additions as V::Reduce):
// at decode sizes the in-register reduction is a large share of a tile's work.
template <int MR, int NR, class Source, class Vec = V>
inline void MicroKernel(const float* const* x, Source& src, int64_t in, float* const* y, int64_t y_col, int valid_m,
                        int valid_n, bool accumulate, const int64_t* cols = nullptr) {
  constexpr int kSub = Source::kStep / 16;
  typename V::Reg acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = V::Zero();
  const int64_t full = in / Source::kStep * Source::kStep;
  const int64_t span = src.Span();
  for (int64_t kb = 0; kb < full; kb += span) {
    src.Begin(kb);
    const int64_t kb_end = kb + span < full ? kb + span : full;
    for (int64_t k = kb; k < kb_end; k += Source::kStep) {
      typename V::Reg wv[NR][kSub];
      for (int j = 0; j < NR; ++j) src.Load(j, k, wv[j]);
      for (int s = 0; s < kSub; ++s) {
        for (int i = 0; i < MR; ++i) {
          const typename V::Reg xv = V::Load(x[i] + k + s * 16);
          for (int j = 0; j < NR; ++j) acc[i][j] = V::Fma(xv, wv[j][s], acc[i][j]);
        }
      }
    }
  }
  for (int64_t k = full; k < in; k += kLanes) {  // only when in % 16 != 0 (kStep 32 needs in % 32 == 0)
    alignas(64) float wt[NR][kLanes];
    alignas(64) float xt[kLanes];
    for (int j = 0; j < NR; ++j) src.Tail(j, k, wt[j]);
    for (int i = 0; i < MR; ++i) {
      std::memset(xt, 0, sizeof(xt));
      std::memcpy(xt, x[i] + k, static_cast<size_t>(in - k) * sizeof(float));
      const typename V::Reg xv = V::Load(xt);
      for (int j = 0; j < NR; ++j) acc[i][j] = V::Fma(xv, V::Load(wt[j]), acc[i][j]);
    }
  }
  const int stored = cols ? NR : valid_n;
  for (int i = 0; i < valid_m; ++i) {
    int j = 0;
    if constexpr (NR % 4 == 0 && HasReduce4<Vec>) {
      for (; j + 4 <= stored; j += 4) {
        alignas(16) float dots[4];
        _mm_store_ps(dots, Vec::Reduce4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
        for (int q = 0; q < 4; ++q) {
          if (cols && cols[j + q] < 0) continue;
          float& out = y[i][cols ? cols[j + q] : y_col + j + q];
          out = accumulate ? out + dots[q] : dots[q];
        }
      }
    }
    for (; j < stored; ++j) {
      if (cols && cols[j] < 0) continue;
      const float dot = V::Reduce(acc[i][j]);
      float& out = y[i][cols ? cols[j] : y_col + j];
      out = accumulate ? out + dot : dot;
    }
  }
}

template <class Vec>
concept HasReduce4Store = requires(typename Vec::Reg r, float* out) { Vec::Reduce4Store(r, r, r, r, out, true); };

// MicroKernel for a full-width tile of a panel (NR = 4) when in % 16 == 0, on ISAs with V::Reduce4Store:
// the same FMAs, with no tail and the four dots of each row reduced and stored together, so the per-tile
// work outside the k loop stays small (it is a fifth of the tile's time at in = 512 otherwise).
template <int MR, class Vec = V>
inline void PanelKernelN4(const float* const* x, const float* panel, int64_t stride, int64_t in, float* const* y,
                          int64_t y_col, int valid_m, bool accumulate) {
  typename Vec::Reg acc[MR][4];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = Vec::Zero();
  const float* w0 = panel;
  const float* w1 = panel + stride;
  const float* w2 = panel + 2 * stride;
  const float* w3 = panel + 3 * stride;
  for (int64_t k = 0; k < in; k += kLanes) {
    const typename Vec::Reg wv0 = Vec::Load(w0 + k), wv1 = Vec::Load(w1 + k), wv2 = Vec::Load(w2 + k),
                            wv3 = Vec::Load(w3 + k);
    for (int i = 0; i < MR; ++i) {
      const typename Vec::Reg xv = Vec::Load(x[i] + k);
      acc[i][0] = Vec::Fma(xv, wv0, acc[i][0]);
      acc[i][1] = Vec::Fma(xv, wv1, acc[i][1]);
      acc[i][2] = Vec::Fma(xv, wv2, acc[i][2]);
      acc[i][3] = Vec::Fma(xv, wv3, acc[i][3]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    if (i < valid_m) Vec::Reduce4Store(acc[i][0], acc[i][1], acc[i][2], acc[i][3], y[i] + y_col, accumulate);
  }
}

template <int NR>
inline void RowIndices(int64_t n0, int64_t n_end, int64_t* rows) {
  for (int j = 0; j < NR; ++j) rows[j] = n0 + j < n_end ? n0 + j : n_end - 1;
}

// Small batches: weights decoded in registers straight from their stored form, all m rows at once, in
// tiles of rows from separate stretches (StretchTile, linear_kernels.h).
template <int MR, int NR, template <int> class Source>
void DirectPath(const LinearTask& t, int64_t n_begin, int64_t n_end) {
  const float* x[MR];
  float* y[MR];
  for (int i = 0; i < MR; ++i) {
    x[i] = t.x + i * t.x_stride;
    y[i] = t.y + i * t.y_stride;
  }
  const int64_t stretch = DecodeStretch(n_begin, n_end, NR);
  for (int64_t s = 0; s < stretch; ++s) {
    int64_t rows[NR], cols[NR];
    StretchTile<NR>(n_begin, n_end, stretch, s, rows, cols);
    Source<NR> src(*t.w, rows);
    MicroKernel<MR, NR>(x, src, t.w->in_features, y, 0, MR, NR, t.accumulate, cols);
  }
}

// A weight source that also stores every step it decodes into a panel, each row `stride` floats (the tail
// zero-padded past in_features), so the first tile of x rows decodes the panel while it multiplies: the
// decode overlaps the FMAs instead of running as a pass of its own.
template <int NR, template <int> class Inner>
struct PanelWritingSource : Inner<NR> {
  static constexpr int kStep = Inner<NR>::kStep;
  float* panel;
  int64_t stride;
  PanelWritingSource(const WeightView& weights, const int64_t* row_indices, float* panel_rows, int64_t row_stride)
      : Inner<NR>(weights, row_indices), panel(panel_rows), stride(row_stride) {}
  void Load(int j, int64_t k, V::Reg* out) const {
    Inner<NR>::Load(j, k, out);
    for (int s = 0; s < kStep / 16; ++s) V::Store(panel + j * stride + k + s * 16, out[s]);
  }
  void Tail(int j, int64_t k, float* out16) const {
    Inner<NR>::Tail(j, k, out16);
    std::memcpy(panel + j * stride + k, out16, kLanes * sizeof(float));
  }
};

// Larger batches: a block of weight rows is decoded once into a per-thread panel that stays in L2 (by the
// first register tile of MR rows of x), then every other tile runs across it. Each weight byte is read from memory once per
// call; x streams once per block of weight rows.
template <template <int> class Source>
void PanelPath(const LinearTask& t, int64_t n_begin, int64_t n_end) {
  constexpr int MR = V::kPanelMr, NR = V::kPanelNr;
  const int64_t in = t.w->in_features;
  const int64_t stride = (in + kLanes - 1) / kLanes * kLanes;
  // Weight rows per block: about 384 KiB of decoded panel, a whole number of tiles.
  int64_t block_n = (int64_t{384} * 1024 / 4) / (stride > 0 ? stride : 1);
  block_n = block_n < NR ? NR : block_n / NR * NR;
  float* panel = ThreadScratch(static_cast<size_t>(block_n * stride));
  for (int64_t nb = n_begin; nb < n_end; nb += block_n) {
    const int64_t nb_end = nb + block_n < n_end ? nb + block_n : n_end;
    {  // x rows 0 .. MR, decoding the panel on the way
      const float* x[MR];
      float* y[MR];
      for (int i = 0; i < MR; ++i) {
        const int64_t row = i < t.m ? i : t.m - 1;
        x[i] = t.x + row * t.x_stride;
        y[i] = t.y + row * t.y_stride;
      }
      const int valid_m = static_cast<int>(t.m < MR ? t.m : MR);
      for (int64_t n0 = nb; n0 < nb_end; n0 += NR) {
        int64_t rows[NR];
        RowIndices<NR>(n0, nb_end, rows);
        PanelWritingSource<NR, Source> src(*t.w, rows, panel + (n0 - nb) * stride, stride);
        const int valid_n = static_cast<int>(nb_end - n0 < NR ? nb_end - n0 : NR);
        MicroKernel<MR, NR>(x, src, in, y, n0, valid_m, valid_n, t.accumulate);
      }
    }
    for (int64_t i0 = MR; i0 < t.m; i0 += MR) {
      const float* x[MR];
      float* y[MR];
      for (int i = 0; i < MR; ++i) {
        const int64_t row = i0 + i < t.m ? i0 + i : t.m - 1;
        x[i] = t.x + row * t.x_stride;
        y[i] = t.y + row * t.y_stride;
      }
      const int valid_m = static_cast<int>(t.m - i0 < MR ? t.m - i0 : MR);
      for (int64_t n0 = nb; n0 < nb_end; n0 += NR) {
        const int valid_n = static_cast<int>(nb_end - n0 < NR ? nb_end - n0 : NR);
        if constexpr (NR == 4 && HasReduce4Store<V>) {
          if (valid_n == NR && in % kLanes == 0) {
            // A last tile of fewer rows runs only those (m is often not a multiple of MR: expert batches).
            const float* rows_panel = panel + (n0 - nb) * stride;
            switch (valid_m) {
              case 1:
                PanelKernelN4<1>(x, rows_panel, stride, in, y, n0, 1, t.accumulate);
                break;
              case 2:
                PanelKernelN4<2>(x, rows_panel, stride, in, y, n0, 2, t.accumulate);
                break;
              case 3:
                PanelKernelN4<3>(x, rows_panel, stride, in, y, n0, 3, t.accumulate);
                break;
              default:
                PanelKernelN4<MR>(x, rows_panel, stride, in, y, n0, valid_m, t.accumulate);
            }
            continue;
          }
        }
        PanelSource<NR> panel_src{panel + (n0 - nb) * stride, stride};
        MicroKernel<MR, NR>(x, panel_src, in, y, n0, valid_m, valid_n, t.accumulate);
      }
    }
  }
}

// The lane-major panel. The canonical order makes each of an output's 16 lane sums its own chain of FMAs
// (lane j: k = j, j + 16, ... from +0), so a register may as well hold lane j of 16 different outputs as 16
// lanes of one output: the chains, and so the results, are the same. Laid out that way, a row of x is a
// broadcast scalar instead of a vector, and a register tile of MR rows of x by 16 outputs needs one
// panel vector and MR broadcasts per MR FMAs.
//
// Weights are decoded 16 rows at a time and transposed into groups of `steps` x 16 floats per lane:
// group[j][t][c] = W[n0 + c][16 t + j] (zero past in_features), so that each lane's chain reads its panel
// contiguously. Each tile keeps its 16 lanes' partial sums for every (row, output) in `sums`, the whole
// run of k at once for short rows and in chunks of kLaneChunkSteps otherwise (x's chunk then stays in L1
// while the 16 lanes revisit it), and reduces them at the end by halving, across 16 outputs at a time.
constexpr int64_t kLaneChunkSteps = 32;

template <class Source, class Vec>
void DecodeLaneGroup(const WeightView& w, int64_t n0, int64_t n_end, int64_t stride, int64_t lane_stride,
                     float* natural, float* group) {
  int64_t rows[16];
  RowIndices<16>(n0, n_end, rows);  // rows past n_end repeat the last one; their outputs are never stored
  Source src(w, rows);
  const int64_t steps = stride / kLanes;
  if constexpr (std::is_same_v<Source, Bf16Source<16>>) {
    if (w.in_features % kLanes == 0) {  // widened as they are transposed: no pass through `natural`
      for (int64_t t = 0; t < steps; ++t) Vec::Transpose16Bf16(src.ptr, t * kLanes, group + t * kLanes, lane_stride);
      return;
    }
  }
  constexpr int kSub = Source::kStep / 16;
  const int64_t in = w.in_features;
  const int64_t full = in / Source::kStep * Source::kStep;
  const int64_t span = src.Span();
  for (int64_t kb = 0; kb < full; kb += span) {
    src.Begin(kb);
    const int64_t kb_end = kb + span < full ? kb + span : full;
    for (int64_t k = kb; k < kb_end; k += Source::kStep) {
      for (int c = 0; c < 16; ++c) {
        typename Vec::Reg r[kSub];
        src.Load(c, k, r);
        for (int s = 0; s < kSub; ++s) Vec::Store(natural + c * stride + k + s * 16, r[s]);
      }
    }
  }
  for (int64_t k = full; k < in; k += kLanes) {
    for (int c = 0; c < 16; ++c) src.Tail(c, k, natural + c * stride + k);
  }
  for (int64_t t = 0; t < steps; ++t) Vec::Transpose16(natural + t * kLanes, stride, group + t * kLanes, lane_stride);
}

// Rows x[0 .. MR) (each at least `steps` x 16 floats, zero-padded) against one lane-major group: y[i][n0 + c]
// (+)= the canonical dot, for c < valid_n. Kept out of line: inlined into its caller's loops, the FMA loop runs
// short of general registers and keeps its counter in memory.
template <int MR, class Vec>
[[gnu::noinline]] void LaneTile(const float* const* x, const float* group, int64_t steps, int64_t lane_stride,
                                float* sums, float* const* y, int64_t n0, int valid_n, bool accumulate) {
  using Reg = typename Vec::Reg;
  for (int64_t t0 = 0; t0 < steps; t0 += kLaneChunkSteps) {
    const int64_t t1 = t0 + kLaneChunkSteps < steps ? t0 + kLaneChunkSteps : steps;
    for (int j = 0; j < 16; ++j) {
      Reg acc[MR];
      float* lane_sums = sums + j * MR * kLanes;
      for (int i = 0; i < MR; ++i) acc[i] = t0 == 0 ? Vec::Zero() : Vec::Load(lane_sums + i * kLanes);
      const float* p = group + j * lane_stride + t0 * kLanes;
      for (int64_t t = t0; t < t1; ++t, p += kLanes) {
        const Reg wv = Vec::Load(p);
        for (int i = 0; i < MR; ++i) acc[i] = Vec::Fma(Vec::Set1(x[i][t * kLanes + j]), wv, acc[i]);
      }
      for (int i = 0; i < MR; ++i) Vec::Store(lane_sums + i * kLanes, acc[i]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    // The halving (lane j + j+8, then j+4, j+2, j+1) walked depth first: the same additions of the same
    // operands, with a few registers live instead of sixteen lanes' worth (which spill, and the spilled
    // partial sums then wait on store forwarding).
    const float* row_sums = sums + i * kLanes;
    auto lane = [&](int j) { return Vec::Load(row_sums + j * MR * kLanes); };
    auto by8 = [&](int j) { return Vec::Add(lane(j), lane(j + 8)); };
    auto by4 = [&](int j) { return Vec::Add(by8(j), by8(j + 4)); };
    auto by2 = [&](int j) { return Vec::Add(by4(j), by4(j + 2)); };
    const Reg dot = Vec::Add(by2(0), by2(1));
    float* out = y[i] + n0;
    if (valid_n == 16) {
      Vec::Store(out, accumulate ? Vec::Add(Vec::Load(out), dot) : dot);
    } else {
      alignas(64) float dots[kLanes];
      Vec::Store(dots, dot);
      for (int c = 0; c < valid_n; ++c) out[c] = accumulate ? out[c] + dots[c] : dots[c];
    }
  }
}

// Rows x[0 .. MR) of the padded copy of x (rows lane_stride floats apart) against every group of the block.
template <int MR, class Vec>
void LaneRowTile(const LinearTask& t, const float* x_rows, int64_t i0, const float* group_block, int64_t nb,
                 int64_t nb_end, int64_t steps, int64_t lane_stride, float* sums) {
  const float* x[MR];
  float* y[MR];
  for (int i = 0; i < MR; ++i) {
    x[i] = x_rows + i * lane_stride;
    y[i] = t.y + (i0 + i) * t.y_stride;
  }
  for (int64_t n0 = nb; n0 < nb_end; n0 += 16) {
    const int valid_n = static_cast<int>(nb_end - n0 < 16 ? nb_end - n0 : 16);
    LaneTile<MR, Vec>(x, group_block + (n0 - nb) * lane_stride, steps, lane_stride, sums, y, n0, valid_n,
                      t.accumulate);
  }
}

// Rows of x are copied with their padding a group of about this many bytes at a time, and one copy serves
// every block of weights: a block holds few weight rows when rows are long (16 at in = 2048), and a copy per
// block would move x once per that many outputs. A group past the first decodes the panel again, a small
// part of its work at this many rows.
constexpr int64_t kLanePaddedXBytes = int64_t{4} * 1024 * 1024;

template <template <int> class Source, class Vec = V>
void LanePanelPath(const LinearTask& t, int64_t n_begin, int64_t n_end) {
  constexpr int MR = Vec::kLanePanelMr;
  static_assert(MR >= 1 && MR <= 6, "the remainder switch below covers tiles of up to 5 rows");
  const int64_t in = t.w->in_features;
  const int64_t steps = (in + kLanes - 1) / kLanes;
  const int64_t stride = steps * kLanes;
  // Lanes of a group, and rows of x, one cache line further apart than their length: at lengths of a
  // multiple of 4 KiB the 16 lanes' streams (and the rows of x) would all fall in the same L1 sets.
  const int64_t lane_stride = stride + kLanes;
  // Weight rows per block: about 256 KiB of panel (whole groups of 16), leaving L2 room for x.
  int64_t block_n = (int64_t{256} * 1024 / 4) / lane_stride;
  block_n = block_n < 16 ? 16 : block_n / 16 * 16;
  const int64_t group_floats = 16 * stride;
  float* panel = ThreadScratch(static_cast<size_t>(block_n * lane_stride + group_floats + 16 * MR * kLanes));
  float* natural = panel + block_n * lane_stride;
  float* sums = natural + group_floats;
  // Rows of x per group: whole tiles of MR.
  int64_t group_rows = kLanePaddedXBytes / static_cast<int64_t>(sizeof(float)) / lane_stride / MR * MR;
  group_rows = group_rows < MR ? MR : group_rows;
  if (group_rows > t.m) group_rows = t.m;
  float* x_padded = ThreadScratchX(static_cast<size_t>(group_rows * lane_stride));
  for (int64_t g0 = 0; g0 < t.m; g0 += group_rows) {
    const int64_t rows = t.m - g0 < group_rows ? t.m - g0 : group_rows;
    // Each row with the zero padding of the canonical order, rows lane_stride apart.
    for (int64_t i = 0; i < rows; ++i) {
      float* padded = x_padded + i * lane_stride;
      std::memcpy(padded, t.x + (g0 + i) * t.x_stride, static_cast<size_t>(in) * sizeof(float));
      std::memset(padded + in, 0, static_cast<size_t>(stride - in) * sizeof(float));
    }
    for (int64_t nb = n_begin; nb < n_end; nb += block_n) {
      const int64_t nb_end = nb + block_n < n_end ? nb + block_n : n_end;
      for (int64_t n0 = nb; n0 < nb_end; n0 += 16) {
        DecodeLaneGroup<Source<16>, Vec>(*t.w, n0, nb_end, stride, lane_stride, natural,
                                         panel + (n0 - nb) * lane_stride);
      }
      int64_t i = 0;
      for (; i + MR <= rows; i += MR)
        LaneRowTile<MR, Vec>(t, x_padded + i * lane_stride, g0 + i, panel, nb, nb_end, steps, lane_stride, sums);
      const float* x_rest = x_padded + i * lane_stride;
      switch (rows - i) {  // a last tile of fewer rows runs only those (expert batches are any size)
        case 1: LaneRowTile<1, Vec>(t, x_rest, g0 + i, panel, nb, nb_end, steps, lane_stride, sums); break;
        case 2: LaneRowTile<2, Vec>(t, x_rest, g0 + i, panel, nb, nb_end, steps, lane_stride, sums); break;
        case 3: LaneRowTile<3, Vec>(t, x_rest, g0 + i, panel, nb, nb_end, steps, lane_stride, sums); break;
        case 4: LaneRowTile<4, Vec>(t, x_rest, g0 + i, panel, nb, nb_end, steps, lane_stride, sums); break;
        case 5: LaneRowTile<5, Vec>(t, x_rest, g0 + i, panel, nb, nb_end, steps, lane_stride, sums); break;
        default: break;
      }
    }
  }
}

template <class Vec>
concept HasLanePanel = requires { Vec::kLanePanelMr; };

// Runs LanePanelPath where the ISA has it and m is large enough for it; false otherwise.
template <template <int> class Source, class Vec = V>
bool TryLanePanel(const LinearTask& t, int64_t n_begin, int64_t n_end) {
  if constexpr (HasLanePanel<Vec>) {
    if (t.m >= Vec::kLanePanelMinRows) {
      LanePanelPath<Source, Vec>(t, n_begin, n_end);
      return true;
    }
  }
  return false;
}

template <template <int> class Source>
void RunFormat(const LinearTask& t, int64_t n_begin, int64_t n_end) {
  switch (t.m) {
    case 1:
      return DirectPath<1, V::kDirectNr1, Source>(t, n_begin, n_end);
    case 2:
      return DirectPath<2, V::kDirectNr, Source>(t, n_begin, n_end);
    case 3:
      return DirectPath<3, V::kDirectNr, Source>(t, n_begin, n_end);
    case 4:
      return DirectPath<4, V::kDirectNr, Source>(t, n_begin, n_end);
    default:
      break;
  }
  // Up to kDirectGroupedRows rows (a verify step of one sequence, a small decode batch) the direct path
  // runs on groups of 4 rows over blocks of about 256 KiB of weights, so that the later groups read the
  // block from cache: no panel is written and read back, which at these sizes costs more than the
  // products (each output is computed the same way on either path).
  if (t.m <= V::kDirectGroupedRows) {
    const int64_t in = t.w->in_features > 0 ? t.w->in_features : 1;
    const int64_t block = (int64_t{256} * 1024) / (4 * in) > 64 ? (int64_t{256} * 1024) / (4 * in) : 64;
    LinearTask group = t;
    for (int64_t nb = n_begin; nb < n_end; nb += block) {
      const int64_t nb_end = nb + block < n_end ? nb + block : n_end;
      for (int64_t i0 = 0; i0 < t.m; i0 += 4) {
        group.x = t.x + i0 * t.x_stride;
        group.y = t.y + i0 * t.y_stride;
        group.m = t.m - i0 < 4 ? t.m - i0 : 4;
        RunFormat<Source>(group, nb, nb_end);
      }
    }
    return;
  }
  if (TryLanePanel<Source>(t, n_begin, n_end)) return;
  PanelPath<Source>(t, n_begin, n_end);
}

void LinearRangeVector(const LinearTask& t, int64_t n_begin, int64_t n_end) {
  switch (t.w->format) {
    case WeightFormat::kF32:
      return RunFormat<F32Source>(t, n_begin, n_end);
    case WeightFormat::kBF16:
      return RunFormat<Bf16Source>(t, n_begin, n_end);
    case WeightFormat::kFP8Block:
      return RunFormat<Fp8Source>(t, n_begin, n_end);
    case WeightFormat::kMXFP4:
      return RunFormat<Fp4Source>(t, n_begin, n_end);
  }
}

}  // namespace
}  // namespace deepinfer::kernels::cpu
