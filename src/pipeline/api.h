// The APIs a request may come in, and errors as each API family returns them, with the official status
// codes and type names:
//   OpenAI:    {"error": {"message", "type", "param", "code"}}
//   Anthropic: {"type": "error", "error": {"type", "message"}}
// and a refused request as its protocol answers it: the server sends it as the HTTP response, `deepinfer
// generate` prints it.
#pragma once

#include <optional>
#include <string>

#include "recipe/request.h"

namespace deepinfer::pipeline {

// The codec's three chat protocols and the legacy Completions API.
enum class Api { kChatCompletions, kResponses, kMessages, kCompletions };
Api ApiOf(recipe::Protocol protocol);
// The chat protocol of `api`; none for the legacy Completions API.
std::optional<recipe::Protocol> ChatProtocol(Api api);

enum class ApiFamily { kOpenAI, kAnthropic };
ApiFamily FamilyOf(Api api);

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

// Why a request cannot run: the HTTP status, the protocol's error body, and how long to wait before trying
// again (> 0: the server's Retry-After).
struct RequestRefusal {
  int status = 400;
  std::string body;
  int retry_after_s = 0;
  std::string message;  // the error's message alone
};

// The pipeline's and the server's own errors (ErrorJson).
RequestRefusal Refuse(ApiFamily family, const ApiError& error);
// The codec's errors (recipe::ErrorBody), written as deepseek-recipe writes them.
RequestRefusal Refuse(recipe::Protocol protocol, const recipe::RequestError& error);

}  // namespace deepinfer::pipeline
