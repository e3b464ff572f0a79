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

// A tool the request marked `strict: true` (an implicitly strict Responses tool is not: it falls back to
// free arguments where its schema cannot be constrained, as OpenAI's best-effort mode does).
bool HasExplicitlyStrictTools(const recipe::Conversation& c) {
  for (const recipe::ToolDefinition& tool : c.tools) {
    if (tool.strict.value_or(false)) return true;
  }
  return false;
}

bool HasConstrainedTools(const recipe::Conversation& c) {
  for (const recipe::ToolDefinition& tool : c.tools) {
    if (!tool.call_schema.is_null()) return true;
  }
  return false;
}

// What the request says about calls beyond the Conversation, read from the body the codec has already
// accepted (the codec neither keeps nor echoes it, as deepseek-recipe does not):
// - `parallel_tool_calls: false` (Chat Completions and Responses) or Anthropic's
//   `tool_choice.disable_parallel_tool_use: true`: the tool-call grammar writes one call only;
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

// The request's `structured_outputs.one_of_as_any_of` into `*out` where it is given; 400 unless a boolean.
std::optional<recipe::RequestError> ReadOneOfAsAnyOf(std::string_view body, bool* out) {
  if (body.find("one_of_as_any_of") == std::string_view::npos) return std::nullopt;  // no second parse then
  auto doc = ParseOrderedJson(body);
  if (!doc.ok() || !doc->is_object()) return std::nullopt;
  const auto so = doc->find("structured_outputs");
  if (so == doc->end() || !so->is_object()) return std::nullopt;
  const auto flag = so->find("one_of_as_any_of");
  if (flag == so->end()) return std::nullopt;
  const std::string param = "structured_outputs.one_of_as_any_of";
  if (!flag->is_boolean()) return recipe::RequestError{400, "invalid_request_error", param, param + " must be a boolean"};
  *out = flag->get<bool>();
  return std::nullopt;
}

// The tool-call grammar's spec (ChooseTools has already narrowed the tools to a named tool_choice's and
// rewritten strict schemas): strict tools by their call schema, the others by their schema as written;
// with `free_arguments` (the grammar could not take those schemas) every tool not marked strict takes any
// arguments. `answer` is what the output may be instead of calls.
grammar::ConstraintSpec ToolCallSpec(const recipe::ParsedRequest& request, const CallRules& rules,
                                     recipe::ModelVersion version, const grammar::ToolCallAnswer& answer,
                                     bool free_arguments) {
  const recipe::Conversation& c = request.conversation;
  grammar::ToolCallGrammarSpec tools;
  switch (version) {
    case recipe::ModelVersion::kV32: tools.dialect = grammar::ToolCallGrammarSpec::Dialect::kV32; break;
    case recipe::ModelVersion::kV41: tools.dialect = grammar::ToolCallGrammarSpec::Dialect::kV41; break;
    case recipe::ModelVersion::kV4: tools.dialect = grammar::ToolCallGrammarSpec::Dialect::kV4; break;
  }
  // The renderer opens the block in the prompt exactly then (render_v4.cpp, completion_options.cpp).
  tools.opened = c.tool_choice == recipe::ToolChoice::kRequired;
  tools.must_call = !tools.opened && rules.must_call;
  tools.answer = answer;
  if (rules.one_call) tools.max_calls = 1;
  for (const recipe::ToolDefinition& tool : c.tools) {
    const bool best_effort = free_arguments && !tool.strict.value_or(false);
    if (!tool.call_schema.is_null() && !best_effort) {
      tools.tools.push_back({tool.name, tool.call_schema.dump(), false});
    } else if (!best_effort && !tool.custom && tool.parameters.is_object() && tool.parameters.contains("properties")) {
      // A tool that is not strict: its schema as written where the grammar can take it, as vLLM and SGLang
      // constrain a forced call (clients such as instructor send schemas they expect honoured without
      // `strict`). A schema without properties says nothing about the members: any arguments.
      tools.tools.push_back({tool.name, tool.parameters.dump(), false});
    } else {
      tools.tools.push_back({tool.name, std::string(), true});
    }
  }
  grammar::ConstraintSpec spec;
  spec.kind = grammar::ConstraintSpec::Kind::kToolCalls;
  spec.text = grammar::SerializeToolCallSpec(tools);
  return spec;
}

}  // namespace

std::optional<recipe::RequestError> ApplyStructuredOutput(std::string_view body, const recipe::ParsedRequest& request,
                                                          const PrepareOptions& options,
                                                          engine::RequestParams* params,
                                                          std::vector<std::string>* warnings) {
  const tokenizer::Tokenizer& tokenizer = *options.tokenizer;
  sampling::ConstraintCompiler& compiler = *options.constraint_compiler;
  recipe::StructuredOutput so;
  if (auto error = recipe::ReadStructuredOutput(body, request, &so)) return error;
  bool one_of_as_any_of = options.one_of_as_any_of;
  if (auto error = ReadOneOfAsAnyOf(body, &one_of_as_any_of)) return error;
  using Kind = recipe::StructuredOutput::Kind;
  using SpecKind = grammar::ConstraintSpec::Kind;
  const recipe::Conversation& c = request.conversation;
  // The rules matter only beside tools (a forced call, the tool-call grammar): no parse of the body without.
  const CallRules rules = c.tools.empty() ? CallRules{} : ReadCallRules(body, request.protocol);
  // Which grammar the output gets: the tool-call grammar whenever a call is forced (the prompt opened the
  // block, or Anthropic "any"; the format then has no say, the output being calls), tools are constrained,
  // or the protocol's JSON format sits beside tools (the model calls a tool or answers in the format, as
  // OpenAI does); otherwise the request's constraint alone.
  const bool forced = !c.tools.empty() && (c.tool_choice == recipe::ToolChoice::kRequired || rules.must_call);
  const bool explicit_strict = HasExplicitlyStrictTools(c);
  const bool format_answer = so.protocol_format && (so.kind == Kind::kJsonObject || so.kind == Kind::kJsonSchema);
  bool tool_grammar = !c.tools.empty() && (forced || HasConstrainedTools(c) || format_answer);
  if (tool_grammar && !forced && so.kind != Kind::kNone && !format_answer) {
    if (explicit_strict) {
      return recipe::RequestError{400, "invalid_request_error", so.param,
                                  so.param + " cannot be combined with strict tools (their calls are constrained already)"};
    }
    tool_grammar = false;  // an extension constraint beside implicitly strict tools: the constraint decides
  }
  if (tool_grammar && !tokenizer.TokenToId(grammar::kDsmlMarkerToken)) {
    if (explicit_strict) {
      return recipe::RequestError{400, "invalid_request_error", "tools",
                                  "strict tools need the model's ｜DSML｜ token, which this tokenizer lacks"};
    }
    tool_grammar = false;
    if (forced) so = {};
  }
  if (!tool_grammar && so.kind == Kind::kNone) return std::nullopt;
  grammar::ConstraintSpec spec;
  grammar::ToolCallAnswer answer;
  if (tool_grammar) {
    if (format_answer) {
      answer.kind = so.kind == Kind::kJsonObject ? grammar::ToolCallAnswer::Kind::kJsonObject
                                                 : grammar::ToolCallAnswer::Kind::kJsonSchema;
      answer.schema = so.text;
      answer.strict = so.strict;
    }
    spec = ToolCallSpec(request, rules, options.model_version, answer, false);
    if (!format_answer) so.param = "tools";
  } else {
    switch (so.kind) {
      case Kind::kJsonObject: spec.kind = SpecKind::kJsonObject; break;
      case Kind::kJsonSchema: spec.kind = SpecKind::kJsonSchema; break;
      case Kind::kRegex: spec.kind = SpecKind::kRegex; break;
      case Kind::kGrammar: spec.kind = SpecKind::kEbnf; break;
      case Kind::kChoice: spec.kind = SpecKind::kChoice; break;
      case Kind::kNone: break;
    }
    spec.text = so.text;
    spec.choices = so.choices;
    spec.json.strict = so.strict;
    spec.json.one_of_as_any_of = one_of_as_any_of && so.kind == Kind::kJsonSchema;
  }
  auto vocab = compiler.Vocab();
  if (!vocab.ok()) {
    return recipe::RequestError{500, "api_error", "", "structured output is unavailable: " + vocab.status().message()};
  }
  auto bound = compiler.Compile(spec);
  if (!bound.ok() && tool_grammar) {
    // A schema of a tool not marked strict that the grammar cannot take: best-effort calls, as OpenAI's
    // Responses API falls back to for a schema it cannot make strict. (A strict tool's failure stays.)
    spec = ToolCallSpec(request, rules, options.model_version, answer, true);
    bound = compiler.Compile(spec);
  }
  // Every compile failure is the request's: invalid, unsupported, over a size limit or too slow to compile.
  // The tool-call grammar's failures name the tool (or say "answer format" for the format's).
  if (!bound.ok()) {
    const std::string& message = bound.status().message();
    const std::string param = tool_grammar && message.rfind("answer format: ", 0) != 0 ? "tools" : so.param;
    return recipe::RequestError{400, "invalid_request_error", param, param + ": " + message};
  }
  if (warnings) *warnings = (*bound)->grammar().warnings();
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
