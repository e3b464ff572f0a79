// Pieces shared by the service's source files (service.cpp: routing and info endpoints; tokenize.cpp:
// prompts and token counts; generate.cpp: generation). Not part of the server's API.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "recipe/request.h"
#include "server/api_errors.h"
#include "server/http_server.h"
#include "server/metrics.h"

namespace deepinfer::server {

// 503: the server runs without a generation engine.
ApiError NoEngine();

// The metric label of a request: its route, "/v1/models/{model}", or "other".
std::string_view EndpointLabel(std::string_view method, std::string_view path);

// One request on its way through the service: the way back with the request id, the endpoint label and
// the status counted once.
struct ServiceExchange {
  HttpRequest request;
  std::shared_ptr<ResponseChannel> channel;
  std::string request_id;
  std::string endpoint;
  ApiFamily family = ApiFamily::kOpenAI;
  RequestCounter* counter = nullptr;
  // Streams: from the engine's step thread handing tokens over to their update being handled on the
  // engine's output thread (the first part of deepinfer:http_stream_overhead_seconds), per update written.
  LatencyHistogram* stream_handoff = nullptr;
  // Streams: an update's handling on the output thread, from its start to the last of its bytes handed to
  // the socket (the codec's events and the sends: the server's own work per update, without the wait
  // before it), per update written.
  LatencyHistogram* stream_delivery = nullptr;
  Stopwatch stopwatch;

  // Headers every answer of this exchange carries (the structured output's warnings), beside x-request-id.
  std::vector<HttpHeader> headers;

  // A whole response, with x-request-id added and the status counted (only the first reply goes out).
  void Reply(HttpResponse response);
  void Fail(const ApiError& error);
  // Starts an event stream; false if the exchange was already answered.
  bool BeginStream(int status, std::string content_type = "text/event-stream; charset=utf-8");

 private:
  std::atomic<bool> replied_{false};
};

}  // namespace deepinfer::server
