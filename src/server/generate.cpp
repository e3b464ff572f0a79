// The generation endpoints: Chat Completions, Responses and Messages through the codec's stream encoders,
// and the legacy Completions API (raw text, written here: the codec has no such protocol).
//
// A request is validated and tokenized on the connection's strand, then handed to the engine. The engine
// delivers updates on its output thread, where the codec turns tokens into protocol events and the events
// are written into the socket without blocking (what the socket does not take goes on through the
// connection's strand). So the step thread never waits for the network or the codec, and a streamed
// token reaches the socket with no thread hand-off after the engine's own.
#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <random>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/log.h"
#include "engine/engine.h"
#include "recipe/completion_options.h"
#include "recipe/response_chat.h"
#include "recipe/stream_events.h"
#include "sampling/logits_mask.h"
#include "server/generation.h"
#include "server/json_body.h"
#include "server/service.h"
#include "server/service_internal.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

namespace {

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string RandomId(std::string_view prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id += kChars[rng() % 62];
  return id;
}

// The context check every generation request passes before it reaches the engine. `at_least`: the prompt
// was refused while being encoded (PreparePrompt's max_ids), so `prompt_tokens` is a lower bound.
bool FitsContext(ServiceExchange& exchange, recipe::Protocol protocol, int64_t prompt_tokens, bool at_least,
                 std::optional<int64_t> max_tokens, int64_t max_model_len) {
  const bool over = at_least || prompt_tokens >= max_model_len ||
                    (max_tokens && prompt_tokens + *max_tokens > max_model_len);
  if (!over) return true;
  const std::string bound = at_least ? "at least " : "";
  recipe::RequestError e;
  if (protocol == recipe::Protocol::kMessages) {
    e.message = "prompt is too long: " + bound + std::to_string(prompt_tokens) + " tokens + max_tokens " +
                std::to_string(max_tokens.value_or(0)) + " > " + std::to_string(max_model_len) + " maximum";
  } else {
    e.param = protocol == recipe::Protocol::kResponses ? "input" : "messages";
    e.message = "This model's maximum context length is " + std::to_string(max_model_len) +
                " tokens. However, you requested " + bound + std::to_string(prompt_tokens + max_tokens.value_or(0)) +
                " tokens (" + bound + std::to_string(prompt_tokens) + " in the messages, " +
                std::to_string(max_tokens.value_or(0)) +
                " in the completion). Please reduce the length of the messages or completion.";
  }
  exchange.Reply(RequestErrorResponse(protocol, e));
  return false;
}

// The engine's refusal as the protocol's error: bad parameters 400 (the message starts with the
// parameter's name), a full queue 429, shutting down 503.
ApiError EngineRefusal(const Status& status, bool draining) {
  ApiError e;
  e.message = status.message();
  if (status.code() == StatusCode::kInvalidArgument) {
    e.status = 400;
    const size_t colon = e.message.find(':');
    if (colon != std::string::npos && colon < 64 && e.message.find(' ') > colon) e.param = e.message.substr(0, colon);
  } else if (status.code() == StatusCode::kUnavailable) {
    e.status = draining ? 503 : 429;
    e.retry_after_s = 1;
    if (!draining) e.code = "rate_limit_exceeded";
  } else {
    e.status = 500;
  }
  return e;
}

std::optional<recipe::BackendFinish> ToBackendFinish(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop: return recipe::BackendFinish::kStop;
    case engine::FinishReason::kLength:
    case engine::FinishReason::kDeadline: return recipe::BackendFinish::kLength;
    default: return std::nullopt;
  }
}

}  // namespace

// One chat-protocol request in flight: a CompletionStream per output, fed on the strand.
class ChatGeneration : public Generation {
 public:
  ChatGeneration(std::shared_ptr<ServiceExchange> exchange, engine::Engine* engine, recipe::Protocol protocol,
                 recipe::ParsedRequest request, recipe::ModelVersion version, const tokenizer::Tokenizer* tokenizer,
                 std::string served_name)
      : Generation(std::move(exchange), engine),
        protocol_(protocol),
        request_(std::move(request)),
        version_(version),
        tokenizer_(tokenizer),
        served_name_(std::move(served_name)) {
    stream_ = request_.inference.stream;
    n_ = static_cast<int>(request_.inference.n);
    logprobs_ = request_.inference.logprobs;
    id_prefix_ = protocol == recipe::Protocol::kChatCompletions ? "chatcmpl-"
                 : protocol == recipe::Protocol::kResponses     ? "resp_"
                                                                : "msg_";
    response_id_ = RandomId(id_prefix_);
    outputs_.resize(static_cast<size_t>(n_));
  }

 protected:
  void OnStart() override {
    if (stream_) exchange_->BeginStream(200);
  }

  void OnUpdate(const engine::RequestUpdate& update) override {
    for (const engine::SequenceDelta& delta : update.sequences) {
      if (delta.index < 0 || delta.index >= n_) continue;
      Output& out = outputs_[static_cast<size_t>(delta.index)];
      if (!out.stream) Begin(out, delta.index, update);
      if (out.finished) continue;
      recipe::CompletionChunk chunk;
      chunk.token_count = 0;
      for (const engine::GeneratedToken& token : delta.tokens) {
        if (delta.finish && token.id == delta.stop_token) continue;  // the end token is not text
        ++chunk.token_count;
        // Always token chunks, so the codec reads `</think>` as the control token and counts reasoning
        // tokens; the entries are written only when the request asked (ResponseOptions::emit_logprobs).
        recipe::TokenLogprob entry;
        entry.token = token.bytes;
        entry.control = token.control;
        if (logprobs_) {
          entry.logprob = token.logprob;
          for (const auto& alt : token.top_logprobs) entry.top_logprobs.push_back({alt.bytes, alt.logprob});
        }
        chunk.logprobs.push_back(std::move(entry));
      }
      if (chunk.token_count > 0) Send(out.stream->Feed(chunk));
      if (out.stream->done()) {
        out.finished = true;  // a stop sequence completed it: the codec already wrote its finish
        ++finished_outputs_;
        if (finished_outputs_ == n_) AbortEngine();
      } else if (delta.finish) {
        const auto finish = ToBackendFinish(*delta.finish);
        if (*delta.finish == engine::FinishReason::kError) failed_ = update.status.ok() ? Status::Internal("generation failed") : update.status;
        Send(out.stream->Finish(finish));
        out.finished = true;
        ++finished_outputs_;
      }
    }
    if (update.finished) Complete(update);
  }

  void OnRefused(const ApiError& error) override { exchange_->Fail(error); }

 private:
  struct Output {
    std::unique_ptr<recipe::CompletionStream> stream;
    bool finished = false;
  };

  void Begin(Output& out, int index, const engine::RequestUpdate& update) {
    recipe::ResponseOptions options = recipe::ResponseOptionsFor(request_);
    options.id = response_id_;
    options.model = served_name_;
    options.created = created_;
    if (tokenizer_) options.count_tokens = engine::TokenCounter(*tokenizer_);
    options.emit_logprobs = logprobs_;
    options.choice_index = index;  // Chat Completions' "choices":[{"index":i (n > 1)
    recipe::UsageCounts usage;
    usage.prompt_tokens = update.prompt_tokens;
    usage.prompt_cache_hit_tokens = update.prompt_cache_hit_tokens;
    out.stream = std::make_unique<recipe::CompletionStream>(protocol_, recipe::OutputParserOptionsFor(request_, version_),
                                                            options, usage);
    Send(out.stream->Start());
  }

  void Send(const std::vector<recipe::StreamEvent>& events) {
    if (!stream_ || events.empty()) return;
    std::string text;
    for (const recipe::StreamEvent& event : events) {
      if (!event.name.empty()) {
        text += "event: ";
        text += event.name;
        text += '\n';
      }
      text += "data: ";
      text += event.json;
      text += "\n\n";
    }
    Write(std::move(text));
  }

  void Complete(const engine::RequestUpdate& update) {
    (void)update;
    if (stream_) {
      if (!failed_.ok()) DI_LOG(kWarn, "generation failed").Field("id", exchange_->request_id).Field("error", failed_.message());
      if (protocol_ == recipe::Protocol::kChatCompletions) exchange_->channel->Write("data: [DONE]\n\n");
      exchange_->channel->End();
      return;
    }
    if (!failed_.ok()) {
      ApiError e;
      e.status = 500;
      e.message = "generation failed: " + failed_.message();
      return exchange_->Fail(e);
    }
    HttpResponse response;
    response.body = Body();
    exchange_->Reply(std::move(response));
  }

  // The non-streaming body; n > 1 merges the choices of the per-output bodies.
  std::string Body() {
    for (Output& out : outputs_)
      if (out.stream && !out.finished) out.stream->Finish(std::nullopt);
    if (n_ == 1 || protocol_ != recipe::Protocol::kChatCompletions) return outputs_[0].stream ? outputs_[0].stream->Response() : "{}";
    nlohmann::ordered_json merged;
    int64_t completion_tokens = 0;
    for (int i = 0; i < n_; ++i) {
      if (!outputs_[static_cast<size_t>(i)].stream) continue;
      auto body = ParseOrderedJson(outputs_[static_cast<size_t>(i)].stream->Response());
      if (!body.ok()) continue;
      if (merged.is_null()) {
        merged = *body;
        merged["choices"] = nlohmann::ordered_json::array();
      }
      for (auto& choice : (*body)["choices"]) merged["choices"].push_back(choice);  // index from choice_index
      if ((*body).contains("usage")) completion_tokens += (*body)["usage"].value("completion_tokens", int64_t{0});
    }
    if (merged.contains("usage")) {
      merged["usage"]["completion_tokens"] = completion_tokens;
      merged["usage"]["total_tokens"] = merged["usage"].value("prompt_tokens", int64_t{0}) + completion_tokens;
    }
    return DumpJson(merged);
  }

  recipe::Protocol protocol_;
  recipe::ParsedRequest request_;
  recipe::ModelVersion version_;
  const tokenizer::Tokenizer* tokenizer_;
  std::string served_name_;
  std::string id_prefix_;
  std::string response_id_;
  int64_t created_ = UnixSeconds();
  bool stream_ = false;
  bool logprobs_ = false;
  int n_ = 1;
  int finished_outputs_ = 0;
  Status failed_;
  std::vector<Output> outputs_;
};

// --- Generation: from the engine's output thread to the connection ---

Generation::Generation(std::shared_ptr<ServiceExchange> exchange, engine::Engine* engine)
    : exchange_(std::move(exchange)), engine_(engine) {}

Generation::~Generation() = default;

void Generation::Start(std::vector<int32_t> prompt, engine::RequestParams params, bool draining) {
  OnStart();
  std::weak_ptr<Generation> weak = weak_from_this();
  {
    // Held until the request is set up: the engine may deliver its first update (on its output thread)
    // before AddRequest returns here.
    std::lock_guard lock(mu_);
    auto id = engine_->AddRequest(std::move(prompt), std::move(params), [weak](engine::RequestUpdate update) {
      if (auto self = weak.lock()) self->Deliver(update);
    });
    if (!id.ok()) {
      OnRefused(EngineRefusal(id.status(), draining));
      return;
    }
    id_ = *id;
    started_ = true;
    // Held until the final update: the engine's callback only holds a weak reference.
    keep_alive_ = shared_from_this();
  }
  exchange_->channel->OnCancel([weak] {
    if (auto self = weak.lock()) self->AbortEngine();
  });
}

void Generation::AbortEngine() {
  if (started_ && !aborted_.exchange(true)) engine_->Abort(id_);
}

// On the engine's output thread: the update becomes protocol events and they go to the socket here,
// without a hop to the connection's strand (each hop is a thread wake-up, and on a machine whose cores
// sleep between steps a wake-up alone can take longer than the whole encoding). The channel's writes are
// thread-safe and never block: bytes the socket does not take at once go on through the strand.
void Generation::Deliver(const engine::RequestUpdate& update) {
  std::lock_guard lock(mu_);
  if (done_) return;
  // The latency of these bytes starts when the engine's step thread handed the tokens over.
  origin_nanos_ = update.emitted_nanos > 0 ? update.emitted_nanos : NowNanos();
  handling_nanos_ = NowNanos();
  handoff_recorded_ = false;  // recorded with the update's first stream write
  OnUpdate(update);
  if (handoff_recorded_ && exchange_->stream_delivery)
    exchange_->stream_delivery->Record(static_cast<double>(NowNanos() - handling_nanos_) * 1e-9);
  if (update.finished) {
    done_ = true;
    keep_alive_.reset();  // the callback's reference keeps this object alive until it returns
  }
}

// --- the endpoints ---

void Service::HandleGenerate(const std::shared_ptr<Exchange>& exchange, recipe::Protocol protocol) {
  Prompt prompt;
  // The longest prompt any request may have (FitsContext): one more id and it is refused, the rest of a
  // long prompt never encoded.
  const size_t max_prompt_ids = static_cast<size_t>(std::max<int64_t>(options_.max_model_len - 1, 0));
  if (!PreparePrompt(exchange, protocol, exchange->request.body, &prompt, max_prompt_ids)) return;
  const bool at_least = prompt.at_least_ids > 0;
  const int64_t prompt_tokens = at_least ? prompt.at_least_ids : static_cast<int64_t>(prompt.ids.size());
  if (!FitsContext(*exchange, protocol, prompt_tokens, at_least, prompt.request.inference.max_tokens,
                   options_.max_model_len))
    return;
  engine::RequestParams params;
  const recipe::InferenceOptions& inf = prompt.request.inference;
  params.sampling.max_tokens = inf.max_tokens.value_or(options_.max_model_len - prompt_tokens);
  if (inf.temperature) params.sampling.temperature = *inf.temperature;
  if (inf.top_p) params.sampling.top_p = *inf.top_p;
  if (inf.top_k) params.sampling.top_k = *inf.top_k;
  if (inf.seed) params.sampling.seed = static_cast<uint64_t>(*inf.seed);
  params.sampling.n = static_cast<int>(inf.n);
  params.sampling.logprobs = inf.logprobs;
  params.sampling.top_logprobs = static_cast<int>(inf.top_logprobs.value_or(0));
  params.tag = exchange->request_id;
  if (options_.request_timeout_s > 0)
    params.deadline_nanos = NowNanos() + static_cast<int64_t>(options_.request_timeout_s * 1e9);
  if (!ApplyExtras(exchange, &params, protocol != recipe::Protocol::kChatCompletions)) return;
  // Bad parameters are 400 whether or not this server can generate.
  if (!engine_) return exchange->Fail(NoEngine());
  // Structured output: compiled here, on the connection's strand, off the engine's step thread (after the
  // engine check: without an engine no grammar is worth compiling).
  if (auto error = structured_.Apply(exchange->request.body, prompt.request, &params)) {
    return exchange->Reply(RequestErrorResponse(protocol, *error));
  }

  auto generation = std::make_shared<ChatGeneration>(exchange, engine_, protocol, std::move(prompt.request),
                                                     options_.model_version, tokenizer_,
                                                     options_.served_model_names.front());
  generation->Start(std::move(prompt.ids), std::move(params), draining_.load());
}

ApiError NoEngine() {
  ApiError e;
  e.status = 503;
  e.retry_after_s = 1;
  e.message = "this server has no generation engine";
  return e;
}

void Service::AppendEngineMetrics(PrometheusText* out, const MetricLabels& model) const {
  if (!engine_) return;
  const engine::EngineStats s = engine_->Stats();
  auto gauge = [&](const char* name, const char* help, double value) {
    out->Family(name, "gauge", help);
    out->Sample(name, model, value);
  };
  auto counter = [&](const char* name, const char* help, double value) {
    out->Family(name, "counter", help);
    out->Sample(name, model, value);
  };
  auto histogram = [&](const char* name, const char* help, const engine::HistogramSnapshot& h) {
    out->Family(name, "histogram", help);
    std::vector<uint64_t> cumulative;
    uint64_t total = 0;
    for (size_t i = 0; i < h.upper_bounds.size() && i < h.counts.size(); ++i) cumulative.push_back(total += h.counts[i]);
    out->Histogram(name, model, h.upper_bounds, cumulative, h.sum, h.count);
  };
  gauge("deepinfer:num_requests_running", "Requests in the running batch.", static_cast<double>(s.num_requests_running));
  gauge("deepinfer:num_requests_waiting", "Requests waiting to be scheduled (queued, preempted or loading).",
        static_cast<double>(s.num_requests_waiting));
  counter("deepinfer:num_preemptions_total", "Preemptions (a running sequence evicted and later recomputed).",
          static_cast<double>(s.num_preemptions));
  gauge("deepinfer:kv_cache_usage_perc", "Fraction of the main KV pool's blocks referenced by live sequences.",
        s.kv_cache_usage);
  gauge("deepinfer:kv_blocks_total", "Blocks of the main KV pool.", static_cast<double>(s.kv_blocks_total));
  gauge("deepinfer:kv_blocks_used", "Main-pool blocks referenced by live sequences.", static_cast<double>(s.kv_blocks_used));
  gauge("deepinfer:kv_blocks_cached", "Main-pool blocks unreferenced but holding a reusable prefix.",
        static_cast<double>(s.kv_blocks_cached));
  gauge("deepinfer:kv_blocks_free", "Main-pool blocks free.", static_cast<double>(s.kv_blocks_free));
  gauge("deepinfer:window_blocks_used", "Sliding-window blocks referenced by live sequences.",
        static_cast<double>(s.window_blocks_used));
  gauge("deepinfer:window_blocks_cached", "Sliding-window blocks kept as resume points of prefix hits.",
        static_cast<double>(s.window_blocks_cached));
  counter("deepinfer:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
          static_cast<double>(s.prefix_cache_queries));
  counter("deepinfer:prefix_cache_hits_total", "Prompt tokens served from the prefix cache.",
          static_cast<double>(s.prefix_cache_hits));
  counter("deepinfer:external_prefix_cache_hits_total", "Prompt tokens served from the persistent KV tier.",
          static_cast<double>(s.external_prefix_cache_hits));
  counter("deepinfer:window_block_hits_total", "Prefix hits resumed exactly from cached window blocks.",
          static_cast<double>(s.window_block_hits));
  counter("deepinfer:replay_hits_total", "Prefix hits whose window state was recomputed.",
          static_cast<double>(s.replay_hits));
  counter("deepinfer:replayed_tokens_total", "Tokens recomputed by window-state replays.",
          static_cast<double>(s.replayed_tokens));
  counter("deepinfer:prompt_tokens_total", "Prompt tokens of admitted requests.", static_cast<double>(s.prompt_tokens));
  counter("deepinfer:generation_tokens_total", "Generated tokens.", static_cast<double>(s.generation_tokens));
  out->Family("deepinfer:request_success_total", "counter", "Finished requests by finish reason.");
  for (int r = 0; r < 5; ++r) {
    MetricLabels labels = model;
    labels.push_back({"finished_reason", std::string(engine::FinishReasonName(static_cast<engine::FinishReason>(r)))});
    out->Sample("deepinfer:request_success_total", labels, static_cast<double>(s.requests_finished[r]));
  }
  histogram("deepinfer:time_to_first_token_seconds", "Time to first token.", s.time_to_first_token);
  histogram("deepinfer:inter_token_latency_seconds", "Time between tokens (TBT).", s.inter_token_latency);
  histogram("deepinfer:request_queue_time_seconds", "Time waiting before first scheduled.", s.request_queue_time);
  histogram("deepinfer:e2e_request_latency_seconds", "End-to-end request latency.", s.e2e_request_latency);
}

}  // namespace deepinfer::server
