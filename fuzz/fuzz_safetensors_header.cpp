// Feeds arbitrary bytes to the safetensors header parser as if they were a whole file.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto header = deepinfer::ParseSafetensorsHeader(bytes, size);
  if (header.ok()) {
    for (const auto& t : header->tensors) {
      // Accepted offsets must lie inside the file: the reader hands out pointers from them.
      if (header->data_offset + t.data_end > size) __builtin_trap();
    }
  } else if (header.status().message().find('\n') != std::string::npos) {
    __builtin_trap();  // errors are one line
  }
  return 0;
}
