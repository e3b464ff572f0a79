#include "tokenizer/unicode_classes.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace deepinfer::tokenizer::unicode_classes {

const ClassTable& ClassTable::Get() {
  static const ClassTable* table = new ClassTable();  // never destroyed: used from pool threads
  return *table;
}

ClassTable::ClassTable() {
  std::vector<uint8_t> flat(0x110000, 0);
  for (size_t i = 0; i < kNumClassRanges; ++i) {
    for (uint32_t cp = kClassRanges[i].begin; cp < kClassRanges[i].end; ++cp) flat[cp] = kClassRanges[i].bits;
  }
  std::map<std::string, uint16_t> seen;
  std::vector<uint8_t> blocks;
  for (uint32_t b = 0; b < 0x1100; ++b) {
    std::string key(reinterpret_cast<const char*>(flat.data() + b * 256), 256);
    auto [it, inserted] = seen.emplace(key, static_cast<uint16_t>(seen.size()));
    if (inserted) blocks.insert(blocks.end(), flat.begin() + b * 256, flat.begin() + (b + 1) * 256);
    block_index_[b] = it->second;
  }
  blocks_ = new uint8_t[blocks.size()];
  std::memcpy(blocks_, blocks.data(), blocks.size());
}

}  // namespace deepinfer::tokenizer::unicode_classes
