#include "core/weight_scan.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

namespace deepinfer {

namespace {

// Non-finite values in bytes [begin, end) of a tensor's data (begin and end aligned to its element size).
int64_t CountNonFinite(DType dtype, const uint8_t* p, size_t n) {
  int64_t count = 0;
  switch (dtype) {
    case DType::kF32:
      for (size_t i = 0; i + 4 <= n; i += 4) {
        uint32_t v;
        std::memcpy(&v, p + i, 4);
        count += (v & 0x7F800000u) == 0x7F800000u;
      }
      break;
    case DType::kF64:
      for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t v;
        std::memcpy(&v, p + i, 8);
        count += (v & 0x7FF0000000000000ull) == 0x7FF0000000000000ull;
      }
      break;
    case DType::kBF16:
    case DType::kF16: {
      const uint16_t mask = dtype == DType::kBF16 ? 0x7F80 : 0x7C00;
      for (size_t i = 0; i + 2 <= n; i += 2) {
        uint16_t v;
        std::memcpy(&v, p + i, 2);
        count += (v & mask) == mask;
      }
      break;
    }
    case DType::kF8_E4M3:  // no infinities; NaN is S.1111.111
      for (size_t i = 0; i < n; ++i) count += (p[i] & 0x7F) == 0x7F;
      break;
    case DType::kF8_E5M2:
      for (size_t i = 0; i < n; ++i) count += (p[i] & 0x7C) == 0x7C;
      break;
    case DType::kF8_E8M0:  // 0xFF is NaN
      for (size_t i = 0; i < n; ++i) count += p[i] == 0xFF;
      break;
    default:
      break;
  }
  return count;
}

}  // namespace

NonFiniteReport ScanNonFinite(const Checkpoint& checkpoint, ThreadPool* pool) {
  const std::vector<const TensorInfo*>& tensors = checkpoint.tensors();
  // Work items of at most 4 MiB so that one huge tensor still spreads over the threads.
  struct Item {
    size_t tensor;
    uint64_t begin, end;
  };
  std::vector<Item> items;
  constexpr uint64_t kChunk = uint64_t{4} << 20;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const TensorInfo& info = *tensors[t];
    if (info.data == nullptr) continue;
    for (uint64_t b = 0; b < info.nbytes(); b += kChunk) items.push_back({t, b, std::min(info.nbytes(), b + kChunk)});
  }
  std::vector<std::atomic<int64_t>> partial(tensors.size());
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Item& it = items[static_cast<size_t>(i)];
      const TensorInfo& info = *tensors[it.tensor];
      const int64_t c = CountNonFinite(info.dtype, info.data + it.begin, it.end - it.begin);
      if (c) partial[it.tensor].fetch_add(c, std::memory_order_relaxed);
    }
  };
  if (pool != nullptr) pool->ParallelFor(static_cast<int64_t>(items.size()), run, 1);
  else run(0, static_cast<int64_t>(items.size()));
  NonFiniteReport report;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int64_t c = partial[t].load(std::memory_order_relaxed);
    if (c == 0) continue;
    report.values += c;
    if (report.tensors++ == 0) report.first = tensors[t]->name;
  }
  return report;
}

}  // namespace deepinfer
