// Prompts and token counts: the codec path every chat request takes (parse, validate, render, encode),
// and the endpoints that stop there: /tokenize, /detokenize (vLLM's shapes) and Anthropic's
// /v1/messages/count_tokens.
#include <nlohmann/json.hpp>

#include "sampling/params.h"
#include "server/json_body.h"
#include "server/service.h"
#include "server/service_internal.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

namespace {

// `body` (a JSON object) with `"key":value_json` added first when the object has no such key. Done on the
// text, so the body the codec parses is the client's own bytes otherwise.
std::string WithDefaultField(std::string_view body, const nlohmann::json& object, const std::string& key,
                             const std::string& value_json) {
  if (object.contains(key)) return std::string(body);
  const size_t open = body.find('{');
  size_t next = open + 1;
  while (next < body.size() && (body[next] == ' ' || body[next] == '\t' || body[next] == '\n' || body[next] == '\r'))
    ++next;
  const bool empty = next < body.size() && body[next] == '}';
  std::string out;
  out.reserve(body.size() + key.size() + value_json.size() + 8);
  out.append(body.substr(0, open + 1));
  out += nlohmann::json(key).dump();
  out += ':';
  out += value_json;
  if (!empty) out += ',';
  out.append(body.substr(open + 1));
  return out;
}

ApiError BadRequest(std::string message, std::string param = {}) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

}  // namespace

bool Service::PreparePrompt(const std::shared_ptr<Exchange>& exchange, recipe::Protocol protocol,
                            std::string_view body, Prompt* out, size_t max_ids) {
  recipe::RequestOptions request_options;
  request_options.model_version = options_.model_version;
  request_options.default_thinking_mode = options_.default_thinking_mode;
  request_options.max_n = sampling::kMaxN;  // the engine samples n outputs of one prompt
  recipe::ParseOutcome parsed = recipe::ParseRequest(protocol, body, request_options);
  if (!parsed.ok()) {
    exchange->Reply(RequestErrorResponse(protocol, parsed.error));
    return false;
  }
  if (!KnownModel(parsed.request->model)) {
    exchange->Fail(ModelNotFound(parsed.request->model));
    return false;
  }
  auto rendered = recipe::RenderPrompt(parsed.request->conversation, options_.model_version);
  if (!rendered.ok()) {
    exchange->Fail(BadRequest(rendered.status().message(), "messages"));
    return false;
  }
  auto ids = recipe::TokenizePrompt(*rendered, *tokenizer_, control_ids_, max_ids);
  if (!ids.ok() && ids.status().code() == StatusCode::kOutOfRange && max_ids != SIZE_MAX) {
    out->request = std::move(*parsed.request);
    out->ids.clear();
    out->at_least_ids = static_cast<int64_t>(max_ids) + 1;
    return true;
  }
  if (!ids.ok()) {
    ApiError e;
    e.status = 500;
    e.message = "the prompt cannot be encoded with this model's tokenizer: " + ids.status().message();
    exchange->Fail(e);
    return false;
  }
  out->request = std::move(*parsed.request);
  out->ids = std::move(*ids);
  return true;
}

void Service::HandleTokenize(const std::shared_ptr<Exchange>& exchange) {
  const std::string& body = exchange->request.body;
  JsonBody json = ParseJsonObject(body);
  if (!json.ok()) return exchange->Fail(BadRequest(json.error));
  const nlohmann::json& object = json.value;

  bool return_token_strs = false;
  if (auto it = object.find("return_token_strs"); it != object.end() && !it->is_null()) {
    if (!it->is_boolean()) return exchange->Fail(BadRequest("return_token_strs must be a boolean", "return_token_strs"));
    return_token_strs = it->get<bool>();
  }
  if (auto it = object.find("add_special_tokens"); it != object.end() && !it->is_null() && !it->is_boolean())
    return exchange->Fail(BadRequest("add_special_tokens must be a boolean", "add_special_tokens"));

  std::vector<int32_t> ids;
  if (object.contains("messages")) {
    // A chat request: the tokens of its whole rendered prompt, generation prompt included.
    Prompt prompt;
    const std::string with_model =
        WithDefaultField(body, object, "model", nlohmann::json(options_.served_model_names.front()).dump());
    if (!PreparePrompt(exchange, recipe::Protocol::kChatCompletions, with_model, &prompt)) return;
    ids = std::move(prompt.ids);
  } else {
    auto model = object.find("model");
    if (model != object.end() && !model->is_null()) {
      if (!model->is_string()) return exchange->Fail(BadRequest("model must be a string", "model"));
      if (!KnownModel(model->get_ref<const std::string&>()))
        return exchange->Fail(ModelNotFound(model->get_ref<const std::string&>()));
    }
    auto prompt = object.find("prompt");
    if (prompt == object.end() || !prompt->is_string())
      return exchange->Fail(BadRequest("give `prompt` (a string) or `messages` (a chat conversation)", "prompt"));
    // V4's tokenizer adds no BOS or EOS (add_bos_token false), so add_special_tokens changes nothing.
    ids = tokenizer_->EncodeText(prompt->get_ref<const std::string&>());
  }

  nlohmann::ordered_json out;
  out["count"] = ids.size();
  out["max_model_len"] = options_.max_model_len;
  out["tokens"] = ids;
  if (return_token_strs) {
    nlohmann::ordered_json strs = nlohmann::ordered_json::array();
    for (const int32_t id : ids) strs.push_back(std::string(tokenizer_->IdToToken(id)));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  HttpResponse r;
  r.body = out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  exchange->Reply(std::move(r));
}

void Service::HandleDetokenize(const std::shared_ptr<Exchange>& exchange) {
  JsonBody json = ParseJsonObject(exchange->request.body);
  if (!json.ok()) return exchange->Fail(BadRequest(json.error));
  const nlohmann::json& object = json.value;
  auto model = object.find("model");
  if (model != object.end() && !model->is_null()) {
    if (!model->is_string()) return exchange->Fail(BadRequest("model must be a string", "model"));
    if (!KnownModel(model->get_ref<const std::string&>()))
      return exchange->Fail(ModelNotFound(model->get_ref<const std::string&>()));
  }
  auto tokens = object.find("tokens");
  if (tokens == object.end() || !tokens->is_array())
    return exchange->Fail(BadRequest("tokens must be an array of token ids", "tokens"));
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  const int64_t vocab = static_cast<int64_t>(tokenizer_->vocab_size());
  for (size_t i = 0; i < tokens->size(); ++i) {
    const nlohmann::json& t = (*tokens)[i];
    const std::string param = "tokens[" + std::to_string(i) + "]";
    if (!t.is_number_integer()) return exchange->Fail(BadRequest(param + " must be an integer token id", param));
    const int64_t id = t.is_number_unsigned() && t.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                           ? INT64_MAX
                           : t.get<int64_t>();
    if (id < 0 || id >= vocab)
      return exchange->Fail(BadRequest(param + " = " + std::to_string(id) + " is not a token id (0.." +
                                           std::to_string(vocab - 1) + ")",
                                       param));
    ids.push_back(static_cast<int32_t>(id));
  }
  nlohmann::ordered_json out;
  out["prompt"] = tokenizer_->Decode(ids);
  HttpResponse r;
  r.body = out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  exchange->Reply(std::move(r));
}

void Service::HandleCountTokens(const std::shared_ptr<Exchange>& exchange) {
  const std::string& body = exchange->request.body;
  JsonBody json = ParseJsonObject(body);
  if (!json.ok()) {
    recipe::RequestError e;
    e.message = json.error;
    return exchange->Reply(RequestErrorResponse(recipe::Protocol::kMessages, e));
  }
  // count_tokens takes a Messages request without max_tokens; the codec wants one, and it does not change
  // the prompt.
  Prompt prompt;
  if (!PreparePrompt(exchange, recipe::Protocol::kMessages, WithDefaultField(body, json.value, "max_tokens", "1"),
                     &prompt))
    return;
  nlohmann::ordered_json out;
  out["input_tokens"] = prompt.ids.size();
  HttpResponse r;
  r.body = out.dump();
  exchange->Reply(std::move(r));
}

}  // namespace deepinfer::server
