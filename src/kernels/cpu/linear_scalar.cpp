// The portable Linear: the canonical order spelt out with scalar fused multiply-adds. Slow; it is the
// fallback where no vector ISA is available and the definition the vector kernels must match bit for bit.
#include <cmath>
#include <vector>

#include "core/aligned_buffer.h"
#include "kernels/cpu/linear_kernels.h"
#include "kernels/cpu/linear_scratch.h"
#include "kernels/number_formats.h"

namespace deepinfer::kernels::cpu {

void DecodeWeightRow(const WeightView& w, int64_t n, int64_t k_begin, int64_t k_end, float* out) {
  const int64_t in = w.in_features;
  switch (w.format) {
    case WeightFormat::kF32: {
      const float* row = static_cast<const float*>(w.data) + n * in;
      for (int64_t k = k_begin; k < k_end; ++k) out[k - k_begin] = row[k];
      return;
    }
    case WeightFormat::kBF16: {
      const uint16_t* row = static_cast<const uint16_t*>(w.data) + n * in;
      for (int64_t k = k_begin; k < k_end; ++k) out[k - k_begin] = Bf16ToFloat(row[k]);
      return;
    }
    case WeightFormat::kFP8Block: {
      const uint8_t* row = static_cast<const uint8_t*>(w.data) + n * in;
      const int64_t scale_cols = (in + w.block_in - 1) / w.block_in;
      const int64_t scale_row = n / w.block_out;
      for (int64_t k = k_begin; k < k_end; ++k) {
        const int64_t s = scale_row * scale_cols + k / w.block_in;
        const float scale = w.scale_format == ScaleFormat::kF32 ? static_cast<const float*>(w.scales)[s]
                                                                : E8M0ToFloat(static_cast<const uint8_t*>(w.scales)[s]);
        out[k - k_begin] = Fp8E4M3ToFloat(row[k]) * scale;
      }
      return;
    }
    case WeightFormat::kMXFP4: {
      const uint8_t* row = static_cast<const uint8_t*>(w.data) + n * (in / 2);
      const uint8_t* scales = static_cast<const uint8_t*>(w.scales) + n * (in / 32);
      const bool low_first = w.nibble_order == NibbleOrder::kLowFirst;
      for (int64_t k = k_begin; k < k_end; ++k) {
        const uint8_t byte = row[k / 2];
        const bool low = (k % 2 == 0) == low_first;
        const uint8_t nibble = low ? (byte & 0xF) : (byte >> 4);
        out[k - k_begin] = E2M1ToFloat(nibble) * E8M0ToFloat(scales[k / 32]);
      }
      return;
    }
  }
}

float CanonicalDot(const float* x, const float* w, int64_t k) {
  float lanes[16] = {};
  for (int64_t i = 0; i < k; ++i) lanes[i % 16] = std::fma(x[i], w[i], lanes[i % 16]);
  for (int width = 8; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) lanes[j] = lanes[j] + lanes[j + width];
  }
  return lanes[0];
}

void LinearRangeScalar(const LinearTask& task, int64_t n_begin, int64_t n_end) {
  const int64_t in = task.w->in_features;
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t n = n_begin; n < n_end; ++n) {
    DecodeWeightRow(*task.w, n, 0, in, row.data());
    for (int64_t i = 0; i < task.m; ++i) {
      const float dot = CanonicalDot(task.x + i * task.x_stride, row.data(), in);
      float& out = task.y[i * task.y_stride + n];
      out = task.accumulate ? out + dot : dot;
    }
  }
}

float* ThreadScratch(size_t floats) {
  thread_local AlignedBuffer buffer;
  if (buffer.size() < floats * sizeof(float)) buffer = AlignedBuffer(floats * sizeof(float));
  return buffer.as<float>();
}

float* ThreadScratchX(size_t floats) {
  thread_local AlignedBuffer buffer;
  if (buffer.size() < floats * sizeof(float)) buffer = AlignedBuffer(floats * sizeof(float));
  return buffer.as<float>();
}

}  // namespace deepinfer::kernels::cpu
