// Matrix products over weights in their stored formats: y[m, out] = x[m, in] · Wᵀ.
//
// Weights are used in place (e.g. straight from a memory-mapped checkpoint) and never expanded into a
// full-size copy. For decode-sized m (≤ 4; FP8 and MXFP4 on AVX-512: ≤ 8) weights are decoded in
// registers as they stream in; for larger m each thread decodes a block of rows (a few hundred KiB of fp32,
// sized for L2) into a reusable per-thread panel and runs every row of x across it, so each weight byte is
// read once per call. On AVX2, from 8 rows of x, the panel is stored transposed, lane by lane (see
// cpu/linear_vector_impl.h, LanePanelPath), so that a register holds one lane of 16 outputs: the same sums
// in the same order with fewer loads per FMA. Output rows are split among the pool's threads in whole rows.
// The AVX-512 FP8 decode applies power-of-two block scales (UE8M0, or fp32 scales that are powers of two)
// to x instead of to each weight, which is exact (see cpu/linear_gemv_avx512.cpp); blocks where it would
// not be (scales beyond 2^7, x that would overflow or underflow when scaled, E4M3 NaN codes, the FPU in
// denormals-are-zero mode) take the general kernel, so results never depend on the shortcut. An E4M3 NaN
// code in weight row n makes output n NaN for every row of x, and nothing else.
//
// Numerics of the default (exact) precision, identical on every ISA and for every batch size:
//   * each weight is dequantised to fp32 exactly as `decode(q) * scale` rounded to fp32 (for E8M0 scales
//     and E2M1/E4M3 values that product is exact), so an FP8/MXFP4/BF16 product is bit-identical to the
//     F32 product on the dequantised matrix;
//   * output n of row i is reduced in a fixed order: 16 lanes, lane j accumulates x[i,k]·W[n,k] for
//     k ≡ j (mod 16) in increasing k with fused multiply-add from +0, then the lanes are summed by halving
//     (lane j + lane j+8, then j+4, j+2, j+1), then added to y when accumulating.
//   That order depends on nothing but the row itself, so a row's result is bit-identical whatever m is,
//   whichever row it sits in, whatever the thread count and whichever ISA runs it (batch invariance).
#pragma once

#include <cstdint>

#include "core/status.h"
#include "core/thread_pool.h"

namespace deepinfer::kernels {

enum class WeightFormat {
  kF32,       // fp32, row-major [out, in]
  kBF16,      // bfloat16, row-major [out, in]
  kFP8Block,  // FP8 E4M3 [out, in] bytes with one scale per block_out × block_in block
  kMXFP4,     // E2M1 [out, in/2] bytes, two values per byte, one E8M0 scale per 32 inputs
};

enum class ScaleFormat {
  kF32,    // fp32 scales
  kUE8M0,  // one byte e per scale, value 2^(e-127); e = 255 is NaN
};

// Which nibble of an MXFP4 byte holds the even input index.
enum class NibbleOrder {
  kLowFirst,   // byte b holds element 2b in bits 0..3 and 2b+1 in bits 4..7 (the OCP MX / released layout)
  kHighFirst,  // element 2b in bits 4..7
};

// A weight matrix W[out_features, in_features] in its stored format.
struct WeightView {
  WeightFormat format = WeightFormat::kF32;
  int64_t out_features = 0;
  int64_t in_features = 0;
  // F32/BF16: row-major [out, in] (row stride = in_features elements); FP8: [out, in] bytes;
  // MXFP4: [out, in/2] bytes.
  const void* data = nullptr;
  // FP8: [ceil(out/block_out), ceil(in/block_in)] row-major, in `scale_format`;
  // MXFP4: [out, in/32] E8M0 bytes (scale_format is ignored and always E8M0).
  const void* scales = nullptr;
  ScaleFormat scale_format = ScaleFormat::kF32;
  int64_t block_out = 128, block_in = 128;            // FP8 block shape
  NibbleOrder nibble_order = NibbleOrder::kLowFirst;  // MXFP4 only
  // FP8 only: the owner has checked (Fp8ContainsNanCodes, e.g. once when loading) that no E4M3 NaN code
  // occurs in `data`, so the decode kernels skip watching for them (about 15% faster at m = 1). If the
  // claim is false, the outputs of rows with NaN codes are unspecified (finite garbage instead of NaN).
  bool fp8_nan_free = false;
};

// Whether an FP8 weight's data holds an E4M3 NaN code (0x7F or 0xFF). Reads every byte (several GB/s).
bool Fp8ContainsNanCodes(const WeightView& w);

// Checks shapes, pointers and format constraints (MXFP4 needs in_features % 32 == 0; FP8 block shape > 0).
Status ValidateWeightView(const WeightView& w);

// Rows [begin, begin + count) of W as a view of the same storage (e.g. one group of a grouped projection,
// or the gate half of a fused gate/up matrix). FP8 needs begin to be a multiple of block_out.
Result<WeightView> SliceRows(const WeightView& w, int64_t begin, int64_t count);

// Bytes of weights and scales a full product reads from W (what a memory-bound GEMV streams).
int64_t WeightBytes(const WeightView& w);

enum class LinearPrecision {
  // fp32 activations, fp32 FMA in the fixed order above. The default.
  kExact,
  // x is rounded to bfloat16 (round-to-nearest-even) and the products are summed as vdpbf16ps sums them:
  // each fp32 lane j of an output's 16-lane accumulator takes the bf16 pair (2j, 2j + 1) of each 32-element
  // chunk (x zero-padded) as two fused multiply-adds, the odd element first, with denormal inputs read as
  // zero and denormal results flushed to zero; then the lanes are reduced by halving as above. Where the CPU
  // has AVX512_BF16 the instruction runs (about twice the arithmetic throughput); elsewhere an exact
  // emulation does (much slower), so the bits are the same on every CPU. For BF16, FP8 (UE8M0 scales) and
  // MXFP4 weights the weight values themselves are exact in bf16, so the only rounding beyond fp32
  // accumulation is that of x (relative error ≤ 2^-9 per element). Batch invariant and deterministic, but
  // not equal to kExact. For F32 weights and FP8 weights with F32 scales (whose dequantised values are not
  // exact in bf16) it is kExact, on every CPU.
  kBf16Activations,
};

struct LinearOptions {
  bool accumulate = false;  // y += x·Wᵀ instead of y = x·Wᵀ
  LinearPrecision precision = LinearPrecision::kExact;
};

// y[i, n] = Σ_k x[i, k] · W[n, k] for i < m, n < out_features, with rows of x `x_stride` floats apart
// and rows of y `y_stride` floats apart. Output rows of W are split among the pool's threads; a null pool
// runs on the calling thread. x and y must not overlap. Preconditions as ValidateWeightView (checked).
void Linear(const float* x, int64_t m, int64_t x_stride, const WeightView& w, float* y, int64_t y_stride,
            ThreadPool* pool = &ThreadPool::Shared());
void Linear(const float* x, int64_t m, int64_t x_stride, const WeightView& w, float* y, int64_t y_stride,
            const LinearOptions& options, ThreadPool* pool = &ThreadPool::Shared());

}  // namespace deepinfer::kernels
