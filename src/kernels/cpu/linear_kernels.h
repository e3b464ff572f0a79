// Internal: the per-ISA bodies of Linear. Each computes outputs [n_begin, n_end) of every row of x; the
// dispatcher (linear.cpp) validates, splits output rows among threads and picks the ISA.
#pragma once

#include <cstdint>

#include "kernels/linear.h"

namespace deepinfer::kernels::cpu {

struct LinearTask {
  const float* x = nullptr;
  int64_t m = 0;
  int64_t x_stride = 0;
  const WeightView* w = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
  bool accumulate = false;
  // For LinearPrecision::kBf16Activations: x rounded to bf16, rows `x_bf16_stride` elements apart, each row
  // zero-padded to a multiple of 32 elements.
  const uint16_t* x_bf16 = nullptr;
  int64_t x_bf16_stride = 0;
};

using LinearRangeFn = void (*)(const LinearTask& task, int64_t n_begin, int64_t n_end);

void LinearRangeScalar(const LinearTask& task, int64_t n_begin, int64_t n_end);
void LinearRangeAvx2(const LinearTask& task, int64_t n_begin, int64_t n_end);
void LinearRangeAvx512(const LinearTask& task, int64_t n_begin, int64_t n_end);
// The decode-sized (m ≤ 8) FP8-block and MXFP4 kernels of AVX-512 (linear_gemv_avx512.cpp). Returns
// false, touching nothing, where they do not apply; otherwise computes outputs [n_begin, n_end), handing
// any rows their shortcuts cannot take to `fallback` (a kernel with bit-identical results).
bool LinearGemvAvx512(const LinearTask& task, int64_t n_begin, int64_t n_end, LinearRangeFn fallback);
// The kBf16Activations path (needs task.x_bf16): vdpbf16ps, and its exact emulation for CPUs without it
// (portable, and AVX2 for AVX2 and AVX-512 CPUs).
void LinearRangeAvx512Bf16(const LinearTask& task, int64_t n_begin, int64_t n_end);
void LinearRangeBf16EmulatedScalar(const LinearTask& task, int64_t n_begin, int64_t n_end);
void LinearRangeBf16EmulatedAvx2(const LinearTask& task, int64_t n_begin, int64_t n_end);
// bf16 bits with a denormal read as zero of the same sign (vdpbf16ps's treatment of its inputs).
uint16_t Bf16DenormalsToZero(uint16_t bits);
// W[n, 0 .. in) as bf16 (exact for the formats kBf16Activations takes; denormals zeroed), zero-padded to
// `padded` elements; `scratch` holds in_features floats.
void DecodeWeightRowBf16(const WeightView& w, int64_t n, int64_t padded, float* scratch, uint16_t* out);
// The emulations' common body: each weight row decoded to bf16 once, then dot(x row, weight row, padded)
// for every row of x (outputs [n_begin, n_end)).
using Bf16DotFn = float (*)(const uint16_t* x, const uint16_t* w, int64_t padded);
void RunBf16Emulated(const LinearTask& task, int64_t n_begin, int64_t n_end, Bf16DotFn dot);

// Decodes W[n, k_begin .. k_end) to fp32 exactly (decode(q) · scale rounded to fp32). Portable code, used by
// the scalar kernel, and as the reference decode of the vector kernels' tails.
void DecodeWeightRow(const WeightView& w, int64_t n, int64_t k_begin, int64_t k_end, float* out);

// The canonical reduction (see linear.h) of x[0..k) · w[0..k), in portable code.
float CanonicalDot(const float* x, const float* w, int64_t k);

// Decode tiles of NR weight rows take row s of NR separate stretches of [n_begin, n_end), so the weights
// stream from memory as NR long sequential runs: NR adjacent rows read side by side are NR short streams
// per tile, which the hardware prefetcher cannot follow when rows are short (measured here: a
// 129280 x 1024 BF16 matrix streams at well under half the bandwidth that way).
inline int64_t DecodeStretch(int64_t n_begin, int64_t n_end, int nr) { return (n_end - n_begin + nr - 1) / nr; }
// Tile s: rows[j] to read (always a valid row) and cols[j] to store (-1 for padding past n_end).
template <int NR>
inline void StretchTile(int64_t n_begin, int64_t n_end, int64_t stretch, int64_t s, int64_t* rows, int64_t* cols) {
  for (int j = 0; j < NR; ++j) {
    const int64_t row = n_begin + j * stretch + s;
    cols[j] = row < n_end ? row : -1;
    rows[j] = row < n_end ? row : n_begin + s;
  }
}

}  // namespace deepinfer::kernels::cpu
