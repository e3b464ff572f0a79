// Anthropic request → Conversation.
#include "recipe/request_internal.h"

namespace deepinfer::recipe {

ParseOutcome ParseAnthropicRequest(std::string_view, const RequestOptions&) {
  ParseOutcome outcome;
  outcome.error = internal::Invalid("", "the anthropic protocol is not supported yet");
  outcome.error.http_status = 501;
  return outcome;
}

}  // namespace deepinfer::recipe
