// The structured-output constraint of a chat request, in protocol-neutral form: what the server compiles into
// a grammar (src/grammar) and applies as the engine's logits mask. Sources, at most one per request:
//  - OpenAI `response_format` (Chat Completions) / `text.format` (Responses): json_object or json_schema
//    (strict or not), as the codec already parsed them into the Conversation;
//  - Anthropic `output_config.format` (and the older `output_format`): {"type": "json_schema", "schema"};
//  - vLLM's extension `structured_outputs` {json | regex | choice | grammar | json_object}, and its older
//    top-level spellings guided_json / guided_regex / guided_choice / guided_grammar.
// The extension fields constrain the output only; they do not change the prompt (as in vLLM). The
// protocol formats keep the codec's rendering (deepseek-recipe puts the schema in the system prompt).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/request.h"

namespace deepinfer::recipe {

struct StructuredOutput {
  enum class Kind { kNone, kJsonObject, kJsonSchema, kRegex, kGrammar, kChoice };
  Kind kind = Kind::kNone;
  std::string text;                  // kJsonSchema: the schema (compact JSON); kRegex; kGrammar: EBNF / GBNF
  std::vector<std::string> choices;  // kChoice
  bool strict = false;               // kJsonSchema: OpenAI strict (additionalProperties false by default)
  std::string param;                 // the request field it came from (error messages name it)
  bool protocol_format = false;      // from the protocol's own format field, not a vLLM extension
};

// Reads the constraint of `request` (already parsed from `body` by ParseRequest). Errors (400, naming the
// field): a malformed extension field, or two constraints in one request.
std::optional<RequestError> ReadStructuredOutput(std::string_view body, const ParsedRequest& request,
                                                 StructuredOutput* out);

// The legacy Completions API's request as far as its constraint goes: `response_format` parsed as Chat
// Completions parses it, into a request of that protocol without messages, tools or thinking, so that
// ReadStructuredOutput (and the server's compile) read the same fields with the same errors and the
// constraint applies from the first generated token. Errors: 400 for a malformed response_format.
std::optional<RequestError> ParseCompletionsConstraint(std::string_view body, ParsedRequest* out);

}  // namespace deepinfer::recipe
