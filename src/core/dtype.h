// Element types of checkpoint tensors, with their safetensors spellings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace deepinfer {

enum class DType : uint8_t {
  kBool,
  kU8,  // also the storage of packed FP4 (E2M1, two values per byte)
  kI8,
  kU16,
  kI16,
  kF16,
  kBF16,
  kU32,
  kI32,
  kF32,
  kU64,
  kI64,
  kF64,
  kF8_E4M3,
  kF8_E5M2,
  kF8_E8M0,  // power-of-two scales (MX formats, ue8m0 block scales)
};

// Bytes per element.
size_t DTypeSize(DType dtype);
// The safetensors name ("BF16", "F8_E4M3", ...).
std::string_view DTypeName(DType dtype);
Result<DType> ParseDType(std::string_view name);

}  // namespace deepinfer
