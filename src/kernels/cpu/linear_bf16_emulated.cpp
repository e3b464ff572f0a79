// LinearPrecision::kBf16Activations where the CPU has no AVX512_BF16: vdpbf16ps emulated exactly, so that
// bf16 activations give the same bits on every CPU. The instruction (Intel SDM, VDPBF16PS) updates each fp32
// lane j of the accumulator with the bf16 pair (2j, 2j + 1) of each 32-element chunk as two fused
// multiply-adds, the odd element first, each with denormal inputs read as zero, round to nearest even, and
// denormal results flushed to zero (sign kept); this file spells that out in portable code. It was
// checked against the hardware instruction on random and edge-case lanes (tests/kernels/
// linear_bf16_emulation_test.cpp compares whole products bit for bit wherever AVX512_BF16 is present).
// x arrives rounded to bf16 with denormals already zeroed by the dispatcher; weights are decoded to bf16
// exactly (the dispatcher only sends formats bf16 represents) and zeroed where denormal.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/linear_kernels.h"
#include "kernels/number_formats.h"

namespace deepinfer::kernels::cpu {
namespace {

inline float Ftz(float r) {
  uint32_t bits;
  std::memcpy(&bits, &r, 4);
  if ((bits & 0x7F800000u) != 0) return r;
  bits &= 0x80000000u;
  std::memcpy(&r, &bits, 4);
  return r;
}

float EmulatedDot(const uint16_t* x, const uint16_t* w, int64_t padded) {
  float lane[16] = {};
  for (int64_t k = 0; k < padded; k += 32) {
    for (int j = 0; j < 16; ++j) {
      const int64_t even = k + 2 * j, odd = even + 1;
      lane[j] = Ftz(std::fma(Bf16ToFloat(x[odd]), Bf16ToFloat(w[odd]), lane[j]));
      lane[j] = Ftz(std::fma(Bf16ToFloat(x[even]), Bf16ToFloat(w[even]), lane[j]));
    }
  }
  for (int width = 8; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lane[j] = lane[j] + lane[j + width];
  return lane[0];
}

}  // namespace

uint16_t Bf16DenormalsToZero(uint16_t bits) { return (bits & 0x7F80u) == 0 ? bits & 0x8000u : bits; }

void DecodeWeightRowBf16(const WeightView& w, int64_t n, int64_t padded, float* scratch, uint16_t* out) {
  const int64_t in = w.in_features;
  DecodeWeightRow(w, n, 0, in, scratch);
  for (int64_t k = 0; k < in; ++k) {
    uint32_t bits;
    std::memcpy(&bits, scratch + k, 4);
    out[k] = Bf16DenormalsToZero(static_cast<uint16_t>(bits >> 16));  // exact: the value is a bf16
  }
  for (int64_t k = in; k < padded; ++k) out[k] = 0;
}

void RunBf16Emulated(const LinearTask& task, int64_t n_begin, int64_t n_end, Bf16DotFn dot) {
  const int64_t padded = task.x_bf16_stride;
  std::vector<float> scratch(static_cast<size_t>(task.w->in_features));
  std::vector<uint16_t> row(static_cast<size_t>(padded));
  for (int64_t n = n_begin; n < n_end; ++n) {
    DecodeWeightRowBf16(*task.w, n, padded, scratch.data(), row.data());
    for (int64_t i = 0; i < task.m; ++i) {
      const float d = dot(task.x_bf16 + i * task.x_bf16_stride, row.data(), padded);
      float& out = task.y[i * task.y_stride + n];
      out = task.accumulate ? out + d : d;
    }
  }
}

void LinearRangeBf16EmulatedScalar(const LinearTask& task, int64_t n_begin, int64_t n_end) {
  RunBf16Emulated(task, n_begin, n_end, EmulatedDot);
}

}  // namespace deepinfer::kernels::cpu
