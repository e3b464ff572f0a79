// Feeds arbitrary bytes to DeepSeek-V4.1's Engram compressed token map builder as a tokenizer.json of a
// 512-token vocabulary: it either maps every id to a class below the class count it reports, or refuses
// with one line.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/deepseek_v41/v41_engram.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  int64_t classes = 0;
  auto map = deepinfer::model::BuildEngramTokenMapFromJson(text, "tokenizer.json", 512, &classes);
  if (!map.ok()) {
    if (map.status().message().find('\n') != std::string_view::npos) __builtin_trap();
    return 0;
  }
  if (map->size() != 512 || classes <= 0 || classes > 512) __builtin_trap();
  for (int32_t id : *map)
    if (id < 0 || id >= classes) __builtin_trap();
  return 0;
}
