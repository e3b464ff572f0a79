// The endpoints that stop at a chat request's prompt (pipeline::PrepareChatPrompt: parse, validate,
// render, encode): /tokenize, /detokenize (vLLM's shapes) and Anthropic's
// /v1/messages/count_tokens.
#include <nlohmann/json.hpp>

#include "sampling/params.h"
#include "pipeline/json_body.h"
#include "pipeline/prepare.h"
#include "server/service.h"
#include "server/service_internal.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

using pipeline::JsonBody;
using pipeline::ParseJsonObject;

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

// The `model` field of /tokenize and /detokenize: optional, and one of the served names when given.
std::optional<ApiError> CheckOptionalModel(const nlohmann::json& object, const pipeline::PrepareOptions& options) {
  auto model = object.find("model");
  if (model == object.end() || model->is_null()) return std::nullopt;
  if (!model->is_string()) return BadRequest("model must be a string", "model");
  return pipeline::CheckModelName(options, model->get_ref<const std::string&>());
}

}  // namespace

bool Service::PreparePrompt(const std::shared_ptr<Exchange>& exchange, recipe::Protocol protocol,
                            std::string_view body, pipeline::ChatPrompt* out) {
  pipeline::ChatPromptOutcome prompt = pipeline::PrepareChatPrompt(protocol, body, prepare_options_);
  if (!prompt.ok()) {
    exchange->Reply(RefusalResponse(prompt.refusal));
    return false;
  }
  *out = std::move(*prompt.prompt);
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
    pipeline::ChatPrompt prompt;
    const std::string with_model =
        WithDefaultField(body, object, "model", nlohmann::json(options_.served_model_names.front()).dump());
    if (!PreparePrompt(exchange, recipe::Protocol::kChatCompletions, with_model, &prompt)) return;
    ids = std::move(prompt.ids);
  } else {
    if (auto error = CheckOptionalModel(object, prepare_options_)) return exchange->Fail(*error);
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
  if (auto error = CheckOptionalModel(object, prepare_options_)) return exchange->Fail(*error);
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
  pipeline::ChatPrompt prompt;
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
