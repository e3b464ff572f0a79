#include "server/api_errors.h"

#include <nlohmann/json.hpp>

namespace deepinfer::server {

ApiFamily FamilyForPath(std::string_view path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiFamily::kAnthropic : ApiFamily::kOpenAI;
}

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

HttpResponse ErrorResponse(ApiFamily family, const ApiError& error) {
  HttpResponse response;
  response.status = error.status;
  response.body = ErrorJson(family, error);
  if (error.retry_after_s > 0) response.headers.push_back({"retry-after", std::to_string(error.retry_after_s)});
  return response;
}

HttpResponse RequestErrorResponse(recipe::Protocol protocol, const recipe::RequestError& error) {
  HttpResponse response;
  response.status = error.http_status;
  response.body = recipe::ErrorBody(protocol, error);
  return response;
}

}  // namespace deepinfer::server
