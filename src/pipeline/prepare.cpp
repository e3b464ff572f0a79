#include "pipeline/prepare.h"

#include <algorithm>

#include "pipeline/request_fields.h"
#include "pipeline/structured_output.h"
#include "recipe/render.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::pipeline {

std::optional<ApiError> CheckModelName(const PrepareOptions& options, std::string_view model) {
  if (options.served_model_names.empty()) return std::nullopt;
  for (const auto& name : options.served_model_names)
    if (name == model) return std::nullopt;
  ApiError e;
  e.status = 404;
  e.param = "model";
  e.code = "model_not_found";
  e.message = "The model `" + std::string(model) + "` does not exist (this server serves `" +
              options.served_model_names.front() + "`).";
  return e;
}

namespace {

// The context check every chat request passes before it reaches the engine. `at_least`: the prompt was
// refused while being encoded (PrepareChatPrompt's max_ids), so `prompt_tokens` is a lower bound.
std::optional<recipe::RequestError> CheckContext(recipe::Protocol protocol, int64_t prompt_tokens, bool at_least,
                                                 std::optional<int64_t> max_tokens, int64_t max_model_len) {
  const bool over = at_least || prompt_tokens >= max_model_len ||
                    (max_tokens && prompt_tokens + *max_tokens > max_model_len);
  if (!over) return std::nullopt;
  const std::string bound = at_least ? "at least " : "";
  recipe::RequestError e;
  if (protocol == recipe::Protocol::kMessages) {
    e.message = "prompt is too long: " + bound + std::to_string(prompt_tokens) + " tokens + max_tokens " +
                std::to_string(max_tokens.value_or(0)) + " > " + std::to_string(max_model_len) + " maximum";
  } else {
    e.param = protocol == recipe::Protocol::kResponses ? "input" : "messages";
    e.message = "This model's maximum context length is " + std::to_string(max_model_len) +
                " tokens. However, you requested " + bound + std::to_string(prompt_tokens + max_tokens.value_or(0)) +
                " tokens (" + bound + std::to_string(prompt_tokens) + " in the messages, " +
                std::to_string(max_tokens.value_or(0)) +
                " in the completion). Please reduce the length of the messages or completion.";
  }
  return e;
}

}  // namespace

ChatPromptOutcome PrepareChatPrompt(recipe::Protocol protocol, std::string_view body, const PrepareOptions& options,
                                    size_t max_ids) {
  ChatPromptOutcome out;
  const ApiFamily family = FamilyOf(ApiOf(protocol));
  recipe::RequestOptions request_options;
  request_options.model_version = options.model_version;
  request_options.default_thinking_mode = options.default_thinking_mode;
  request_options.max_n = sampling::kMaxN;  // the engine samples n outputs of one prompt
  recipe::ParseOutcome parsed = recipe::ParseRequest(protocol, body, request_options);
  if (!parsed.ok()) {
    out.refusal = Refuse(protocol, parsed.error);
    return out;
  }
  if (auto error = CheckModelName(options, parsed.request->model)) {
    out.refusal = Refuse(family, *error);
    return out;
  }
  auto rendered = recipe::RenderPrompt(parsed.request->conversation, options.model_version);
  if (!rendered.ok()) {
    out.refusal = Refuse(family, Invalid("messages", rendered.status().message()));
    return out;
  }
  auto ids = recipe::TokenizePrompt(*rendered, *options.tokenizer, options.control_ids, max_ids);
  if (!ids.ok() && ids.status().code() == StatusCode::kOutOfRange && max_ids != SIZE_MAX) {
    out.prompt.emplace();
    out.prompt->request = std::move(*parsed.request);
    out.prompt->at_least_ids = static_cast<int64_t>(max_ids) + 1;
    return out;
  }
  if (!ids.ok()) {
    ApiError e;
    e.status = 500;
    e.message = "the prompt cannot be encoded with this model's tokenizer: " + ids.status().message();
    out.refusal = Refuse(family, e);
    return out;
  }
  out.prompt.emplace();
  out.prompt->request = std::move(*parsed.request);
  out.prompt->ids = std::move(*ids);
  return out;
}

PrepareOutcome Prepare(Api api, std::string_view body, const PrepareOptions& options) {
  const std::optional<recipe::Protocol> protocol = ChatProtocol(api);
  if (!protocol) return PrepareCompletions(body, options);
  PrepareOutcome out;
  // The longest prompt any request may have (CheckContext): one more id and it is refused, the rest of a
  // long prompt never encoded.
  const size_t max_prompt_ids = static_cast<size_t>(std::max<int64_t>(options.max_model_len - 1, 0));
  ChatPromptOutcome prompt = PrepareChatPrompt(*protocol, body, options, max_prompt_ids);
  if (!prompt.ok()) {
    out.refusal = std::move(prompt.refusal);
    return out;
  }
  const bool at_least = prompt.prompt->at_least_ids > 0;
  const int64_t prompt_tokens = at_least ? prompt.prompt->at_least_ids : static_cast<int64_t>(prompt.prompt->ids.size());
  const recipe::InferenceOptions& inf = prompt.prompt->request.inference;
  if (auto error = CheckContext(*protocol, prompt_tokens, at_least, inf.max_tokens, options.max_model_len)) {
    out.refusal = Refuse(*protocol, *error);
    return out;
  }
  engine::RequestParams params;
  std::vector<std::string> warnings;
  params.sampling = options.default_sampling;
  params.sampling.max_tokens =
      inf.max_tokens.value_or(options.default_max_tokens.value_or(options.max_model_len - prompt_tokens));
  if (inf.temperature) params.sampling.temperature = *inf.temperature;
  if (inf.top_p) params.sampling.top_p = *inf.top_p;
  if (inf.top_k) params.sampling.top_k = *inf.top_k;
  if (inf.seed) params.sampling.seed = static_cast<uint64_t>(*inf.seed);
  params.sampling.n = static_cast<int>(inf.n);
  // Default logprobs (generate --logprobs) are reported for requests that ask for none.
  if (inf.logprobs || !options.default_sampling.logprobs) {
    params.sampling.logprobs = inf.logprobs;
    params.sampling.top_logprobs = static_cast<int>(inf.top_logprobs.value_or(0));
  }
  if (auto error = ApplyExtras(body, options, &params, *protocol != recipe::Protocol::kChatCompletions)) {
    out.refusal = Refuse(FamilyOf(api), *error);
    return out;
  }
  if (options.constraint_compiler) {
    if (auto error = ApplyStructuredOutput(body, prompt.prompt->request, options, &params, &warnings)) {
      out.refusal = Refuse(*protocol, *error);
      return out;
    }
  }
  PreparedRequest& prepared = out.request.emplace();
  prepared.api = api;
  prepared.prompt = std::move(prompt.prompt->ids);
  prepared.params = std::move(params);
  prepared.request = std::move(prompt.prompt->request);
  prepared.warnings = std::move(warnings);
  return out;
}

bool PreparedRequest::stream() const {
  return api == Api::kCompletions ? completions.stream : request.inference.stream;
}

std::unique_ptr<UpdateTranslator> PreparedRequest::TakeTranslator(ResponseContext context) {
  context.skip_special_tokens = params.skip_special_tokens;
  if (api == Api::kCompletions) return NewCompletionsTranslator(completions, std::move(context));
  return NewChatTranslator(*ChatProtocol(api), std::move(request), std::move(context));
}

}  // namespace deepinfer::pipeline
