// libFuzzer target for the ebnf front end: input = a constraint text, then a 0xFF byte, then token
// choices for a matcher run (fuzz_grammar_common.h).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_grammar_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* split = static_cast<const uint8_t*>(std::memchr(data, 0xFF, size));
  size_t text = split ? static_cast<size_t>(split - data) : size;
  deepinfer::grammar::ConstraintSpec spec;
  spec.kind = deepinfer::grammar::ConstraintSpec::Kind::kEbnf;
  spec.text.assign(reinterpret_cast<const char*>(data), text);
  FuzzConstraint(spec, split ? split + 1 : data + size, split ? size - text - 1 : 0);
  return 0;
}
