// Internal: the lane-major panels of the vector Linear (linear_vector_impl.h), where an accumulator register
// holds one lane of the canonical order for 16 outputs instead of 16 lanes of one output.
//
// Included by linear_vector_impl.h after its `V`, weight sources and panel path, whose names it uses. Optional
// members of V that select these paths:
//   void Transpose16(const float* in, int64_t in_stride, float* out, int64_t out_stride)   out[j][c] = in[c][j]
//   void Transpose16Bf16(const uint16_t* const* rows, int64_t k, float* out, int64_t out_stride)
//   Reg Add(Reg, Reg)
//   constexpr int kLanePanelMr, kLanePanelMinRows   LanePanelPath: rows of x per tile, and from how many rows
//   constexpr int kLanePairMr, kLanePairMinRows     LanePairPanelPath (32 vector registers): the same
//   void Transpose32Bf16(rows, k, out, out_stride)  two steps of Transpose16Bf16 at once
//   void PackRows16(const float* x, int64_t x_stride, int rows, int valid_k, float* out)   16 columns of x
//                                                   packed: out[j · rows + i] = x[i][j] (zero from valid_k)
// Everything here has internal linkage so that the per-ISA copies never merge at link time.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/linear_kernels.h"
#include "kernels/cpu/linear_scratch.h"

namespace deepinfer::kernels::cpu {
namespace {

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

template <class Vec>
concept HasTranspose32Bf16 = requires(const uint16_t* const* rows, float* out) {
  Vec::Transpose32Bf16(rows, int64_t{0}, out, int64_t{0});
};

template <class Source, class Vec>
void DecodeLaneGroup(const WeightView& w, int64_t n0, int64_t n_end, int64_t stride, int64_t lane_stride,
                     float* natural, float* group) {
  int64_t rows[16];
  RowIndices<16>(n0, n_end, rows);  // rows past n_end repeat the last one; their outputs are never stored
  Source src(w, rows);
  const int64_t steps = stride / kLanes;
  if constexpr (std::is_same_v<Source, Bf16Source<16>> && HasTranspose32Bf16<Vec>) {
    if (w.in_features % 32 == 0) {  // widened as they are transposed: no pass through `natural`
      for (int64_t t = 0; t < steps; t += 2) Vec::Transpose32Bf16(src.ptr, t * kLanes, group + t * kLanes, lane_stride);
      return;
    }
  }
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

// The lane-major panel with two registers per lane, for ISAs with 32 vector registers (V::kLanePairMr): a
// tile of MR rows of x against lane j of two adjacent groups (32 outputs), so that each broadcast of x feeds
// two FMAs (with one register per lane, a broadcast per FMA runs out of load bandwidth). The panel is laid out
// as for LanePanelPath; the chains, and so the results, are again those of the canonical order.
//
// Each tile's rows of x are packed so that the values a lane's step broadcasts lie together: packed[(16 t + j)
// · MR + i] = x[i][16 t + j] (zero past in_features), one pointer with constant offsets instead of a pointer
// per row (MR of them do not fit the general registers beside the loop's own).
template <int MR, int G, class Vec>
[[gnu::noinline]] void LanePairTile(const float* x_packed, const float* group, int64_t steps, int64_t lane_stride,
                                    float* sums, float* const* y, int64_t n0, int valid_n, bool accumulate) {
  using Reg = typename Vec::Reg;
  const int64_t next_group = 16 * lane_stride;
  for (int64_t t0 = 0; t0 < steps; t0 += kLaneChunkSteps) {
    const int64_t t1 = t0 + kLaneChunkSteps < steps ? t0 + kLaneChunkSteps : steps;
    for (int j = 0; j < 16; ++j) {
      Reg acc[MR][G];
      float* lane_sums = sums + j * MR * G * kLanes;
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) acc[i][g] = t0 == 0 ? Vec::Zero() : Vec::Load(lane_sums + (i * G + g) * kLanes);
      }
      const float* p = group + j * lane_stride + t0 * kLanes;
      const float* xp = x_packed + (t0 * kLanes + j) * MR;
      for (int64_t t = t0; t < t1; ++t, p += kLanes, xp += kLanes * MR) {
        Reg wv[G];
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
          // The next lane's run, so that its pass does not start on L2 latency.
          _mm_prefetch(reinterpret_cast<const char*>(p + g * next_group + lane_stride), _MM_HINT_T0);
          wv[g] = Vec::Load(p + g * next_group);
        }
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const Reg xv = Vec::Set1(xp[i]);
#pragma GCC unroll 2
          for (int g = 0; g < G; ++g) acc[i][g] = Vec::Fma(xv, wv[g], acc[i][g]);
        }
      }
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) Vec::Store(lane_sums + (i * G + g) * kLanes, acc[i][g]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int g = 0; g < G; ++g) {
      const int valid = valid_n - 16 * g < 16 ? valid_n - 16 * g : 16;
      if (valid <= 0) continue;
      // The halving walked depth first, as in LaneTile.
      const float* row_sums = sums + (i * G + g) * kLanes;
      auto lane = [&](int j) { return Vec::Load(row_sums + j * MR * G * kLanes); };
      auto by8 = [&](int j) { return Vec::Add(lane(j), lane(j + 8)); };
      auto by4 = [&](int j) { return Vec::Add(by8(j), by8(j + 4)); };
      auto by2 = [&](int j) { return Vec::Add(by4(j), by4(j + 2)); };
      const Reg dot = Vec::Add(by2(0), by2(1));
      float* out = y[i] + n0 + 16 * g;
      if (valid == 16) {
        Vec::Store(out, accumulate ? Vec::Add(Vec::Load(out), dot) : dot);
      } else {
        alignas(64) float dots[kLanes];
        Vec::Store(dots, dot);
        for (int c = 0; c < valid; ++c) out[c] = accumulate ? out[c] + dots[c] : dots[c];
      }
    }
  }
}

// One packed tile of R rows of x (output rows y_rows[0 .. R)) against every group of the block, two groups at
// a time (a last single group alone).
template <int R, class Vec>
void LanePairRowTile(const float* x_packed, float* const* y_rows, const float* group_block, int64_t nb,
                     int64_t nb_end, int64_t steps, int64_t lane_stride, float* sums, bool accumulate) {
  for (int64_t n0 = nb; n0 < nb_end; n0 += 32) {
    const int valid_n = static_cast<int>(nb_end - n0 < 32 ? nb_end - n0 : 32);
    const float* group = group_block + (n0 - nb) * lane_stride;
    if (valid_n > 16) {
      LanePairTile<R, 2, Vec>(x_packed, group, steps, lane_stride, sums, y_rows, n0, valid_n, accumulate);
    } else {
      LanePairTile<R, 1, Vec>(x_packed, group, steps, lane_stride, sums, y_rows, n0, valid_n, accumulate);
    }
  }
}

// packed[k · rows + i] = x[i][k] for k < in, zero for in ≤ k < stride (rows ≤ 16).
template <class Vec>
void PackLaneRows(const float* x, int64_t x_stride, int64_t rows, int64_t in, int64_t stride, float* packed) {
  for (int64_t k = 0; k < stride; k += kLanes) {
    const int valid_k = static_cast<int>(in - k < kLanes ? in - k : kLanes);
    Vec::PackRows16(x + k, x_stride, static_cast<int>(rows), valid_k, packed + k * rows);
  }
}

using LanePairRowTileFn = void (*)(const float*, float* const*, const float*, int64_t, int64_t, int64_t, int64_t,
                                   float*, bool);
template <class Vec, int... R>
constexpr std::array<LanePairRowTileFn, sizeof...(R)> LanePairRowTiles(std::integer_sequence<int, R...>) {
  return {&LanePairRowTile<R + 1, Vec>...};
}

// About this many bytes of decoded panel per block (whole pairs of groups): large enough that x, streamed
// once per block, moves little next to the products; small enough to stay in L2 beside a tile's rows of x.
constexpr int64_t kLanePairPanelBytes = int64_t{512} * 1024;

template <template <int> class Source, class Vec = V>
void LanePairPanelPath(const LinearTask& t, int64_t n_begin, int64_t n_end) {
  constexpr int MR = Vec::kLanePairMr;
  static constexpr auto kRowTiles = LanePairRowTiles<Vec>(std::make_integer_sequence<int, MR>());
  const int64_t in = t.w->in_features;
  const int64_t steps = (in + kLanes - 1) / kLanes;
  const int64_t stride = steps * kLanes;
  const int64_t lane_stride = stride + kLanes;  // as in LanePanelPath: lanes off the same L1 sets
  int64_t block_n = kLanePairPanelBytes / static_cast<int64_t>(sizeof(float)) / lane_stride;
  block_n = block_n < 32 ? 32 : block_n / 32 * 32;
  const int64_t group_floats = 16 * stride;
  float* panel = ThreadScratch(static_cast<size_t>(block_n * lane_stride + group_floats + 16 * MR * 2 * kLanes));
  float* natural = panel + block_n * lane_stride;
  float* sums = natural + group_floats;
  int64_t group_rows = kLanePaddedXBytes / static_cast<int64_t>(sizeof(float)) / stride / MR * MR;
  group_rows = group_rows < MR ? MR : group_rows;
  if (group_rows > t.m) group_rows = t.m;
  float* x_packed = ThreadScratchX(static_cast<size_t>(group_rows * stride));
  for (int64_t g0 = 0; g0 < t.m; g0 += group_rows) {
    const int64_t rows = t.m - g0 < group_rows ? t.m - g0 : group_rows;
    // Tiles of as even a size as whole tiles allow (a tile of few rows is short of FMAs per load).
    const int64_t tiles = (rows + MR - 1) / MR;
    auto tile_begin = [&](int64_t tile) { return tile * rows / tiles; };
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t i0 = tile_begin(tile), r = tile_begin(tile + 1) - i0;
      PackLaneRows<Vec>(t.x + (g0 + i0) * t.x_stride, t.x_stride, r, in, stride, x_packed + i0 * stride);
    }
    for (int64_t nb = n_begin; nb < n_end; nb += block_n) {
      const int64_t nb_end = nb + block_n < n_end ? nb + block_n : n_end;
      for (int64_t n0 = nb; n0 < nb_end; n0 += 16) {
        DecodeLaneGroup<Source<16>, Vec>(*t.w, n0, nb_end, stride, lane_stride, natural,
                                         panel + (n0 - nb) * lane_stride);
      }
      for (int64_t tile = 0; tile < tiles; ++tile) {
        const int64_t i0 = tile_begin(tile), r = tile_begin(tile + 1) - i0;
        float* y[MR];
        for (int64_t i = 0; i < r; ++i) y[i] = t.y + (g0 + i0 + i) * t.y_stride;
        kRowTiles[r - 1](x_packed + i0 * stride, y, panel, nb, nb_end, steps, lane_stride, sums, t.accumulate);
      }
    }
  }
}

template <class Vec>
concept HasLanePairPanel = requires { Vec::kLanePairMr; };

template <class Vec>
concept HasLanePanel = requires { Vec::kLanePanelMr; };

// Runs the lane-major panel the ISA has (LanePairPanelPath or LanePanelPath) where m is large enough for it;
// false otherwise.
template <template <int> class Source, class Vec = V>
bool TryLanePanel(const LinearTask& t, int64_t n_begin, int64_t n_end) {
  // FP8 and MXFP4 weights keep the panel path there: their decode, fused into the first tile's FMAs on
  // that path, would be a pass of its own before the transpose here, and costs more than the tile saves.
  constexpr bool kPairFormat =
      std::is_same_v<Source<16>, Bf16Source<16>> || std::is_same_v<Source<16>, F32Source<16>>;
  if constexpr (HasLanePairPanel<Vec>) {
    if (kPairFormat && t.m >= Vec::kLanePairMinRows) {
      LanePairPanelPath<Source, Vec>(t, n_begin, n_end);
      return true;
    }
  } else if constexpr (HasLanePanel<Vec>) {
    if (t.m >= Vec::kLanePanelMinRows) {
      LanePanelPath<Source, Vec>(t, n_begin, n_end);
      return true;
    }
  }
  return false;
}

}  // namespace
}  // namespace deepinfer::kernels::cpu
