// The generation endpoints (Chat Completions, Responses, Messages and the legacy Completions): each request
// goes through the pipeline (src/pipeline) and between the engine and its connection here.
//
// A request is validated, tokenized and its grammar compiled on the connection's strand (pipeline::Prepare),
// or on the background preparation thread for one a prefill unit handed over (Service::Dispatch), then
// handed to the engine. The engine delivers updates on its output thread, where the request's
// translator turns tokens into protocol events and the events are written into the socket without blocking
// (what the socket does not take goes on through the connection's strand). So the step thread never waits
// for the network or the codec, and a streamed token reaches the socket with no thread hand-off after the
// engine's own.
#include <algorithm>
#include <mutex>
#include <string>
#include <string_view>

#include "core/log.h"
#include "engine/engine.h"
#include "pipeline/prepare.h"
#include "pipeline/sse.h"
#include "server/generation.h"
#include "server/service.h"
#include "server/service_internal.h"
#include "server/stream_resume.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

namespace {

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

// A header value from text: bytes outside printable ASCII (a pointer's non-ASCII names) and '%' as %XX.
std::string HeaderSafe(std::string_view text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7F && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace

// --- Generation: from the engine's output thread to the connection ---

Generation::Generation(std::shared_ptr<ServiceExchange> exchange, engine::Engine* engine,
                       std::unique_ptr<pipeline::UpdateTranslator> translator)
    : exchange_(std::move(exchange)), engine_(engine), translator_(std::move(translator)) {}

Generation::~Generation() = default;

void Generation::Start(std::vector<std::vector<int32_t>> prompts, engine::RequestParams params, bool draining) {
  if (translator_->stream()) exchange_->BeginStream(200);
  if (first_token_update_ && first_token_update_->finished) {
    // The handed-over token ended the output: the engine has nothing to do.
    std::lock_guard lock(mu_);
    origin_nanos_ = handling_nanos_ = NowNanos();
    done_ = true;
    OnUpdate(*first_token_update_, /*last=*/true);
    return;
  }
  std::weak_ptr<Generation> weak = weak_from_this();
  {
    // Held until the requests are set up: the engine may deliver a first update (on its output thread)
    // before AddRequest returns here.
    std::lock_guard lock(mu_);
    outputs_per_prompt_ = params.sampling.n;
    unfinished_ = static_cast<int>(prompts.size());
    for (size_t p = 0; p < prompts.size(); ++p) {
      const int prompt = static_cast<int>(p);
      auto id = engine_->AddRequest(std::move(prompts[p]), params, [weak, prompt](engine::RequestUpdate update) {
        if (auto self = weak.lock()) self->Deliver(std::move(update), prompt);
      });
      if (!id.ok()) {
        // The requests already queued go; their final updates find this generation done.
        for (engine::RequestId queued : ids_) engine_->Abort(queued);
        done_ = true;
        exchange_->Fail(EngineRefusal(id.status(), draining));
        return;
      }
      ids_.push_back(*id);
    }
    started_ = true;
    // Held until the final update: the engine's callback only holds a weak reference.
    keep_alive_ = shared_from_this();
  }
  exchange_->channel->OnCancel([weak] {
    if (auto self = weak.lock()) self->AbortEngine();
  });
}

void Generation::AbortEngine() {
  if (started_ && !aborted_.exchange(true)) {
    for (engine::RequestId id : ids_) engine_->Abort(id);
  }
}

// On the engine's output thread: the update becomes protocol events and they go to the socket here,
// without a hop to the connection's strand (each hop is a thread wake-up, and on a machine whose cores
// sleep between steps a wake-up alone can take longer than the whole encoding). The channel's writes are
// thread-safe and never block: bytes the socket does not take at once go on through the strand.
void Generation::Deliver(engine::RequestUpdate update, int prompt) {
  std::lock_guard lock(mu_);
  if (done_) return;
  if (prompt > 0) {
    for (engine::SequenceDelta& delta : update.sequences) delta.index += prompt * outputs_per_prompt_;
  }
  if (first_token_taken_) {
    // The engine's prompt ends with the handed-over token, which the client sees as output.
    update.prompt_tokens -= 1;
    update.prompt_cache_hit_tokens = std::min(update.prompt_cache_hit_tokens, update.prompt_tokens);
  }
  const bool last = update.finished && --unfinished_ == 0;
  // The latency of these bytes starts when the engine's step thread handed the tokens over.
  origin_nanos_ = update.emitted_nanos > 0 ? update.emitted_nanos : NowNanos();
  handling_nanos_ = NowNanos();
  handoff_recorded_ = false;  // recorded with the update's first stream write
  if (first_token_update_) {
    // Reported with the engine's first update, whose prompt counts it takes (the translators read a
    // response's usage from the first update): what the engine found in its caches is known from then.
    first_token_update_->prompt_tokens = update.prompt_tokens;
    first_token_update_->prompt_cache_hit_tokens = update.prompt_cache_hit_tokens;
    OnUpdate(*first_token_update_, /*last=*/false);
    first_token_update_.reset();
  }
  OnUpdate(update, last);
  if (handoff_recorded_ && exchange_->stream_delivery)
    exchange_->stream_delivery->Record(static_cast<double>(NowNanos() - handling_nanos_) * 1e-9);
  if (last) {
    done_ = true;
    keep_alive_.reset();  // the callback's reference keeps this object alive until it returns
  }
}

void Generation::OnUpdate(const engine::RequestUpdate& update, bool last) {
  if (answer_first_token_) {
    for (const engine::SequenceDelta& delta : update.sequences) {
      if (delta.index != 0) continue;
      if (!delta.tokens.empty() && first_token_ < 0) first_token_ = delta.tokens.front().id;
      // Only a token that left the output open goes on: one that ended it (an end or stop token, a stop
      // string) is the decode unit's to find again.
      if (delta.finish) first_token_open_ = *delta.finish == engine::FinishReason::kLength && delta.stop_string.empty();
    }
  }
  pipeline::TranslatedUpdate translated = translator_->Translate(update);
  if (resume_info_ && translator_->stream()) {
    // One write per update: the announcement once, the events, then the ids they came from.
    std::string out;
    if (!resume_announced_) out += ResumeComment(response_id_, created_, update.seed);
    resume_announced_ = true;
    if (!translated.events.empty()) out += pipeline::FormatSse(translated.events);
    std::vector<int32_t> ids;
    for (const engine::SequenceDelta& delta : update.sequences) {
      if (delta.index != 0) continue;
      for (const engine::GeneratedToken& token : delta.tokens)
        if (!delta.finish || token.id != delta.stop_token) ids.push_back(token.id);
    }
    resume_finished_ = resume_finished_ || update.finished || translated.stop_engine;
    out += TokenIdsComment(ids, resume_finished_);
    Write(std::move(out));
  } else if (translator_->stream() && !translated.events.empty()) {
    Write(pipeline::FormatSse(translated.events));
  }
  if (translated.stop_engine) AbortEngine();
  if (last) Complete();
}

void Generation::Complete() {
  // On the output thread: a prefill unit's answers all wait for the same durability, so holding it here
  // delays nothing a later answer would not wait for too.
  if (flush_before_answer_) flush_before_answer_();
  const Status& failure = translator_->failure();
  if (translator_->stream()) {
    if (!failure.ok()) DI_LOG(kWarn, "generation failed").Field("id", exchange_->request_id).Field("error", failure.message());
    exchange_->channel->Write(pipeline::FormatSse(translator_->StreamEnd()));
    exchange_->channel->End();
    if (failure.ok() && completed_) completed_(translator_->Body());
    return;
  }
  if (!failure.ok()) {
    ApiError e;
    e.status = 500;
    e.message = "generation failed: " + failure.message();
    return exchange_->Fail(e);
  }
  HttpResponse response;
  if (answer_first_token_ && first_token_ >= 0 && first_token_open_)
    response.headers.push_back({std::string(kFirstTokenHeader), std::to_string(first_token_)});
  response.body = translator_->Body();
  if (completed_) completed_(response.body);
  exchange_->Reply(std::move(response));
}

// --- the endpoints ---

void Service::HandleGeneration(const std::shared_ptr<Exchange>& exchange, pipeline::Api api) {
  // Shared with the completion callback (what it stores), and the body the prepared request was read from.
  std::shared_ptr<ResponsesTurn> turn;
  if (api == pipeline::Api::kResponses) {
    turn = std::make_shared<ResponsesTurn>();
    if (auto error = ContinueResponse(exchange->request, turn.get())) return exchange->Fail(*error);
  }
  pipeline::PrepareOutcome prepared =
      pipeline::Prepare(api, turn ? std::string_view(turn->body) : std::string_view(exchange->request.body),
                        prepare_options_);
  if (!prepared.ok()) return exchange->Reply(RefusalResponse(prepared.refusal));
  pipeline::PreparedRequest& request = *prepared.request;
  std::optional<StreamResume> resume;
  if (auto error = ReadStreamResume(exchange->request.body, static_cast<size_t>(prepare_options_.max_model_len),
                                    tokenizer_->vocab_size(), &resume))
    return exchange->Fail(*error);
  const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
  if (resume) {
    if (auto error = ApplyStreamResume(*resume, &request)) return exchange->Fail(*error);
  }
  const bool prefill_only = !exchange->request.Header(kPrefillOnlyHeader).empty();
  // Prefill/decode disaggregation: the first output token travels from the prefill unit with the state after
  // the whole prompt (kFirstTokenHeader); a continuation's ids already hold it.
  const bool hands_off_first_token = prefill_only && CanTakeFirstToken(request);
  std::optional<engine::RequestUpdate> first_token_update;
  if (!prefill_only && !resume) {
    std::optional<int32_t> first_token;
    if (auto error = ReadFirstToken(exchange->request.Header(kFirstTokenHeader), tokenizer_->vocab_size(), &first_token))
      return exchange->Fail(*error);
    // A prompt the engine could not hold one token longer computes that token itself (never a refusal).
    if (first_token && engine_ && CanTakeFirstToken(request) &&
        static_cast<int64_t>(request.prompt.size()) < engine_->info().max_prompt_tokens)
      first_token_update = TakeFirstToken(*first_token, *tokenizer_, &request);
  }
  if (prefill_only) {
    // The decode unit resumes after the first token from the state after the whole prompt; one that has no
    // other token to generate needs no state at all.
    request.params.snapshot_whole_prompt = hands_off_first_token && request.params.sampling.max_tokens > 1;
    request.params.sampling.max_tokens = 1;
    request.params.sampling.min_tokens = 0;
  }
  request.params.tag = exchange->request_id;
  for (const std::string& warning : request.warnings) {
    DI_LOG(kWarn, "structured output is lenient").Field("id", exchange->request_id).Field("warning", warning);
    exchange->headers.push_back({"x-deepinfer-warning", HeaderSafe(warning)});
  }
  if (options_.request_timeout_s > 0)
    request.params.deadline_nanos = NowNanos() + static_cast<int64_t>(options_.request_timeout_s * 1e9);
  // Bad parameters are 400 whether or not this server can generate.
  if (!engine_) return exchange->Fail(NoEngine());

  pipeline::ResponseContext context;
  context.id = resume ? resume->id : pipeline::NewResponseId(pipeline::ResponseIdPrefix(api));
  context.model = options_.served_model_names.front();
  context.created = resume ? resume->created : pipeline::UnixSeconds();
  const int64_t created = context.created;
  const bool announce_resume = !exchange->request.Header(kStreamResumeHeader).empty() && ResumableStream(request);
  context.model_version = options_.model_version;
  if (turn) context.previous_response_id = turn->previous_response_id;
  const std::string id = context.id;
  std::unique_ptr<pipeline::UpdateTranslator> translator = request.TakeTranslator(std::move(context));
  // The resumed ids' events went out from the interrupted unit; replayed here, they set the codec's state.
  if (resume && !resume->token_ids.empty()) {
    for (const engine::RequestUpdate& update : ResumePrimingUpdates(*resume, prompt_tokens, *tokenizer_))
      translator->Replay(update);
  }
  auto generation = std::make_shared<Generation>(exchange, engine_, std::move(translator));
  if (announce_resume) generation->AnnounceResumeInfo(id, created);
  if (prefill_only && kv_store_flush_) generation->FlushBeforeAnswer(kv_store_flush_);
  if (hands_off_first_token) generation->AnswerFirstToken();
  if (first_token_update) generation->ReportFirstToken(std::move(*first_token_update));
  if (turn && turn->store) {
    generation->OnCompleted([this, id, turn](const std::string& body) { StoreResponse(id, *turn, body); });
  }
  std::vector<std::vector<int32_t>> prompts;
  prompts.push_back(std::move(request.prompt));
  for (std::vector<int32_t>& more : request.more_prompts) prompts.push_back(std::move(more));
  generation->Start(std::move(prompts), std::move(request.params), draining_.load());
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
  out->Family("deepinfer:window_misses_total", "counter",
              "Prefix hits without their cached window blocks, by why they were missing.");
  const std::pair<const char*, uint64_t> misses[] = {{"evicted", s.window_misses_evicted},
                                                     {"expired", s.window_misses_expired},
                                                     {"never_cached", s.window_misses_never_cached}};
  for (const auto& [cause, count] : misses) {
    MetricLabels labels = model;
    labels.push_back({"cause", cause});
    out->Sample("deepinfer:window_misses_total", labels, static_cast<double>(count));
  }
  counter("deepinfer:replayed_tokens_total", "Tokens recomputed by window-state replays.",
          static_cast<double>(s.replayed_tokens));
  counter("deepinfer:snapshot_hits_total", "Prompts resumed to the token from a finished sequence's snapshot.",
          static_cast<double>(s.snapshot_hits));
  counter("deepinfer:snapshot_misses_total", "Prompts that looked for a finished sequence's snapshot and found none.",
          static_cast<double>(s.snapshot_misses));
  counter("deepinfer:snapshot_tokens_total", "Tokens snapshot hits resumed past their last full cached block.",
          static_cast<double>(s.snapshot_tokens));
  gauge("deepinfer:snapshots_cached", "Finished sequences' snapshots kept for token-exact continuation.",
        static_cast<double>(s.snapshots_cached));
  gauge("deepinfer:snapshot_bytes", "Bytes of those snapshots.", static_cast<double>(s.snapshot_bytes));
  counter("deepinfer:prompt_tokens_total", "Prompt tokens of admitted requests.", static_cast<double>(s.prompt_tokens));
  counter("deepinfer:generation_tokens_total", "Generated tokens.", static_cast<double>(s.generation_tokens));
  out->Family("deepinfer:request_success_total", "counter", "Finished requests by finish reason.");
  for (int r = 0; r < 5; ++r) {
    MetricLabels labels = model;
    labels.push_back({"finished_reason", std::string(engine::FinishReasonName(static_cast<engine::FinishReason>(r)))});
    out->Sample("deepinfer:request_success_total", labels, static_cast<double>(s.requests_finished[r]));
  }
  if (s.num_speculative_tokens > 0) {
    counter("deepinfer:spec_decode_num_drafts_total", "Verify steps of an output with draft tokens.",
            static_cast<double>(s.spec_decode_num_drafts));
    counter("deepinfer:spec_decode_num_draft_tokens_total", "Draft tokens verified.",
            static_cast<double>(s.spec_decode_num_draft_tokens));
    counter("deepinfer:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.",
            static_cast<double>(s.spec_decode_num_accepted_tokens));
    counter("deepinfer:spec_decode_scheduled_steps_total",
            "Decode steps whose scheduled verify budget was below the full block.",
            static_cast<double>(s.spec_decode_scheduled_steps));
    counter("deepinfer:spec_decode_trimmed_positions_total",
            "Draft positions the full block would have verified that scheduled steps did not.",
            static_cast<double>(s.spec_decode_trimmed_positions));
    out->Family("deepinfer:spec_decode_num_accepted_tokens_per_pos_total", "counter",
                "Draft tokens accepted at each draft position.");
    for (int i = 0; i < s.num_speculative_tokens && i < engine::kMaxSpeculativeTokens; ++i) {
      MetricLabels labels = model;
      labels.push_back({"position", std::to_string(i)});
      out->Sample("deepinfer:spec_decode_num_accepted_tokens_per_pos_total", labels,
                  static_cast<double>(s.spec_decode_num_accepted_tokens_per_pos[i]));
    }
  }
  histogram("deepinfer:time_to_first_token_seconds", "Time to first token.", s.time_to_first_token);
  histogram("deepinfer:inter_token_latency_seconds", "Time between tokens (TBT).", s.inter_token_latency);
  histogram("deepinfer:request_queue_time_seconds", "Time waiting before first scheduled.", s.request_queue_time);
  histogram("deepinfer:e2e_request_latency_seconds", "End-to-end request latency.", s.e2e_request_latency);
}

}  // namespace deepinfer::server
