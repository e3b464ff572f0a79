#include "server/service.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "sampling/constraint_masks.h"
#include "server/service_internal.h"
#include "server/stream_resume.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

namespace {

constexpr Route kRoutes[] = {
    {"POST", "/v1/chat/completions"},
    {"POST", "/v1/completions"},
    {"POST", "/v1/responses"},
    {"POST", "/v1/messages"},
    {"POST", "/v1/messages/count_tokens"},
    {"POST", "/tokenize"},
    {"POST", "/detokenize"},
    {"GET", "/v1/models"},
    {"GET", "/health"},
    {"GET", "/version"},
    {"GET", "/metrics"},
};

// A client's x-request-id is kept when it is 1..128 visible ASCII characters; otherwise one is made.
std::string RequestId(std::string_view given) {
  bool ok = !given.empty() && given.size() <= 128;
  for (const char c : given) ok = ok && c > 0x20 && c < 0x7f;
  if (ok) return std::string(given);
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (int i = 0; i < 2; ++i) {
    const uint64_t r = rng();
    for (int j = 0; j < 16; ++j) id[static_cast<size_t>(i * 16 + j)] = kHex[(r >> (4 * j)) & 15];
  }
  return id;
}

// Compares in time independent of where the strings differ, so the key cannot be guessed byte by byte.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string Rfc3339(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// A Prometheus summary: the median, p90 and p99 as quantile samples, then _sum and _count.
void AppendSummary(PrometheusText& out, const std::string& name, std::string_view help,
                   const LatencyHistogram& latencies) {
  out.Family(name, "summary", help);
  for (const auto& [q, label] : {std::pair{0.5, "0.5"}, std::pair{0.9, "0.9"}, std::pair{0.99, "0.99"}})
    out.Sample(name, {{"quantile", label}}, latencies.Percentile(q));
  out.Sample(name + "_sum", {}, latencies.sum());
  out.Sample(name + "_count", {}, static_cast<double>(latencies.count()));
}

}  // namespace

std::span<const Route> Routes() { return kRoutes; }

std::string_view EndpointLabel(std::string_view method, std::string_view path) {
  for (const Route& r : kRoutes)
    if (r.path == path) return r.path;
  if (method == "GET" && path.rfind("/v1/models/", 0) == 0) return "/v1/models/{model}";
  if (method == "GET" && path.rfind("/v1/responses/", 0) == 0) return "/v1/responses/{id}";
  return "other";
}

void ServiceExchange::Reply(HttpResponse response) {
  if (replied_.exchange(true)) return;
  response.headers.push_back({"x-request-id", request_id});
  response.headers.insert(response.headers.end(), headers.begin(), headers.end());
  counter->Add(endpoint, response.status);
  DI_LOG(kDebug, "request").Field("id", request_id).Field("method", request.method).Field("path", request.path)
      .Field("status", response.status).Field("ms", stopwatch.ElapsedMillis());
  channel->Respond(std::move(response));
}

void ServiceExchange::Fail(const ApiError& error) { Reply(ErrorResponse(family, error)); }

bool ServiceExchange::BeginStream(int status, std::string content_type) {
  if (replied_.exchange(true)) return false;
  counter->Add(endpoint, status);
  std::vector<HttpHeader> all = {{"x-request-id", request_id}};
  all.insert(all.end(), headers.begin(), headers.end());
  channel->StartStream(status, std::move(content_type), std::move(all));
  return true;
}

Service::Service(ServiceOptions options, const tokenizer::Tokenizer* tokenizer)
    : options_(std::move(options)),
      tokenizer_(tokenizer),
      constraint_compiler_(std::make_shared<sampling::ConstraintCompiler>(tokenizer)),
      responses_(std::make_unique<ResponsesStore>(options_.responses_store_max_entries,
                                                  options_.responses_store_ttl_s)) {
  if (options_.served_model_names.empty()) options_.served_model_names.push_back("deepinfer");
  prepare_options_.tokenizer = tokenizer;
  prepare_options_.control_ids = recipe::ControlTokenIds::FromTokenizer(*tokenizer);
  prepare_options_.model_version = options_.model_version;
  prepare_options_.default_thinking_mode = options_.default_thinking_mode;
  prepare_options_.served_model_names = options_.served_model_names;
  prepare_options_.max_model_len = options_.max_model_len;
  prepare_options_.enable_test_hooks = options_.enable_test_hooks;
  prepare_options_.one_of_as_any_of = options_.one_of_as_any_of;
}

Service::~Service() = default;

void Service::SetEngine(engine::Engine* engine) {
  engine_ = engine;
  // Without an engine no grammar is worth compiling: its requests get 503 whatever their constraint.
  prepare_options_.constraint_compiler = engine ? constraint_compiler_ : nullptr;
}

bool Service::Authorized(const HttpRequest& request) const {
  if (options_.api_keys.empty()) return true;
  const std::string given = ApiKeyOf(request);
  bool ok = false;
  for (const auto& key : options_.api_keys) ok |= ConstantTimeEquals(given, key);
  return ok;
}

HttpResponse Service::TransportError(int status, std::string_view path, std::string_view message) {
  ApiError e;
  e.status = status;
  e.message = std::string(message);
  requests_.Add(path.empty() ? "other" : EndpointLabel("", path), status);
  return ErrorResponse(FamilyForPath(path), e);
}

void Service::Handle(HttpRequest request, std::shared_ptr<ResponseChannel> channel) {
  auto exchange = std::make_shared<Exchange>();
  exchange->request_id = RequestId(request.Header("x-request-id"));
  exchange->family = FamilyForPath(request.path);
  exchange->endpoint = std::string(EndpointLabel(request.method, request.path));
  exchange->counter = &requests_;
  exchange->stream_handoff = &stream_handoff_;
  exchange->stream_delivery = &stream_delivery_;
  exchange->request = std::move(request);
  exchange->channel = std::move(channel);
  Dispatch(exchange);
}

void Service::Dispatch(const std::shared_ptr<Exchange>& exchange) {
  const HttpRequest& request = exchange->request;
  const std::string_view path = request.path;
  const std::string_view method = request.method;

  // Probes and metrics need no key (as in vLLM); everything that reads or generates text does.
  const bool open = path == "/health" || path == "/version" || path == "/metrics";
  if (!open && !Authorized(request)) {
    ApiError e;
    e.status = 401;
    e.code = "invalid_api_key";
    e.message = request.Header("authorization").empty() && request.Header("x-api-key").empty()
                    ? "Missing API key: send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'."
                    : "Incorrect API key provided.";
    return exchange->Fail(e);
  }

  const Route* route = nullptr;
  bool path_known = false;
  for (const Route& r : kRoutes) {
    if (r.path != path) continue;
    path_known = true;
    if (r.method == method) route = &r;
  }
  const bool model_path = path.rfind("/v1/models/", 0) == 0 && path.size() > 11;
  if (model_path) {
    path_known = true;
    if (method == "GET") return HandleModel(exchange, path.substr(11));
  }
  constexpr std::string_view kResponsesPrefix = "/v1/responses/";
  if (path.rfind(kResponsesPrefix, 0) == 0 && path.size() > kResponsesPrefix.size()) {
    path_known = true;
    if (method == "GET") return HandleGetResponse(exchange, path.substr(kResponsesPrefix.size()));
  }
  if (!route) {
    ApiError e;
    e.status = path_known ? 405 : 404;
    e.message = path_known ? "Method " + std::string(method) + " is not allowed on " + std::string(path) + "."
                           : "Unknown endpoint " + std::string(method) + " " + std::string(path) + ".";
    return exchange->Fail(e);
  }

  if (path == "/health") {
    if (ready()) return exchange->Reply(JsonResponse(200, R"({"status":"ok"})"));
    HttpResponse r = JsonResponse(503, draining_.load() ? R"({"status":"shutting down"})" : R"({"status":"loading"})");
    r.headers.push_back({"retry-after", "1"});
    return exchange->Reply(std::move(r));
  }
  if (path == "/version") {
    nlohmann::json body = {{"version", options_.version}};
    return exchange->Reply(JsonResponse(200, body.dump()));
  }
  if (path == "/metrics") {
    HttpResponse r = JsonResponse(200, MetricsText());
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    return exchange->Reply(std::move(r));
  }
  if (path == "/v1/models") return HandleModels(exchange);

  // Everything below reads the body as JSON, whatever Content-Type says (curl -d sends a form type).
  if (path == "/tokenize") return HandleTokenize(exchange);
  if (path == "/detokenize") return HandleDetokenize(exchange);
  if (path == "/v1/messages/count_tokens") return HandleCountTokens(exchange);

  if (!ready()) {
    ApiError e;
    e.status = 503;
    e.retry_after_s = 1;
    e.message = draining_.load() ? "The server is shutting down." : "The model is still loading.";
    return exchange->Fail(e);
  }
  pipeline::Api api = pipeline::Api::kChatCompletions;
  if (path == "/v1/responses") api = pipeline::Api::kResponses;
  else if (path == "/v1/messages") api = pipeline::Api::kMessages;
  else if (path == "/v1/completions") api = pipeline::Api::kCompletions;
  else if (path != "/v1/chat/completions") return;
  // A request a prefill unit handed over (it brings the output's first token; stream_resume.h) is prepared at
  // background priority: a decode unit's running streams each wait on the engine's step thread for their next
  // token, and on a core of their own the long prompt's parsing, rendering and tokenizing would otherwise
  // preempt it (this thread asks for a short slice), lengthening one of their gaps by all of that work. In
  // the background it takes what the step thread leaves, and the handed-over request waits for it instead.
  // A malformed id, or a server without an engine, is answered at once (HandleGeneration's checks).
  std::optional<int32_t> first_token;
  if (engine_ && !ReadFirstToken(exchange->request.Header(kFirstTokenHeader), tokenizer_->vocab_size(), &first_token) &&
      first_token)
    return preparation_.Post([this, exchange, api] { HandleGeneration(exchange, api); });
  HandleGeneration(exchange, api);
}

void Service::HandleModels(const std::shared_ptr<Exchange>& exchange) {
  // An Anthropic client (it sends anthropic-version) gets the Models API's shape; others OpenAI's.
  const bool anthropic = !exchange->request.Header("anthropic-version").empty();
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const auto& name : options_.served_model_names) {
    if (anthropic) {
      data.push_back({{"type", "model"}, {"id", name}, {"display_name", name}, {"created_at", Rfc3339(options_.created)}});
    } else {
      data.push_back({{"id", name}, {"object", "model"}, {"created", options_.created}, {"owned_by", "deepinfer"},
                      {"root", options_.model_path}, {"parent", nullptr}, {"max_model_len", options_.max_model_len}});
    }
  }
  nlohmann::ordered_json body;
  if (anthropic) {
    body = {{"data", data}, {"has_more", false}, {"first_id", options_.served_model_names.front()},
            {"last_id", options_.served_model_names.back()}};
  } else {
    body = {{"object", "list"}, {"data", data}};
  }
  exchange->Reply(JsonResponse(200, body.dump()));
}

void Service::HandleModel(const std::shared_ptr<Exchange>& exchange, std::string_view id) {
  if (auto error = pipeline::CheckModelName(prepare_options_, id)) return exchange->Fail(*error);
  const bool anthropic = !exchange->request.Header("anthropic-version").empty();
  nlohmann::ordered_json body;
  if (anthropic) {
    body = {{"type", "model"}, {"id", id}, {"display_name", id}, {"created_at", Rfc3339(options_.created)}};
  } else {
    body = {{"id", id}, {"object", "model"}, {"created", options_.created}, {"owned_by", "deepinfer"},
            {"root", options_.model_path}, {"parent", nullptr}, {"max_model_len", options_.max_model_len}};
  }
  exchange->Reply(JsonResponse(200, body.dump()));
}

std::string Service::MetricsText() const {
  PrometheusText out;
  const MetricLabels model = {{"model_name", options_.served_model_names.front()}};

  out.Family("deepinfer:http_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
  for (const auto& [key, count] : requests_.Snapshot())
    out.Sample("deepinfer:http_requests_total", {{"endpoint", key.first}, {"status", std::to_string(key.second)}},
               static_cast<double>(count));

  if (http_) {
    const HttpServerCounters c = http_->counters();
    out.Family("deepinfer:http_connections_open", "gauge", "Client connections open.");
    out.Sample("deepinfer:http_connections_open", {}, static_cast<double>(c.connections_open));
    out.Family("deepinfer:http_connections_total", "counter", "Client connections accepted.");
    out.Sample("deepinfer:http_connections_total", {}, static_cast<double>(c.connections_total));
    out.Family("deepinfer:http_connections_rejected_total", "counter",
               "Connections refused because --max-connections were open.");
    out.Sample("deepinfer:http_connections_rejected_total", {}, static_cast<double>(c.connections_rejected));
    out.Family("deepinfer:http_disconnects_total", "counter",
               "Responses cut short: the client went away, stopped reading, or the server shut down.");
    out.Sample("deepinfer:http_disconnects_total", {}, static_cast<double>(c.exchanges_cancelled));
    out.Family("deepinfer:http_transport_errors_total", "counter",
               "Requests rejected before routing: malformed HTTP, headers or body over the limits, timeouts.");
    out.Sample("deepinfer:http_transport_errors_total", {}, static_cast<double>(c.transport_errors));
    AppendSummary(out, "deepinfer:http_stream_overhead_seconds",
                  "Per streamed update: from the engine's step thread handing its tokens over to the socket taking its bytes.",
                  http_->stream_latency());
    AppendSummary(out, "deepinfer:http_stream_handoff_seconds",
                  "Per streamed update: from the engine's step thread handing its tokens over to the update being "
                  "handled (on the engine's output thread: its wake-up and the updates handled before it).",
                  stream_handoff_);
    AppendSummary(out, "deepinfer:http_stream_delivery_seconds",
                  "Per streamed update: its handling on the engine's output thread, from its start to the socket "
                  "taking its bytes (events made and sent; the server's own work per update).",
                  stream_delivery_);
  }
  // The process's resident memory, as Prometheus client libraries name it.
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    long pages = 0, resident = 0;
    if (std::fscanf(f, "%ld %ld", &pages, &resident) == 2) {
      out.Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
      out.Sample("process_resident_memory_bytes", {}, static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)));
    }
    std::fclose(f);
  }
  AppendEngineMetrics(&out, model);
  if (extra_metrics_) return out.text() + extra_metrics_();
  return out.text();
}

}  // namespace deepinfer::server
