// The tokenizer.json loader on arbitrary documents: an error or a tokenizer, never a crash or a hang.
#include <cstdint>
#include <string_view>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tok = deepinfer::tokenizer::Tokenizer::FromJson(json);
  if (tok.ok()) {
    std::vector<int32_t> ids = tok->EncodeWithAddedTokens("Hello, 世界 123 <｜User｜>");
    (void)tok->Decode(ids);
  }
  return 0;
}
