// The legacy OpenAI Completions API (/v1/completions): a raw prompt (text, or token ids) continued as
// text, without a chat template. The codec has no such protocol, so its request checks are written here;
// stop strings are the engine's (matched on all generated text, as vLLM does for this API).
#include <algorithm>

#include "pipeline/json_body.h"
#include "pipeline/request_fields.h"
#include "pipeline/structured_output.h"
#include "recipe/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::pipeline {

namespace {

using Json = nlohmann::json;

struct CompletionsRequest {
  std::string model;
  // One or more prompts (a list is a batch: OpenAI answers n choices for each, prompt-major).
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> prompt_texts;  // for echo
  bool echo = false;
  bool stream = false;
  bool return_token_ids = false;
  bool include_usage = false;
  int logprobs = -1;  // -1: none; else the number of alternatives per token
  engine::RequestParams params;
};

// One prompt: a string, or a list of token ids. `param` names it in errors.
std::optional<ApiError> ReadOnePrompt(const Json& prompt, const std::string& param, const tokenizer::Tokenizer& tokenizer,
                                      CompletionsRequest* out) {
  if (prompt.is_string()) {
    out->prompt_texts.push_back(prompt.get<std::string>());
    out->prompts.push_back(tokenizer.EncodeText(out->prompt_texts.back()));
    return std::nullopt;
  }
  if (prompt.is_array() && !prompt.empty() && prompt[0].is_number_integer()) {
    const int64_t vocab = static_cast<int64_t>(tokenizer.vocab_size());
    std::vector<int32_t> ids;
    for (size_t i = 0; i < prompt.size(); ++i) {
      const Json& t = prompt[i];
      const std::string item = param + "[" + std::to_string(i) + "]";
      if (!t.is_number_integer()) return Invalid(item, item + " must be a token id");
      const int64_t id = t.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), INT64_MAX))
                                                : t.get<int64_t>();
      if (id < 0 || id >= vocab) return Invalid(item, item + " is not a token id of this model");
      ids.push_back(static_cast<int32_t>(id));
    }
    out->prompt_texts.push_back(tokenizer.Decode(ids));
    out->prompts.push_back(std::move(ids));
    return std::nullopt;
  }
  return Invalid(param, param + " must be a string or an array of token ids");
}

// The `prompt` field: one prompt, or a list of prompts (strings or token-id lists), at most
// sampling::kMaxN of them.
std::optional<ApiError> ReadPrompt(const Json& body, const tokenizer::Tokenizer& tokenizer, CompletionsRequest* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return Invalid("prompt", "Missing required parameter: 'prompt'.");
  const Json& prompt = *it;
  if (!prompt.is_array() || (!prompt.empty() && prompt[0].is_number_integer()))
    return ReadOnePrompt(prompt, "prompt", tokenizer, out);
  if (prompt.empty()) return Invalid("prompt", "prompt must be a string or an array of token ids");
  if (prompt.size() > static_cast<size_t>(sampling::kMaxN))
    return Invalid("prompt", "at most " + std::to_string(sampling::kMaxN) + " prompts per request");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (auto e = ReadOnePrompt(prompt[i], "prompt[" + std::to_string(i) + "]", tokenizer, out)) return e;
  }
  return std::nullopt;
}

std::optional<ApiError> ParseCompletions(const Json& body, const tokenizer::Tokenizer& tokenizer,
                                         CompletionsRequest* out) {
  auto model = body.find("model");
  if (model == body.end() || !model->is_string()) return Invalid("model", "Missing required parameter: 'model'.");
  out->model = model->get<std::string>();
  if (auto e = ReadPrompt(body, tokenizer, out)) return e;
  sampling::SamplingParams& s = out->params.sampling;
  int64_t max_tokens = 16, n = 1, seed = -1, logprobs = -1, top_k = 0, min_tokens = 0;
  if (auto e = ReadInteger(body, "max_tokens", 1, int64_t{1} << 24, &max_tokens)) return e;
  if (auto e = ReadInteger(body, "n", 1, sampling::kMaxN, &n)) return e;
  if (auto e = ReadInteger(body, "seed", INT64_MIN, INT64_MAX, &seed)) return e;
  if (auto e = ReadInteger(body, "logprobs", 0, sampling::kMaxTopLogprobs, &logprobs)) return e;
  if (auto e = ReadInteger(body, "top_k", -1, int64_t{1} << 20, &top_k)) return e;
  if (auto e = ReadInteger(body, "min_tokens", 0, int64_t{1} << 24, &min_tokens)) return e;
  if (auto e = ReadNumber(body, "temperature", 0, 2, &s.temperature)) return e;
  if (auto e = ReadNumber(body, "top_p", 0, 1, &s.top_p)) return e;
  if (auto e = ReadNumber(body, "min_p", 0, 1, &s.min_p)) return e;
  if (auto e = ReadNumber(body, "presence_penalty", -2, 2, &s.presence_penalty)) return e;
  if (auto e = ReadNumber(body, "frequency_penalty", -2, 2, &s.frequency_penalty)) return e;
  if (auto e = ReadNumber(body, "repetition_penalty", 0.01, 10, &s.repetition_penalty)) return e;
  if (auto e = ReadBool(body, "echo", &out->echo)) return e;
  if (auto e = ReadBool(body, "stream", &out->stream)) return e;
  if (auto e = ReadBool(body, "ignore_eos", &s.ignore_eos)) return e;
  if (auto e = ReadBool(body, "return_token_ids", &out->return_token_ids)) return e;
  if (auto e = ReadBool(body, "include_stop_str_in_output", &s.include_stop_str_in_output)) return e;
  if (auto it = body.find("suffix"); it != body.end() && !it->is_null())
    return Invalid("suffix", "suffix is not supported");
  if (auto it = body.find("best_of"); it != body.end() && !it->is_null() && !(it->is_number_integer() && *it == n))
    return Invalid("best_of", "best_of other than n is not supported");
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return Invalid("stream_options", "stream_options must be an object");
    if (!out->stream) return Invalid("stream_options", "stream_options is only allowed when stream is true");
    if (auto e = ReadBool(*it, "include_usage", &out->include_usage)) return Invalid("stream_options.include_usage", e->message);
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      s.stop.push_back(it->get<std::string>());
    } else if (it->is_array() && it->size() <= sampling::kMaxStopStrings) {
      for (size_t i = 0; i < it->size(); ++i) {
        if (!(*it)[i].is_string()) return Invalid("stop[" + std::to_string(i) + "]", "stop entries must be strings");
        s.stop.push_back((*it)[i].get<std::string>());
      }
    } else {
      return Invalid("stop", "stop must be a string or an array of at most " + std::to_string(sampling::kMaxStopStrings) +
                                 " strings");
    }
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object() || it->size() > sampling::kMaxLogitBias) return Invalid("logit_bias", "logit_bias must be an object of token id -> bias");
    for (const auto& [key, value] : it->items()) {
      char* end = nullptr;
      const long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || end != key.c_str() + key.size() || id < 0 || id >= static_cast<long>(tokenizer.vocab_size()) || !value.is_number())
        return Invalid("logit_bias", "logit_bias keys must be token ids and values numbers");
      // OpenAI's range; it also keeps the conversion to float defined.
      const double bias = value.get<double>();
      if (!(bias >= -100 && bias <= 100)) return Invalid("logit_bias", "logit_bias values must be in [-100, 100]");
      s.logit_bias.push_back({static_cast<int32_t>(id), static_cast<float>(bias)});
    }
  }
  s.max_tokens = max_tokens;
  s.n = static_cast<int>(n);
  if (seed != -1 || body.contains("seed")) {
    if (auto it = body.find("seed"); it != body.end() && !it->is_null()) s.seed = static_cast<uint64_t>(seed);
  }
  s.top_k = top_k;
  s.min_tokens = min_tokens;
  if (logprobs >= 0) {
    out->logprobs = static_cast<int>(logprobs);
    s.logprobs = true;
    s.top_logprobs = static_cast<int>(logprobs);
  }
  return std::nullopt;
}

}  // namespace

PrepareOutcome PrepareCompletions(std::string_view body, const PrepareOptions& options) {
  auto refuse = [](const ApiError& error) {
    PrepareOutcome out;
    out.refusal = Refuse(ApiFamily::kOpenAI, error);
    return out;
  };
  JsonBody json = ParseJsonObject(body);
  if (!json.ok()) return refuse(Invalid("", json.error));
  CompletionsRequest request;
  if (auto error = ParseCompletions(json.value, *options.tokenizer, &request)) return refuse(*error);
  if (auto error = CheckModelName(options, request.model)) return refuse(*error);
  const size_t prompts = request.prompts.size();
  if (static_cast<int64_t>(prompts) * request.params.sampling.n > sampling::kMaxN)
    return refuse(Invalid("n", "at most " + std::to_string(sampling::kMaxN) + " choices (prompts times n) per request"));
  for (size_t i = 0; i < prompts; ++i) {
    const std::string param = prompts == 1 ? "prompt" : "prompt[" + std::to_string(i) + "]";
    const int64_t prompt_tokens = static_cast<int64_t>(request.prompts[i].size());
    if (prompt_tokens == 0) return refuse(Invalid(param, "the prompt is empty"));
    if (prompt_tokens + request.params.sampling.max_tokens > options.max_model_len) {
      ApiError e = Invalid(param, "This model's maximum context length is " + std::to_string(options.max_model_len) +
                                      " tokens. However, you requested " +
                                      std::to_string(prompt_tokens + request.params.sampling.max_tokens) + " tokens (" +
                                      std::to_string(prompt_tokens) + " in your prompt; " +
                                      std::to_string(request.params.sampling.max_tokens) +
                                      " for the completion). Please reduce your prompt; or completion length.");
      e.code = "context_length_exceeded";
      return refuse(e);
    }
  }
  if (auto error = ApplyExtras(json.value, options, &request.params, /*read_seed=*/false)) return refuse(*error);
  std::vector<std::string> warnings;
  if (options.constraint_compiler) {
    // The chat path's constraint fields, compile and errors; applied from the first generated token.
    recipe::ParsedRequest constraint;
    std::optional<recipe::RequestError> error = recipe::ParseCompletionsConstraint(body, &constraint);
    if (!error) error = ApplyStructuredOutput(body, constraint, options, &request.params, &warnings);
    if (error) {
      PrepareOutcome out;
      out.refusal = Refuse(recipe::Protocol::kChatCompletions, *error);
      return out;
    }
  }
  PrepareOutcome out;
  PreparedRequest& prepared = out.request.emplace();
  prepared.api = Api::kCompletions;
  prepared.completions.prompt_texts = std::move(request.prompt_texts);
  prepared.completions.echo = request.echo;
  // The echoed prompt's tokens carry logprobs too (the engine computes every prompt position for them).
  if (request.echo && request.logprobs >= 0) request.params.prompt_logprobs = request.logprobs;
  prepared.completions.stream = request.stream;
  prepared.completions.include_usage = request.include_usage;
  prepared.completions.logprobs = request.logprobs;
  prepared.completions.n = request.params.sampling.n;
  prepared.completions.return_token_ids = request.return_token_ids;
  if (request.return_token_ids) prepared.completions.prompt_ids = request.prompts;
  prepared.prompt = std::move(request.prompts[0]);
  for (size_t i = 1; i < prompts; ++i) prepared.more_prompts.push_back(std::move(request.prompts[i]));
  prepared.params = std::move(request.params);
  prepared.warnings = std::move(warnings);
  return out;
}

}  // namespace deepinfer::pipeline
