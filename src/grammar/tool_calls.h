// The grammar of a DSML tool-call block: the block, when the model opens it, names only the given tools,
// and each call's parameters follow that tool's JSON Schema (or, for a tool without one, form any JSON
// object) in DSML's encoding, exactly as deepseek-recipe renders calls (render_v4.cpp / render_v32.cpp
// AppendToolCalls):
//
//   V4:   \n\n<｜DSML｜tool_calls>\n
//         <｜DSML｜invoke name="NAME">\n
//         <｜DSML｜parameter name="KEY" string="true">RAW</｜DSML｜parameter>\n     (one per parameter)
//         </｜DSML｜invoke>
//         \n<｜DSML｜invoke ...>...</｜DSML｜invoke>                                 (more calls)
//         \n</｜DSML｜tool_calls>
//   V4.1: the tags are ` calls`, ` invoke`, ` parameter`; parameters are separated by "\n" (none after the
//         last) and "\n" comes before `</｜DSML｜ invoke>`. V3.2: V4.1's layout with V4's tags, the block
//         tag being `function_calls`.
//
// `｜DSML｜` is an added token: the grammar spells it as TokenIndex::MarkerBytes(0), so the vocabulary
// must be indexed with kDsmlMarkerToken as its first marker (TokenIndex::Options::markers).
//
// Parameters follow the order of the schema's `properties`; a required one is always written, others may
// be left out. Values:
//  - a plain string parameter (`type: "string"` and annotations only, or a string `enum`/`const`) is
//    written raw with string="true" (any text without U+FF5C '｜', so the value can never spell the text of
//    the closing `</｜DSML｜` either; enum members literally);
//  - every other parameter with string="false" and its value as JSON in Python json.dumps spacing,
//    compiled by the JSON Schema front end, integers without a fraction (a constrained string such as one with a pattern or a format
//    is therefore a JSON string literal with string="false", which the output parser decodes the same).
// A tool with free arguments (one that is not strict and whose schema lists no properties, or one this
// grammar cannot take) takes any parameters: names of printable characters without space, quote,
// backslash or '｜', each value raw text or any JSON value.
//
// Outside an opened block the output is free text before an optional block, or, with an answer format
// (response_format / text.format beside the tools), either that JSON answer or a block with no text before
// it: the model either answers in the format or calls tools.
//
// Errors (kInvalidArgument / kUnimplemented, the message naming the tool and the schema path): a tool
// schema that is not an object schema with `properties`, a keyword at the top of the parameters this
// layout cannot honour, a parameter name the DSML text cannot carry, or any JSON Schema front-end error
// of a parameter's schema.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

inline constexpr std::string_view kDsmlMarkerToken = "｜DSML｜";

struct ToolCallTool {
  std::string name;
  std::string parameters;  // the JSON Schema as JSON text; empty: no parameters (unless free_arguments)
  bool free_arguments = false;  // any parameters at all: the arguments are any JSON object
};

// What the output may be instead of calls when the block is not opened.
struct ToolCallAnswer {
  enum class Kind { kText, kJsonObject, kJsonSchema };
  Kind kind = Kind::kText;
  std::string schema;   // kJsonSchema: the schema as JSON text
  bool strict = false;  // kJsonSchema: OpenAI strict (JsonSchemaOptions::strict)
};

struct ToolCallGrammarSpec {
  enum class Dialect { kV4, kV41, kV32 };
  Dialect dialect = Dialect::kV4;
  // The prompt already opened the block (tool_choice "required" or a named tool): the output starts
  // with the first invoke and must be a block. Otherwise free text comes first and the block is optional.
  bool opened = false;
  // Not opened, but the output must be calls all the same (Anthropic tool_choice "any", whose prompt
  // deepseek-recipe renders as "auto"): the output starts with the block's opening tag, no text before.
  bool must_call = false;
  uint32_t max_calls = 0;  // 0: no limit
  ToolCallAnswer answer;   // read only when neither opened nor must_call
  std::vector<ToolCallTool> tools;
};

Result<Grammar> ToolCallGrammar(const ToolCallGrammarSpec& spec);

// The spec as one text (what ConstraintSpec::text carries, so the compiled-grammar cache keys on it) and
// back. The text is length-prefixed fields, not JSON: schemas inside stay as given.
std::string SerializeToolCallSpec(const ToolCallGrammarSpec& spec);
Result<ToolCallGrammarSpec> ParseToolCallSpec(std::string_view text);

}  // namespace deepinfer::grammar
