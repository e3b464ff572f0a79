// Degenerate checkpoints: counting the NaN and Inf values of every floating-point tensor. A model with
// such weights loads and runs (the forward pass stays faithful: NaN propagates where it reaches), but it
// can only produce NaN logits there, so loaders report it loudly instead of letting a server answer
// with empty completions and exit 0.
#pragma once

#include <cstdint>
#include <string>

#include "core/safetensors.h"
#include "core/thread_pool.h"

namespace deepinfer {

struct NonFiniteReport {
  int64_t values = 0;   // NaN or Inf values (codes, for the 8-bit formats) over all tensors
  int64_t tensors = 0;  // tensors holding at least one
  std::string first;    // the first such tensor, by name
};

// Scans F32, F16, BF16, F64, F8_E4M3 (NaN codes 0x7F/0xFF), F8_E5M2 and F8_E8M0 (0xFF) tensors; other
// dtypes hold no non-finite values. Reads every weight byte once, split over the pool.
NonFiniteReport ScanNonFinite(const Checkpoint& checkpoint, ThreadPool* pool);

}  // namespace deepinfer
