// libFuzzer target for the tool-call grammar (grammar/tool_calls.h). Input: a flags byte (dialect, whether
// the prompt opened the block, a call limit, an answer format beside the tools), then tools separated by 0xFE,
// each a name, 0x01 and its parameters' JSON Schema (0x02 instead of 0x01: a tool with free arguments), then
// a 0xFF byte and token choices for a matcher run over a vocabulary that holds the DSML marker
// (fuzz_grammar_common.h). A JSON Schema answer uses the first tool's schema text. The text before 0xFF also goes to ParseToolCallSpec as it is,
// and a spec that builds must survive its own serialization unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "fuzz_grammar_common.h"
#include "grammar/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::grammar;
  if (size == 0) return 0;
  const uint8_t* split = static_cast<const uint8_t*>(std::memchr(data, 0xFF, size));
  const size_t text = split ? static_cast<size_t>(split - data) : size;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, text > 0 ? text - 1 : 0);
  (void)ParseToolCallSpec(std::string_view(reinterpret_cast<const char*>(data), text));

  ToolCallGrammarSpec spec;
  spec.dialect = static_cast<ToolCallGrammarSpec::Dialect>(data[0] % 3);
  spec.opened = (data[0] >> 2) & 1;
  spec.max_calls = (data[0] >> 3) & 3;
  spec.answer.kind = static_cast<ToolCallAnswer::Kind>(((data[0] >> 5) & 3) % 3);
  spec.answer.strict = (data[0] >> 7) & 1;
  size_t at = 0;
  while (at <= body.size() && spec.tools.size() < 8) {
    const size_t end = std::min(body.find('\xFE', at), body.size());
    const std::string_view tool = body.substr(at, end - at);
    const size_t sep = tool.find_first_of("\x01\x02");
    ToolCallTool t;
    t.name = std::string(tool.substr(0, sep));
    if (sep != std::string_view::npos) {
      t.parameters = std::string(tool.substr(sep + 1));
      t.free_arguments = tool[sep] == '\x02';
    }
    if (spec.tools.empty()) spec.answer.schema = t.parameters;
    spec.tools.push_back(std::move(t));
    at = end + 1;
  }
  const std::string serialized = SerializeToolCallSpec(spec);
  auto back = ParseToolCallSpec(serialized);
  if (!back.ok() || SerializeToolCallSpec(*back) != serialized) std::abort();
  ConstraintSpec c;
  c.kind = ConstraintSpec::Kind::kToolCalls;
  c.text = serialized;
  FuzzConstraint(c, split ? split + 1 : data + size, split ? size - text - 1 : 0, /*dsml_marker=*/true);
  return 0;
}
