#include "pipeline/api.h"

#include <nlohmann/json.hpp>

namespace deepinfer::pipeline {

Api ApiOf(recipe::Protocol protocol) {
  switch (protocol) {
    case recipe::Protocol::kChatCompletions: return Api::kChatCompletions;
    case recipe::Protocol::kResponses: return Api::kResponses;
    case recipe::Protocol::kMessages: return Api::kMessages;
  }
  return Api::kChatCompletions;
}

std::optional<recipe::Protocol> ChatProtocol(Api api) {
  switch (api) {
    case Api::kChatCompletions: return recipe::Protocol::kChatCompletions;
    case Api::kResponses: return recipe::Protocol::kResponses;
    case Api::kMessages: return recipe::Protocol::kMessages;
    case Api::kCompletions: return std::nullopt;
  }
  return std::nullopt;
}

ApiFamily FamilyOf(Api api) { return api == Api::kMessages ? ApiFamily::kAnthropic : ApiFamily::kOpenAI; }

namespace {

std::string DefaultType(ApiFamily family, int status) {
  if (family == ApiFamily::kAnthropic) {
    switch (status) {
      case 401: return "authentication_error";
      case 403: return "permission_error";
      case 404: return "not_found_error";
      case 413: return "request_too_large";
      case 429: return "rate_limit_error";
      case 529: return "overloaded_error";
      default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
  }
  switch (status) {
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

std::string ErrorJson(ApiFamily family, const ApiError& error) {
  nlohmann::ordered_json body;
  const std::string type = error.type.empty() ? DefaultType(family, error.status) : error.type;
  if (family == ApiFamily::kAnthropic) {
    body["type"] = "error";
    body["error"]["type"] = type;
    body["error"]["message"] = error.message;
  } else {
    body["error"]["message"] = error.message;
    body["error"]["type"] = type;
    body["error"]["param"] = error.param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(error.param);
    body["error"]["code"] = error.code.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(error.code);
  }
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

RequestRefusal Refuse(ApiFamily family, const ApiError& error) {
  return {error.status, ErrorJson(family, error), error.retry_after_s, error.message};
}

RequestRefusal Refuse(recipe::Protocol protocol, const recipe::RequestError& error) {
  return {error.http_status, recipe::ErrorBody(protocol, error), 0, error.message};
}

}  // namespace deepinfer::pipeline
