// A request body to what the engine runs and what shapes its response: the protocol's request parsed and
// checked (the codec for the chat protocols, this component for the legacy Completions API), the model
// name, the prompt rendered and tokenized, the context length, the engine's parameters, and a chat
// request's structured output as the grammar the engine constrains it with (structured_output.h). Each
// refusal is the protocol's error (api.h): the server answers it, `deepinfer generate` prints it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "pipeline/api.h"
#include "pipeline/update_translator.h"
#include "recipe/prompt_tokens.h"
#include "recipe/request.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}
namespace deepinfer::sampling {
class ConstraintCompiler;
}

namespace deepinfer::pipeline {

struct PrepareOptions {
  const tokenizer::Tokenizer* tokenizer = nullptr;  // required
  recipe::ControlTokenIds control_ids{};              // recipe::ControlTokenIds::FromTokenizer(*tokenizer)
  recipe::ModelVersion model_version = recipe::ModelVersion::kV4;  // also the DSML dialect of strict tools
  // What structured output compiles through, shared with the engine (EngineOptions::constraint_compiler),
  // whose compile of a prepared request's grammar is then a cache hit. Null: no request is constrained and
  // none is refused for its constraint; only for requests that will not run (a server without an engine
  // answers them 503, not a grammar's 400).
  std::shared_ptr<sampling::ConstraintCompiler> constraint_compiler;
  bool default_thinking_mode = true;
  // Names a request's `model` may give; the first is the one responses carry. Empty: any name.
  std::vector<std::string> served_model_names;
  int64_t max_model_len = 4096;  // prompt + completion tokens
  // Chat requests: what the request leaves unset (the legacy Completions API has OpenAI's own defaults).
  // Without max_tokens a request gets default_max_tokens, or without that the rest of the context.
  sampling::SamplingParams default_sampling;
  std::optional<int64_t> default_max_tokens;
  // The `deepinfer_test_output` request field scripts the model's output (tests only).
  bool enable_test_hooks = false;
  // What a request without structured_outputs.one_of_as_any_of gets: a JSON Schema oneOf that cannot be
  // made exclusive compiles as anyOf (grammar::JsonSchemaOptions::one_of_as_any_of) instead of a 400.
  bool one_of_as_any_of = false;
};

// 404 when `model` is none of the served names.
std::optional<ApiError> CheckModelName(const PrepareOptions& options, std::string_view model);

// A chat request's prompt: the parsed request and its ids. A prompt of more than `max_ids` ids is not
// encoded to the end (Tokenizer::EncodeWithin): `ids` stays empty and `at_least_ids` (> max_ids) is what
// is known of its length.
struct ChatPrompt {
  recipe::ParsedRequest request;
  std::vector<int32_t> ids;
  int64_t at_least_ids = 0;
};
struct ChatPromptOutcome {
  std::optional<ChatPrompt> prompt;
  RequestRefusal refusal;
  bool ok() const { return prompt.has_value(); }
};
// Parse, model name, render, tokenize: the start of Prepare, and all of what token-counting endpoints need.
ChatPromptOutcome PrepareChatPrompt(recipe::Protocol protocol, std::string_view body, const PrepareOptions& options,
                                    size_t max_ids = SIZE_MAX);

struct PreparedRequest {
  Api api = Api::kChatCompletions;
  std::vector<int32_t> prompt;
  // The legacy Completions API's further prompts (a list of prompts): one engine request each, with the
  // same parameters; their choices follow the first prompt's (prompt-major, CompletionsShape).
  std::vector<std::vector<int32_t>> more_prompts;
  engine::RequestParams params;
  recipe::ParsedRequest request;  // chat protocols: the parsed request (its translator takes it)
  CompletionsShape completions;   // the legacy Completions API: what shapes its response
  // Where the output's constraint accepts more than the request asked (grammar::Grammar::warnings): the
  // server logs each and names it in the response.
  std::vector<std::string> warnings;
  bool stream() const;
  // The request's translator (update_translator.h). Call once: it takes the parsed request.
  std::unique_ptr<UpdateTranslator> TakeTranslator(ResponseContext context);
};
struct PrepareOutcome {
  std::optional<PreparedRequest> request;
  RequestRefusal refusal;
  bool ok() const { return request.has_value(); }
};
PrepareOutcome Prepare(Api api, std::string_view body, const PrepareOptions& options);

}  // namespace deepinfer::pipeline
