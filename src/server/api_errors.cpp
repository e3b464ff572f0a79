#include "server/api_errors.h"

namespace deepinfer::server {

ApiFamily FamilyForPath(std::string_view path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiFamily::kAnthropic : ApiFamily::kOpenAI;
}

HttpResponse ErrorResponse(ApiFamily family, const ApiError& error) {
  return RefusalResponse(pipeline::Refuse(family, error));
}

HttpResponse RequestErrorResponse(recipe::Protocol protocol, const recipe::RequestError& error) {
  return RefusalResponse(pipeline::Refuse(protocol, error));
}

HttpResponse RefusalResponse(const pipeline::RequestRefusal& refusal) {
  HttpResponse response;
  response.status = refusal.status;
  response.body = refusal.body;
  if (refusal.retry_after_s > 0) response.headers.push_back({"retry-after", std::to_string(refusal.retry_after_s)});
  return response;
}

}  // namespace deepinfer::server
