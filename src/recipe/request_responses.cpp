// Responses request → Conversation.
#include "recipe/request_internal.h"

namespace deepinfer::recipe {

ParseOutcome ParseResponsesRequest(std::string_view, const RequestOptions&) {
  ParseOutcome outcome;
  outcome.error = internal::Invalid("", "the responses protocol is not supported yet");
  outcome.error.http_status = 501;
  return outcome;
}

}  // namespace deepinfer::recipe
