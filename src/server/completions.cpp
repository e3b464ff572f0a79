// The legacy OpenAI Completions API (/v1/completions): a raw prompt (text, or token ids) continued as
// text, without a chat template. The codec has no such protocol, so its request checks and its
// `text_completion` objects are written here; stop strings are the engine's (matched on all generated
// text, as vLLM does for this API).
#include <chrono>
#include <random>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "engine/engine.h"
#include "recipe/response_chat.h"
#include "server/generation.h"
#include "server/json_body.h"
#include "server/service.h"
#include "server/service_internal.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

namespace {

using Json = nlohmann::json;

ApiError Invalid(std::string param, std::string message) {
  ApiError e;
  e.status = 400;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

struct CompletionsRequest {
  std::string model;
  std::vector<int32_t> prompt;
  std::string prompt_text;  // for echo
  bool echo = false;
  bool stream = false;
  bool include_usage = false;
  int logprobs = -1;  // -1: none; else the number of alternatives per token
  engine::RequestParams params;
};

// A JSON number as a double in [lo, hi], or an error naming the parameter.
std::optional<ApiError> ReadNumber(const Json& body, const char* key, double lo, double hi, double* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return Invalid(key, std::string(key) + " must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return Invalid(key, std::string(key) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = v;
  return std::nullopt;
}

std::optional<ApiError> ReadInteger(const Json& body, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) return Invalid(key, std::string(key) + " must be an integer");
  const int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : it->get<int64_t>();
  if (v < lo || v > hi)
    return Invalid(key, std::string(key) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = v;
  return std::nullopt;
}

std::optional<ApiError> ReadBool(const Json& body, const char* key, bool* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return Invalid(key, std::string(key) + " must be a boolean");
  *out = it->get<bool>();
  return std::nullopt;
}

// Token ids of the `prompt` field: a string, a list of ids, or a one-element list of either.
std::optional<ApiError> ReadPrompt(const Json& body, const tokenizer::Tokenizer& tokenizer, CompletionsRequest* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return Invalid("prompt", "Missing required parameter: 'prompt'.");
  const Json* prompt = &*it;
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array()))
    prompt = &(*prompt)[0];
  if (prompt->is_string()) {
    out->prompt_text = prompt->get<std::string>();
    out->prompt = tokenizer.EncodeText(out->prompt_text);
    return std::nullopt;
  }
  if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer()) {
    const int64_t vocab = static_cast<int64_t>(tokenizer.vocab_size());
    for (size_t i = 0; i < prompt->size(); ++i) {
      const Json& t = (*prompt)[i];
      const std::string param = "prompt[" + std::to_string(i) + "]";
      if (!t.is_number_integer()) return Invalid(param, param + " must be a token id");
      const int64_t id = t.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), INT64_MAX))
                                                : t.get<int64_t>();
      if (id < 0 || id >= vocab) return Invalid(param, param + " is not a token id of this model");
      out->prompt.push_back(static_cast<int32_t>(id));
    }
    out->prompt_text = tokenizer.Decode(out->prompt);
    return std::nullopt;
  }
  if (prompt->is_array() && prompt->size() > 1)
    return Invalid("prompt", "this server takes one prompt per request (send several requests)");
  return Invalid("prompt", "prompt must be a string or an array of token ids");
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

std::string RandomId() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "cmpl-";
  for (int i = 0; i < 24; ++i) id += kChars[rng() % 62];
  return id;
}

class LegacyGeneration : public Generation {
 public:
  LegacyGeneration(std::shared_ptr<ServiceExchange> exchange, engine::Engine* engine, CompletionsRequest request,
                   std::string model)
      : Generation(std::move(exchange), engine), request_(std::move(request)), model_(std::move(model)) {
    choices_.resize(static_cast<size_t>(request_.params.sampling.n));
    created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  }

 protected:
  void OnStart() override {
    if (request_.stream) exchange_->BeginStream(200);
  }
  void OnRefused(const ApiError& error) override { exchange_->Fail(error); }

  void OnUpdate(const engine::RequestUpdate& update) override {
    usage_.prompt_tokens = update.prompt_tokens;
    usage_.prompt_cache_hit_tokens = update.prompt_cache_hit_tokens;
    std::string events;
    for (const engine::SequenceDelta& delta : update.sequences) {
      if (delta.index < 0 || delta.index >= static_cast<int>(choices_.size())) continue;
      Choice& c = choices_[static_cast<size_t>(delta.index)];
      Json logprobs = Json::object();
      std::string text = delta.text;
      if (request_.echo && !c.echoed) {
        text = request_.prompt_text + text;
        c.echoed = true;
      }
      for (const engine::GeneratedToken& token : delta.tokens) {
        if (delta.finish && token.id == delta.stop_token && *delta.finish == engine::FinishReason::kStop) continue;
        ++usage_.completion_tokens;
        if (request_.logprobs >= 0) AddLogprob(c, token, &logprobs);
      }
      c.text += text;
      if (delta.finish) {
        c.finish = *delta.finish == engine::FinishReason::kLength || *delta.finish == engine::FinishReason::kDeadline
                       ? "length"
                       : "stop";
        if (*delta.finish == engine::FinishReason::kError) failed_ = update.status.ok() ? Status::Internal("generation failed") : update.status;
      }
      if (request_.stream && (!text.empty() || delta.finish)) {
        Json choice = {{"index", delta.index}, {"text", text},
                       {"logprobs", request_.logprobs >= 0 ? logprobs : Json(nullptr)},
                       {"finish_reason", delta.finish ? Json(c.finish) : Json(nullptr)}};
        events += "data: " + Envelope(Json::array({choice}), false) + "\n\n";
      }
    }
    if (request_.stream && !events.empty()) Write(std::move(events));
    if (update.finished) Complete();
  }

 private:
  struct Choice {
    std::string text;
    std::string finish = "stop";
    bool echoed = false;
    Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(), text_offset = Json::array();
    size_t offset = 0;
  };

  void AddLogprob(Choice& c, const engine::GeneratedToken& token, Json* delta_logprobs) {
    Json top = Json::object();
    for (const auto& alt : token.top_logprobs) top[alt.bytes] = alt.logprob;
    c.tokens.push_back(token.bytes);
    c.token_logprobs.push_back(token.logprob);
    c.top_logprobs.push_back(top);
    c.text_offset.push_back(c.offset);
    if (request_.stream) {
      if (delta_logprobs->empty())
        *delta_logprobs = {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
                           {"text_offset", Json::array()}};
      (*delta_logprobs)["tokens"].push_back(token.bytes);
      (*delta_logprobs)["token_logprobs"].push_back(token.logprob);
      (*delta_logprobs)["top_logprobs"].push_back(top);
      (*delta_logprobs)["text_offset"].push_back(c.offset);
    }
    c.offset += token.bytes.size();
  }

  std::string UsageJson() const { return recipe::ChatUsageJson(usage_); }

  std::string Envelope(const Json& choices, bool with_usage) const {
    Json body = {{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", model_}, {"choices", choices}};
    std::string text = DumpJson(body);
    if (with_usage) {
      text.pop_back();
      text += ",\"usage\":" + UsageJson() + "}";
    } else if (request_.stream && request_.include_usage) {
      text.pop_back();
      text += ",\"usage\":null}";
    }
    return text;
  }

  void Complete() {
    if (request_.stream) {
      if (request_.include_usage) exchange_->channel->Write("data: " + Envelope(Json::array(), true) + "\n\n");
      exchange_->channel->Write("data: [DONE]\n\n");
      exchange_->channel->End();
      return;
    }
    if (!failed_.ok()) {
      ApiError e;
      e.status = 500;
      e.message = "generation failed: " + failed_.message();
      return exchange_->Fail(e);
    }
    Json choices = Json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      const Choice& c = choices_[i];
      Json logprobs = nullptr;
      if (request_.logprobs >= 0)
        logprobs = {{"tokens", c.tokens}, {"token_logprobs", c.token_logprobs}, {"top_logprobs", c.top_logprobs},
                    {"text_offset", c.text_offset}};
      choices.push_back({{"index", i}, {"text", c.text}, {"logprobs", logprobs}, {"finish_reason", c.finish}});
    }
    HttpResponse response;
    response.body = Envelope(choices, true);
    exchange_->Reply(std::move(response));
  }

  CompletionsRequest request_;
  std::string model_;
  std::string id_ = RandomId();
  int64_t created_ = 0;
  std::vector<Choice> choices_;
  recipe::UsageCounts usage_;
  Status failed_;
};

}  // namespace

// Sampling fields the chat codecs do not read (OpenAI's penalties, vLLM's extras) and, with
// --enable-test-hooks, the scripted output: a request's "deepinfer_test_output" text is tokenized with
// control-token spellings as control tokens, and the engine's logits mask allows exactly those tokens in
// order, so real reasoning, tool calls and content come back through the whole path.
bool Service::ApplyExtras(const std::shared_ptr<Exchange>& exchange, engine::RequestParams* params, bool read_seed) {
  JsonBody json = ParseJsonObject(exchange->request.body);
  if (!json.ok()) return true;  // the protocol parser already accepted it; nothing extra to read
  const Json& body = json.value;
  sampling::SamplingParams& s = params->sampling;
  int64_t min_tokens = s.min_tokens;
  std::optional<ApiError> error;
  if (!error) error = ReadNumber(body, "presence_penalty", -2, 2, &s.presence_penalty);
  if (!error) error = ReadNumber(body, "frequency_penalty", -2, 2, &s.frequency_penalty);
  if (!error) error = ReadNumber(body, "repetition_penalty", 0.01, 10, &s.repetition_penalty);
  if (!error) error = ReadNumber(body, "min_p", 0, 1, &s.min_p);
  if (!error) error = ReadBool(body, "ignore_eos", &s.ignore_eos);
  if (!error) error = ReadInteger(body, "min_tokens", 0, int64_t{1} << 24, &min_tokens);
  // Seeded sampling as on Chat Completions (an extension here, as in vLLM's sampling parameters): equal
  // seeded requests give equal outputs.
  if (int64_t seed = -1; !error && read_seed) {
    error = ReadInteger(body, "seed", 0, INT64_MAX, &seed);
    if (!error && seed >= 0) s.seed = static_cast<uint64_t>(seed);
  }
  // The KV store's retention class of this request's prefix blocks (extension; default: --kv-ttl-class).
  if (auto ttl = body.find("kv_ttl_class"); !error && ttl != body.end()) {
    if (!ttl->is_string() || (*ttl != "agent" && *ttl != "chat")) {
      error = Invalid("kv_ttl_class", "kv_ttl_class must be \"agent\" or \"chat\"");
    } else {
      params->kv_ttl_class = ttl->get<std::string>();
    }
  }
  if (error) {
    exchange->Fail(*error);
    return false;
  }
  s.min_tokens = min_tokens;
  if (!options_.enable_test_hooks) return true;
  auto it = body.find("deepinfer_test_output");
  if (it == body.end()) return true;
  if (!it->is_string()) {
    exchange->Fail(Invalid("deepinfer_test_output", "deepinfer_test_output must be a string"));
    return false;
  }
  std::vector<int32_t> script = tokenizer_->EncodeWithAddedTokens(it->get_ref<const std::string&>());
  params->constraint.scripted_tokens = script;
  params->sampling.max_tokens = std::max<int64_t>(params->sampling.max_tokens, static_cast<int64_t>(script.size()) + 1);
  return true;
}

void Service::HandleCompletions(const std::shared_ptr<Exchange>& exchange) {
  JsonBody json = ParseJsonObject(exchange->request.body);
  if (!json.ok()) return exchange->Fail(Invalid("", json.error));
  CompletionsRequest request;
  if (auto error = ParseCompletions(json.value, *tokenizer_, &request)) return exchange->Fail(*error);
  if (!KnownModel(request.model)) return exchange->Fail(ModelNotFound(request.model));
  const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
  if (prompt_tokens == 0) return exchange->Fail(Invalid("prompt", "the prompt is empty"));
  if (prompt_tokens + request.params.sampling.max_tokens > options_.max_model_len) {
    ApiError e = Invalid("prompt", "This model's maximum context length is " + std::to_string(options_.max_model_len) +
                                       " tokens. However, you requested " +
                                       std::to_string(prompt_tokens + request.params.sampling.max_tokens) + " tokens (" +
                                       std::to_string(prompt_tokens) + " in your prompt; " +
                                       std::to_string(request.params.sampling.max_tokens) +
                                       " for the completion). Please reduce your prompt; or completion length.");
    e.code = "context_length_exceeded";
    return exchange->Fail(e);
  }
  request.params.tag = exchange->request_id;
  if (options_.request_timeout_s > 0)
    request.params.deadline_nanos = NowNanos() + static_cast<int64_t>(options_.request_timeout_s * 1e9);
  if (!ApplyExtras(exchange, &request.params)) return;
  if (!engine_) return exchange->Fail(NoEngine());
  std::vector<int32_t> prompt = request.prompt;
  engine::RequestParams params = request.params;
  auto generation = std::make_shared<LegacyGeneration>(exchange, engine_, std::move(request), options_.served_model_names.front());
  generation->Start(std::move(prompt), std::move(params), draining_.load());
}

}  // namespace deepinfer::server
