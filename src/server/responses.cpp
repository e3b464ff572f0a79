// The Responses API's stored conversations: `previous_response_id` continues a stored response (its input
// and output items become the start of the new request's input, so the prompt begins as the earlier one did
// and the prefix cache serves it), `store` (default true) keeps the new response, GET /v1/responses/{id}
// reads one again.
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/log.h"
#include "server/responses_store.h"
#include "server/service.h"
#include "server/service_internal.h"

namespace deepinfer::server {

namespace {

using OrderedJson = nlohmann::ordered_json;

ApiError NotFound(const std::string& id, const char* param) {
  ApiError e;
  e.status = 404;
  e.message = "Response with id '" + id + "' not found.";
  if (param) {
    e.message = "Previous response with id '" + id + "' not found.";
    e.param = param;
    e.code = "previous_response_not_found";
  }
  return e;
}

// The request's `input` as items: a string is one user message.
OrderedJson InputItems(const OrderedJson& input) {
  if (input.is_string()) return OrderedJson::array({{{"type", "message"}, {"role", "user"}, {"content", input}}});
  return input.is_array() ? input : OrderedJson::array();
}

}  // namespace

std::string Service::ApiKeyOf(const HttpRequest& request) {
  std::string_view given = request.Header("x-api-key");
  if (given.empty()) {
    const std::string_view auth = request.Header("authorization");
    if (auth.size() > 7 && (auth.substr(0, 7) == "Bearer " || auth.substr(0, 7) == "bearer ")) given = auth.substr(7);
  }
  return std::string(given);
}

std::optional<ApiError> Service::ContinueResponse(const HttpRequest& request, ResponsesTurn* turn) {
  turn->body = request.body;
  auto parsed = ParseOrderedJson(request.body);
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;  // the codec answers what is wrong
  OrderedJson& body = *parsed;
  if (auto store = body.find("store"); store != body.end() && !store->is_null()) {
    if (!store->is_boolean()) {
      ApiError e;
      e.message = "store must be a boolean";
      e.param = "store";
      return e;
    }
    turn->store = store->get<bool>();
  }
  turn->owner = options_.api_keys.empty() ? std::string() : ApiKeyOf(request);
  auto previous = body.find("previous_response_id");
  OrderedJson input = InputItems(body.value("input", OrderedJson()));
  if (previous != body.end() && !previous->is_null()) {
    if (!previous->is_string()) {
      ApiError e;
      e.message = "previous_response_id must be a string";
      e.param = "previous_response_id";
      return e;
    }
    const std::string id = previous->get<std::string>();
    std::optional<StoredResponse> stored = responses_->Get(id, turn->owner);
    if (!stored) return NotFound(id, "previous_response_id");
    OrderedJson items = stored->input;
    for (const OrderedJson& item : stored->output) items.push_back(item);
    for (const OrderedJson& item : input) items.push_back(item);
    input = std::move(items);
    body["input"] = input;
    body.erase("previous_response_id");
    turn->previous_response_id = id;
    turn->body = DumpJson(body);
  }
  turn->input = std::move(input);
  return std::nullopt;
}

void Service::StoreResponse(const std::string& id, const ResponsesTurn& turn, const std::string& response_body) {
  auto parsed = ParseOrderedJson(response_body);
  if (!parsed.ok() || !parsed->is_object()) return;
  StoredResponse stored;
  stored.owner = turn.owner;
  stored.input = turn.input;
  stored.output = parsed->value("output", OrderedJson::array());
  stored.body = response_body;
  responses_->Put(id, std::move(stored));
}

void Service::HandleGetResponse(const std::shared_ptr<Exchange>& exchange, std::string_view id) {
  const std::string owner = options_.api_keys.empty() ? std::string() : ApiKeyOf(exchange->request);
  std::optional<StoredResponse> stored = responses_->Get(std::string(id), owner);
  if (!stored) return exchange->Fail(NotFound(std::string(id), nullptr));
  HttpResponse response;
  response.body = std::move(stored->body);
  exchange->Reply(std::move(response));
}

}  // namespace deepinfer::server
