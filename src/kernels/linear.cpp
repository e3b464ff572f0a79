#include "kernels/linear.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/linear_kernels.h"
#include "kernels/linear_dispatch.h"
#include "kernels/number_formats.h"

namespace deepinfer::kernels {
namespace {

[[noreturn]] void FailPrecondition(const Status& status) {
  std::fprintf(stderr, "kernels::Linear: %s\n", status.ToString().c_str());
  std::abort();
}

// kBf16Activations needs weights whose dequantised values are exact in bf16: BF16, MXFP4, and FP8 with
// power-of-two (UE8M0) scales.
bool WeightsExactInBf16(const WeightView& w) {
  switch (w.format) {
    case WeightFormat::kF32:
      return false;
    case WeightFormat::kBF16:
      return true;
    case WeightFormat::kFP8Block:
      return w.scale_format == ScaleFormat::kUE8M0;
    case WeightFormat::kMXFP4:
      return true;
  }
  return false;
}

cpu::LinearRangeFn KernelFor(Isa isa, LinearPrecision precision, const WeightView& w) {
  if (precision == LinearPrecision::kBf16Activations && WeightsExactInBf16(w)) {
    // The same arithmetic everywhere: the instruction, or its exact emulation.
    switch (isa) {
      case Isa::kAvx512Bf16: return cpu::LinearRangeAvx512Bf16;
      case Isa::kAvx512:
      case Isa::kAvx2: return cpu::LinearRangeBf16EmulatedAvx2;
      case Isa::kScalar: return cpu::LinearRangeBf16EmulatedScalar;
    }
  }
  switch (isa) {
    case Isa::kAvx512Bf16:
      return cpu::LinearRangeAvx512;
    case Isa::kAvx512:
      return cpu::LinearRangeAvx512;
    case Isa::kAvx2:
      return cpu::LinearRangeAvx2;
    case Isa::kScalar:
      return cpu::LinearRangeScalar;
  }
  return cpu::LinearRangeScalar;
}

// Below this many multiply-adds the pool's hand-off costs more than it saves.
constexpr int64_t kMinParallelWork = int64_t{1} << 17;

}  // namespace

Status ValidateWeightView(const WeightView& w) {
  if (w.out_features < 0 || w.in_features < 0) return Status::InvalidArgument("negative weight shape");
  if (w.data == nullptr && w.out_features > 0 && w.in_features > 0) {
    return Status::InvalidArgument("weight data is null");
  }
  switch (w.format) {
    case WeightFormat::kF32:
    case WeightFormat::kBF16:
      return Status::Ok();
    case WeightFormat::kFP8Block:
      if (w.block_out <= 0 || w.block_in <= 0) return Status::InvalidArgument("FP8 block shape must be positive");
      if (w.scales == nullptr) return Status::InvalidArgument("FP8 weight without scales");
      return Status::Ok();
    case WeightFormat::kMXFP4:
      if (w.in_features % 32 != 0) {
        return Status::InvalidArgument("MXFP4 in_features " + std::to_string(w.in_features) +
                                       " is not a multiple of 32");
      }
      if (w.scales == nullptr) return Status::InvalidArgument("MXFP4 weight without scales");
      return Status::Ok();
  }
  return Status::InvalidArgument("unknown weight format");
}

Result<WeightView> SliceRows(const WeightView& w, int64_t begin, int64_t count) {
  if (begin < 0 || count < 0 || begin + count > w.out_features) {
    return Status::OutOfRange("rows [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                              ") outside a weight of " + std::to_string(w.out_features) + " rows");
  }
  WeightView slice = w;
  slice.out_features = count;
  const auto* data = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  switch (w.format) {
    case WeightFormat::kF32:
      slice.data = data + begin * w.in_features * 4;
      break;
    case WeightFormat::kBF16:
      slice.data = data + begin * w.in_features * 2;
      break;
    case WeightFormat::kFP8Block: {
      if (w.block_out <= 0 || begin % w.block_out != 0) {
        return Status::InvalidArgument("FP8 row slice must start on a block boundary (block_out " +
                                       std::to_string(w.block_out) + "), not at row " + std::to_string(begin));
      }
      const int64_t scale_cols = (w.in_features + w.block_in - 1) / w.block_in;
      slice.data = data + begin * w.in_features;
      slice.scales = scales + (begin / w.block_out) * scale_cols * (w.scale_format == ScaleFormat::kF32 ? 4 : 1);
      break;
    }
    case WeightFormat::kMXFP4:
      slice.data = data + begin * (w.in_features / 2);
      slice.scales = scales + begin * (w.in_features / 32);
      break;
  }
  return slice;
}

bool Fp8ContainsNanCodes(const WeightView& w) {
  if (w.format != WeightFormat::kFP8Block || w.data == nullptr) return false;
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  const int64_t count = w.out_features * w.in_features;
  // Eight bytes at a time: a byte is a NaN code iff its low seven bits are all ones, i.e. iff adding one
  // to them carries into bit 7 (which never carries further, the low bits being at most 0x7F).
  constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7Full, kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  int64_t i = 0;
  uint64_t found = 0;
  for (; i + 8 <= count; i += 8) {
    uint64_t v;
    std::memcpy(&v, bytes + i, 8);
    found |= ((v & kLow7) + kOnes) & kHigh;
    if ((i & 0xFFFF) == 0 && found != 0) return true;
  }
  for (; i < count; ++i) found |= (bytes[i] & 0x7F) == 0x7F;
  return found != 0;
}

int64_t WeightBytes(const WeightView& w) {
  const int64_t elements = w.out_features * w.in_features;
  switch (w.format) {
    case WeightFormat::kF32:
      return elements * 4;
    case WeightFormat::kBF16:
      return elements * 2;
    case WeightFormat::kFP8Block: {
      const int64_t blocks =
          ((w.out_features + w.block_out - 1) / w.block_out) * ((w.in_features + w.block_in - 1) / w.block_in);
      return elements + blocks * (w.scale_format == ScaleFormat::kF32 ? 4 : 1);
    }
    case WeightFormat::kMXFP4:
      return elements / 2 + elements / 32;
  }
  return 0;
}

void LinearWithIsa(Isa isa, const float* x, int64_t m, int64_t x_stride, const WeightView& w, float* y,
                   int64_t y_stride, const LinearOptions& options, ThreadPool* pool) {
  if (Status status = ValidateWeightView(w); !status.ok()) FailPrecondition(status);
  if (m < 0) FailPrecondition(Status::InvalidArgument("negative m"));
  if (m == 0 || w.out_features == 0) return;
  cpu::LinearTask task;
  task.x = x;
  task.m = m;
  task.x_stride = x_stride;
  task.w = &w;
  task.y = y;
  task.y_stride = y_stride;
  task.accumulate = options.accumulate;
  const cpu::LinearRangeFn kernel = KernelFor(isa, options.precision, w);

  std::vector<uint16_t> x_bf16;
  if (kernel == cpu::LinearRangeAvx512Bf16 || kernel == cpu::LinearRangeBf16EmulatedAvx2 ||
      kernel == cpu::LinearRangeBf16EmulatedScalar) {
    // Rounded to bf16 and zero-padded to whole 32-element chunks; denormals become zeros here (which
    // vdpbf16ps does anyway), so that the emulations need not.
    const int64_t padded = (w.in_features + 31) / 32 * 32;
    x_bf16.assign(static_cast<size_t>(m * padded), 0);
    for (int64_t i = 0; i < m; ++i) {
      uint16_t* row = x_bf16.data() + i * padded;
      FloatToBf16(x + i * x_stride, row, w.in_features);
      for (int64_t k = 0; k < w.in_features; ++k) row[k] = cpu::Bf16DenormalsToZero(row[k]);
    }
    task.x_bf16 = x_bf16.data();
    task.x_bf16_stride = padded;
  }

  const int64_t n = w.out_features;
  const int64_t work = m * n * std::max<int64_t>(w.in_features, 1);
  if (pool == nullptr || pool->size() == 1 || work < kMinParallelWork) {
    kernel(task, 0, n);
    return;
  }
  // About four chunks per thread for balance, in whole groups of 16 outputs; every output is computed
  // whole by one thread, so the split never changes a result.
  const int64_t target_chunks = int64_t{4} * pool->size();
  int64_t grain = (n + target_chunks - 1) / target_chunks;
  grain = std::max<int64_t>(16, (grain + 15) / 16 * 16);
  // FP8: whole scale blocks of rows where that still feeds every thread, so that the decode kernels
  // prepare each block's scaled x once rather than once per piece of the block.
  if (w.format == WeightFormat::kFP8Block && w.block_out > grain) {
    const int64_t blocks = (grain + w.block_out - 1) / w.block_out * w.block_out;
    if ((n + blocks - 1) / blocks >= pool->size()) grain = blocks;
  }
  pool->ParallelFor(
      n, [&](int64_t begin, int64_t end) { kernel(task, begin, end); }, grain);
}

void Linear(const float* x, int64_t m, int64_t x_stride, const WeightView& w, float* y, int64_t y_stride,
            const LinearOptions& options, ThreadPool* pool) {
  LinearWithIsa(BestIsa(), x, m, x_stride, w, y, y_stride, options, pool);
}

void Linear(const float* x, int64_t m, int64_t x_stride, const WeightView& w, float* y, int64_t y_stride,
            ThreadPool* pool) {
  Linear(x, m, x_stride, w, y, y_stride, LinearOptions{}, pool);
}

}  // namespace deepinfer::kernels
