// Errors as HTTP responses, in each API family's shape (pipeline/api.h). The family follows the path
// (/v1/messages... is Anthropic, everything else OpenAI), so a client gets the shape its SDK parses even for
// errors found before the body was read (413, 431, 401, 404).
#pragma once

#include <string>
#include <string_view>

#include "pipeline/api.h"
#include "recipe/request.h"
#include "server/http_server.h"

namespace deepinfer::server {

using pipeline::ApiError;
using pipeline::ApiFamily;
using pipeline::ErrorJson;

ApiFamily FamilyForPath(std::string_view path);

HttpResponse ErrorResponse(ApiFamily family, const ApiError& error);
// A codec validation error (400 with the parameter path) in the protocol's own shape.
HttpResponse RequestErrorResponse(recipe::Protocol protocol, const recipe::RequestError& error);
// A request the pipeline refused.
HttpResponse RefusalResponse(const pipeline::RequestRefusal& refusal);

}  // namespace deepinfer::server
