#include "pipeline/structured_output.h"

#include "core/json.h"
#include "engine/engine.h"
#include "grammar/constraint.h"
#include "grammar/tool_calls.h"
#include "pipeline/prepare.h"
#include "recipe/structured_output.h"
#include "sampling/constraint_masks.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::pipeline {

namespace {

bool HasStrictTools(const recipe::Conversation& c) {
  for (const recipe::ToolDefinition& tool : c.tools) {
    if (tool.strict.value_or(false)) return true;
  }
  return false;
}

// What the request says about calls beyond the Conversation, read from the body the codec has already
// accepted (the codec neither keeps nor echoes it, as deepseek-recipe does not):
// - `parallel_tool_calls: false` (Chat Completions and Responses) or Anthropic's
//   `tool_choice.disable_parallel_tool_use: true`: the strict tool-call grammar writes one call only;
// - Anthropic `tool_choice: {type: "any"}`: the prompt is rendered as "auto" (deepseek-recipe), yet a call
//   is required, so the grammar starts the output with the block.
struct CallRules {
  bool one_call = false;
  bool must_call = false;
};

CallRules ReadCallRules(std::string_view body, recipe::Protocol protocol) {
  CallRules rules;
  auto doc = ParseOrderedJson(body);
  if (!doc.ok() || !doc->is_object()) return rules;
  if (protocol == recipe::Protocol::kMessages) {
    const auto choice = doc->find("tool_choice");
    if (choice == doc->end() || !choice->is_object()) return rules;
    const auto type = choice->find("type");
    rules.must_call = type != choice->end() && *type == "any";
    const auto one = choice->find("disable_parallel_tool_use");
    rules.one_call = one != choice->end() && one->is_boolean() && one->get<bool>();
    return rules;
  }
  const auto it = doc->find("parallel_tool_calls");
  rules.one_call = it != doc->end() && it->is_boolean() && !it->get<bool>();
  return rules;
}

// The tool-call grammar's spec for a request with strict tools (ChooseTools has already narrowed the tools
// to a named tool_choice's and rewritten strict schemas).
grammar::ConstraintSpec ToolCallSpec(std::string_view body, const recipe::ParsedRequest& request,
                                     recipe::ModelVersion version) {
  const recipe::Conversation& c = request.conversation;
  grammar::ToolCallGrammarSpec tools;
  switch (version) {
    case recipe::ModelVersion::kV32: tools.dialect = grammar::ToolCallGrammarSpec::Dialect::kV32; break;
    case recipe::ModelVersion::kV41: tools.dialect = grammar::ToolCallGrammarSpec::Dialect::kV41; break;
    case recipe::ModelVersion::kV4: tools.dialect = grammar::ToolCallGrammarSpec::Dialect::kV4; break;
  }
  // The renderer opens the block in the prompt exactly then (render_v4.cpp, completion_options.cpp).
  tools.opened = c.tool_choice == recipe::ToolChoice::kRequired;
  const CallRules rules = ReadCallRules(body, request.protocol);
  tools.must_call = !tools.opened && rules.must_call;
  if (rules.one_call) tools.max_calls = 1;
  for (const recipe::ToolDefinition& tool : c.tools) {
    tools.tools.push_back({tool.name, tool.parameters.is_null() ? std::string() : tool.parameters.dump()});
  }
  grammar::ConstraintSpec spec;
  spec.kind = grammar::ConstraintSpec::Kind::kToolCalls;
  spec.text = grammar::SerializeToolCallSpec(tools);
  return spec;
}

}  // namespace

std::optional<recipe::RequestError> ApplyStructuredOutput(std::string_view body, const recipe::ParsedRequest& request,
                                                          const PrepareOptions& options,
                                                          engine::RequestParams* params) {
  const tokenizer::Tokenizer& tokenizer = *options.tokenizer;
  sampling::ConstraintCompiler& compiler = *options.constraint_compiler;
  recipe::StructuredOutput so;
  if (auto error = recipe::ReadStructuredOutput(body, request, &so)) return error;
  using Kind = recipe::StructuredOutput::Kind;
  using SpecKind = grammar::ConstraintSpec::Kind;
  const bool strict_tools = HasStrictTools(request.conversation);
  if (so.kind == Kind::kNone && !strict_tools) return std::nullopt;
  if (so.kind != Kind::kNone && strict_tools) {
    return recipe::RequestError{400, "invalid_request_error", so.param,
                                so.param + " cannot be combined with strict tools (their calls are constrained already)"};
  }
  if (strict_tools) {
    if (!tokenizer.TokenToId(grammar::kDsmlMarkerToken)) {
      return recipe::RequestError{400, "invalid_request_error", "tools",
                                  "strict tools need the model's ｜DSML｜ token, which this tokenizer lacks"};
    }
    so.param = "tools";
  }
  grammar::ConstraintSpec spec;
  if (strict_tools) spec = ToolCallSpec(body, request, options.model_version);
  switch (so.kind) {
    case Kind::kJsonObject: spec.kind = SpecKind::kJsonObject; break;
    case Kind::kJsonSchema: spec.kind = SpecKind::kJsonSchema; break;
    case Kind::kRegex: spec.kind = SpecKind::kRegex; break;
    case Kind::kGrammar: spec.kind = SpecKind::kEbnf; break;
    case Kind::kChoice: spec.kind = SpecKind::kChoice; break;
    case Kind::kNone: break;
  }
  if (!strict_tools) {
    spec.text = so.text;
    spec.choices = so.choices;
    spec.json.strict = so.strict;
  }
  auto vocab = compiler.Vocab();
  if (!vocab.ok()) {
    return recipe::RequestError{500, "api_error", "", "structured output is unavailable: " + vocab.status().message()};
  }
  auto bound = compiler.Compile(spec);
  // Every compile failure is the request's: invalid, unsupported, over a size limit or too slow to compile.
  if (!bound.ok()) return recipe::RequestError{400, "invalid_request_error", so.param, so.param + ": " + bound.status().message()};
  if (params->constraint.scripted_tokens) return std::nullopt;
  int32_t start_after = -1;
  if (request.conversation.thinking_mode) {
    if (auto id = tokenizer.TokenToId("</think>")) start_after = *id;
  }
  params->constraint.grammar = std::move(spec);
  params->constraint.grammar_start_after_token = start_after;
  return std::nullopt;
}

}  // namespace deepinfer::pipeline
