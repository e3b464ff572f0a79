// Structured output for the chat protocols and the legacy Completions API: a request's constraint
// (recipe/structured_output.h) as the grammar spec the engine constrains its outputs with
// (RequestParams::constraint). Prepare applies it to every chat request, PrepareCompletions to every
// completion (from the first generated token: a raw prompt has no reasoning block). The spec is compiled
// here first, on the caller's thread (a connection's strand or the CLI's, never the engine's step
// thread), so that an invalid one is refused before the request is queued; the compiler
// (sampling/constraint_masks.h: the vocabulary index, built on the first constrained request, and one cache
// of compiled grammars) is the one the engine compiles through, whose compile of the same spec is then a
// cache hit. In thinking mode the reasoning block is free and the constraint starts after
// `</think>`.
//
// Tools constrain the DSML tool-call block (grammar/tool_calls.h) to the request's tools: a tool with a
// call schema (strict: `strict: true`, or a Responses function tool without `strict` whose schema can be made
// strict) by that schema, the others by their schema as written where the grammar can take it (any JSON
// object as arguments where it cannot, or where the schema lists no properties). The grammar applies when
// a call is forced (tool_choice "required" or a named tool: the prompt has opened the block, so the output
// must be calls and a response format has no say; Anthropic "any"), when some tool is strict (free text
// first, the block optional), and when the protocol's JSON format (response_format, text.format,
// output_config.format) sits beside tools: then the output is either the formatted answer or calls, as
// OpenAI does.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/request.h"

namespace deepinfer::engine {
struct RequestParams;
}

namespace deepinfer::pipeline {

struct PrepareOptions;

// Sets params->constraint's grammar from the constraint of `request` (parsed from `body`) once it has
// compiled through options.constraint_compiler, unless the request has none or scripted tokens are set
// already (a test hook's script; the grammar is still checked). Strict tools are written in the DSML
// dialect of options.model_version. Errors: 400 naming the field and the cause (an invalid or unsupported
// schema, regex or grammar, or one over the compile limits; a strict tool's schema the tool-call grammar
// cannot take, naming the tool and the path; structured_outputs / guided_* together with `strict: true` tools);
// 500 when the tokenizer's vocabulary cannot be indexed. Requires options.tokenizer and
// options.constraint_compiler. `warnings` (if given) receives where the compiled constraint accepts more
// than the request's schema: a oneOf taken as anyOf, under `structured_outputs.one_of_as_any_of` (a
// boolean; default options.one_of_as_any_of).
std::optional<recipe::RequestError> ApplyStructuredOutput(std::string_view body, const recipe::ParsedRequest& request,
                                                          const PrepareOptions& options,
                                                          engine::RequestParams* params,
                                                          std::vector<std::string>* warnings = nullptr);

}  // namespace deepinfer::pipeline
