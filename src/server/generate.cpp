// The generation endpoints: Chat Completions, Responses, Messages (through the codec's stream encoders)
// and the legacy Completions API.
#include "server/service.h"
#include "server/service_internal.h"

namespace deepinfer::server {

namespace {

// The context check every generation request passes before it reaches the engine.
bool FitsContext(ServiceExchange& exchange, recipe::Protocol protocol, int64_t prompt_tokens,
                 std::optional<int64_t> max_tokens, int64_t max_model_len) {
  const bool over = prompt_tokens >= max_model_len || (max_tokens && prompt_tokens + *max_tokens > max_model_len);
  if (!over) return true;
  recipe::RequestError e;
  if (protocol == recipe::Protocol::kMessages) {
    e.message = "prompt is too long: " + std::to_string(prompt_tokens) + " tokens + max_tokens " +
                std::to_string(max_tokens.value_or(0)) + " > " + std::to_string(max_model_len) + " maximum";
  } else {
    e.param = protocol == recipe::Protocol::kResponses ? "input" : "messages";
    e.message = "This model's maximum context length is " + std::to_string(max_model_len) +
                " tokens. However, you requested " + std::to_string(prompt_tokens + max_tokens.value_or(0)) +
                " tokens (" + std::to_string(prompt_tokens) + " in the messages, " +
                std::to_string(max_tokens.value_or(0)) +
                " in the completion). Please reduce the length of the messages or completion.";
  }
  exchange.Reply(RequestErrorResponse(protocol, e));
  return false;
}

ApiError NoEngine() {
  ApiError e;
  e.status = 503;
  e.retry_after_s = 1;
  e.message = "this server has no generation engine";
  return e;
}

}  // namespace

void Service::HandleGenerate(const std::shared_ptr<Exchange>& exchange, recipe::Protocol protocol) {
  Prompt prompt;
  if (!PreparePrompt(exchange, protocol, exchange->request.body, &prompt)) return;
  if (!FitsContext(*exchange, protocol, static_cast<int64_t>(prompt.ids.size()), prompt.request.inference.max_tokens,
                   options_.max_model_len))
    return;
  exchange->Fail(NoEngine());
}

void Service::HandleCompletions(const std::shared_ptr<Exchange>& exchange) { exchange->Fail(NoEngine()); }

void Service::AppendEngineMetrics(PrometheusText*, const MetricLabels&) const {}

}  // namespace deepinfer::server
