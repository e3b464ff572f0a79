// Errors as each API family returns them, with the official status codes and type names:
//   OpenAI:    {"error": {"message", "type", "param", "code"}}
//   Anthropic: {"type": "error", "error": {"type", "message"}}
// The family follows the path (/v1/messages... is Anthropic, everything else OpenAI), so a client gets
// the shape its SDK parses even for errors found before the body was read (413, 431, 401, 404).
#pragma once

#include <string>
#include <string_view>

#include "recipe/request.h"
#include "server/http_server.h"

namespace deepinfer::server {

enum class ApiFamily { kOpenAI, kAnthropic };

ApiFamily FamilyForPath(std::string_view path);

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // OpenAI only; empty: null
  std::string code;   // OpenAI only; empty: null
  // The type; empty: the family's usual type for the status (invalid_request_error, authentication_error,
  // not_found_error, request_too_large, rate_limit_error, api_error, overloaded_error, ...).
  std::string type;
  int retry_after_s = 0;  // > 0: a Retry-After header
};

std::string ErrorJson(ApiFamily family, const ApiError& error);
HttpResponse ErrorResponse(ApiFamily family, const ApiError& error);
// A codec validation error (400 with the parameter path) in the protocol's own shape.
HttpResponse RequestErrorResponse(recipe::Protocol protocol, const recipe::RequestError& error);

}  // namespace deepinfer::server
