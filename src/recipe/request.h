// API requests → Conversation. One parser per protocol (OpenAI Chat Completions, OpenAI Responses,
// Anthropic Messages); each validates the request the way the official API does and reports problems in
// that protocol's own JSON error shape, naming the offending parameter. Unknown fields are ignored, as
// the official APIs ignore them. Conversion rules follow deepseek-recipe 0.2.0 so prompts match it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "recipe/conversation.h"
#include "recipe/model_version.h"
#include "recipe/output_options.h"
#include "recipe/protocol.h"

namespace deepinfer::recipe {

struct RequestError {
  int http_status = 400;
  std::string type = "invalid_request_error";
  std::string param;  // path of the offending parameter, e.g. "messages[2].content"; empty if none
  std::string message;
};

// The error as the protocol's API returns it:
//   OpenAI:    {"error": {"message", "type", "param", "code"}}
//   Anthropic: {"type": "error", "error": {"type", "message"}}
std::string ErrorBody(Protocol protocol, const RequestError& error);

struct RequestOptions {
  // The model the conversation is rendered for: images become placeholders only where the model reads them.
  ModelVersion model_version = ModelVersion::kV4;
  bool default_thinking_mode = true;
  int64_t max_tokens_upper_bound = 393216;
  // The largest Chat Completions `n` accepted. 1 is deepseek-recipe's rule (it supports no n > 1); a server
  // that samples several choices raises it.
  int64_t max_n = 1;
};

struct ParsedRequest {
  Protocol protocol = Protocol::kChatCompletions;
  std::string model;
  Conversation conversation;
  InferenceOptions inference;
  // Responses only: the request settings its response objects repeat.
  std::optional<ResponsesEcho> responses_echo;
};

// Either a request or the error that rejects it.
struct ParseOutcome {
  std::optional<ParsedRequest> request;
  RequestError error;
  bool ok() const { return request.has_value(); }
};

ParseOutcome ParseChatCompletionsRequest(std::string_view body, const RequestOptions& options = {});
ParseOutcome ParseResponsesRequest(std::string_view body, const RequestOptions& options = {});
ParseOutcome ParseMessagesRequest(std::string_view body, const RequestOptions& options = {});
ParseOutcome ParseRequest(Protocol protocol, std::string_view body, const RequestOptions& options = {});

}  // namespace deepinfer::recipe
