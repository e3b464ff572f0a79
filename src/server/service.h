// The API of `deepinfer serve`: routing, API keys, x-request-id, the info endpoints (/health, /version,
// /v1/models, /metrics), tokenization endpoints (/tokenize, /detokenize, /v1/messages/count_tokens) and
// the generation endpoints (/v1/chat/completions, /v1/completions, /v1/responses, /v1/messages).
//
// Requests are validated by the codec (src/recipe) and answered in their protocol's error shape; the
// service adds what the codec cannot know: the served model name (404), the context length (400), the
// API key (401), readiness and overload (503 / 429 with Retry-After).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/prepare.h"
#include "recipe/prompt_tokens.h"
#include "recipe/render.h"
#include "recipe/request.h"
#include "server/api_errors.h"
#include "server/background_worker.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/responses_store.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}
namespace deepinfer::sampling {
class ConstraintCompiler;
}
namespace deepinfer::engine {
class Engine;
struct RequestParams;
}

namespace deepinfer::server {

struct ServiceExchange;  // service_internal.h

struct ServiceOptions {
  // Names clients may give as `model`; the first is the one /v1/models lists first and responses carry.
  std::vector<std::string> served_model_names = {"deepinfer"};
  std::string model_path;  // /v1/models "root"
  std::vector<std::string> api_keys;  // empty: no key needed
  recipe::ModelVersion model_version = recipe::ModelVersion::kV4;
  bool default_thinking_mode = true;
  int64_t max_model_len = 4096;  // prompt + completion tokens
  std::string version = "0";
  int64_t created = 0;  // Unix seconds, /v1/models "created"
  // Generation requests finish (as "length") once this many seconds passed since they arrived; 0: never.
  double request_timeout_s = 600;
  // Test-only: the `deepinfer_test_output` request field scripts the model's output (pipeline/prepare.h).
  bool enable_test_hooks = false;
  // The default of a request's structured_outputs.one_of_as_any_of (pipeline::PrepareOptions).
  bool one_of_as_any_of = false;
  // Responses kept for `previous_response_id` and GET /v1/responses/{id} (responses_store.h).
  int64_t responses_store_max_entries = 4096;
  double responses_store_ttl_s = 3600;
};

// Routes the service knows, for metric labels and method checks.
struct Route {
  std::string_view method;
  std::string_view path;
};
std::span<const Route> Routes();

class Service : public HttpHandler {
 public:
  Service(ServiceOptions options, const tokenizer::Tokenizer* tokenizer);
  ~Service() override;

  void Handle(HttpRequest request, std::shared_ptr<ResponseChannel> channel) override;
  HttpResponse TransportError(int status, std::string_view path, std::string_view message) override;

  // /health answers 200 only while ready and not draining.
  void SetReady(bool ready) { ready_.store(ready); }
  void SetDraining(bool draining) { draining_.store(draining); }
  bool ready() const { return ready_.load() && !draining_.load(); }
  // The engine generation requests go to (not owned; null: they get 503). Set before serving.
  void SetEngine(engine::Engine* engine);
  // What structured output compiles grammars through: the engine shares it (EngineOptions::constraint_compiler).
  const std::shared_ptr<sampling::ConstraintCompiler>& constraint_compiler() const { return constraint_compiler_; }
  // The transport whose counters and stream latency /metrics shows (not owned).
  void SetHttpServer(const HttpServer* server) { http_ = server; }
  // More metric families for /metrics in Prometheus text (the KV store's), appended as given. Set before serving.
  void SetExtraMetrics(std::function<std::string()> extra) { extra_metrics_ = std::move(extra); }
  // What makes the KV blocks and snapshots written so far durable in the shared store (KvStoreTier::Flush): a
  // prefill-only request (stream_resume.h's kPrefillOnlyHeader) answers after it. Set before serving.
  void SetKvStoreFlush(std::function<void()> flush) { kv_store_flush_ = std::move(flush); }

  // Runs the requests still queued for background preparation (a hand-over's, see Dispatch) and ends that
  // thread: called before the engine goes (later requests are prepared at once, on their own thread).
  void StopBackgroundWork() { preparation_.Stop(); }

  std::string MetricsText() const;
  const ServiceOptions& options() const { return options_; }

 private:
  using Exchange = ServiceExchange;
  void Dispatch(const std::shared_ptr<Exchange>& exchange);
  bool Authorized(const HttpRequest& request) const;
  // The API key a request was sent with (empty: none).
  static std::string ApiKeyOf(const HttpRequest& request);

  // A Responses request as it runs: the body to prepare (earlier turns' items before its input when it
  // continues a stored response), the input items to store with its response, and whether to store it.
  struct ResponsesTurn {
    std::string body;
    nlohmann::ordered_json input;
    std::string owner;
    std::string previous_response_id;  // the stored response it continues; empty: none
    bool store = true;
  };
  // 404 for a previous_response_id this key cannot see; 400 for a malformed one or `store`.
  std::optional<ApiError> ContinueResponse(const HttpRequest& request, ResponsesTurn* turn);
  void StoreResponse(const std::string& id, const ResponsesTurn& turn, const std::string& response_body);
  void HandleGetResponse(const std::shared_ptr<Exchange>& exchange, std::string_view id);

  void HandleModels(const std::shared_ptr<Exchange>& exchange);
  void HandleModel(const std::shared_ptr<Exchange>& exchange, std::string_view id);
  void HandleTokenize(const std::shared_ptr<Exchange>& exchange);
  void HandleDetokenize(const std::shared_ptr<Exchange>& exchange);
  void HandleCountTokens(const std::shared_ptr<Exchange>& exchange);
  void HandleGeneration(const std::shared_ptr<Exchange>& exchange, pipeline::Api api);

  // The parsed request and its prompt ids; false when the error response was already sent.
  bool PreparePrompt(const std::shared_ptr<Exchange>& exchange, recipe::Protocol protocol, std::string_view body,
                     pipeline::ChatPrompt* out);
  void AppendEngineMetrics(PrometheusText* out, const MetricLabels& model) const;

  ServiceOptions options_;
  const tokenizer::Tokenizer* tokenizer_;
  engine::Engine* engine_ = nullptr;
  pipeline::PrepareOptions prepare_options_;  // the served names, context and hooks, as requests meet them
  std::shared_ptr<sampling::ConstraintCompiler> constraint_compiler_;  // structured output's, with an engine
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  const HttpServer* http_ = nullptr;
  std::function<std::string()> extra_metrics_;
  std::function<void()> kv_store_flush_;
  RequestCounter requests_;
  LatencyHistogram stream_handoff_;   // ServiceExchange::stream_handoff
  LatencyHistogram stream_delivery_;  // ServiceExchange::stream_delivery
  std::unique_ptr<ResponsesStore> responses_;
  // Last: its queued jobs use everything above, and it stops (running them) before any of it goes.
  BackgroundWorker preparation_{"di-prepare"};
};

}  // namespace deepinfer::server
