// One proxied request: placement, the attempts before the first byte, the stream relay and, for a
// streamed legacy Completion or chat-protocol stream, the migration of an interrupted stream to another
// unit (router.h).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>

#include "core/clock.h"
#include "core/log.h"
#include "kvcache/block_size.h"
#include "router/chat_stream_tracker.h"
#include "router/router.h"
#include "router/router_internal.h"
#include "server/api_errors.h"
#include "server/stream_resume.h"

namespace deepinfer::router {

namespace {

using Json = nlohmann::json;
using server::HttpHeader;
using server::HttpRequest;
using server::HttpResponse;
using server::ResponseChannel;

// A prompt shorter than one KV block leaves nothing in the store to hand over.
constexpr int64_t kPrefillMinTokens = kvcache::kBlockTokens;

std::string RandomHex(int digits) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < digits; ++i) out += kHex[rng() & 15];
  return out;
}

int64_t Deadline(double seconds) { return NowNanos() + static_cast<int64_t>(seconds * 1e9); }

// The request headers a unit needs (credentials, protocol version, the request id).
std::vector<HttpHeader> ForwardedHeaders(const HttpRequest& request) {
  std::vector<HttpHeader> out;
  for (const char* name : {"authorization", "x-api-key", "anthropic-version", "anthropic-beta", "x-request-id"})
    if (std::string_view v = request.Header(name); !v.empty()) out.push_back({name, std::string(v)});
  out.push_back({"content-type", "application/json"});
  return out;
}

// The response headers the client sees, from the unit's.
std::vector<HttpHeader> ReturnedHeaders(const UpstreamHead& head, const std::string& unit_id) {
  std::vector<HttpHeader> out;
  for (const char* name : {"x-request-id", "retry-after"})
    if (std::string_view v = head.Header(name); !v.empty()) out.push_back({name, std::string(v)});
  out.push_back({"x-deepinfer-unit", unit_id});
  return out;
}

void EraseArrayField(std::string* event, std::string_view key) {
  const std::string needle = ",\"" + std::string(key) + "\":[";
  const size_t at = event->find(needle);
  if (at == std::string::npos) return;
  const size_t close = event->find(']', at + needle.size());
  if (close == std::string::npos) return;
  event->erase(at, close + 1 - at);
}

// A migratable stream's state: what its client has received.
struct Continuation {
  bool client_wants_ids = false;
  int64_t max_tokens = 16;  // the legacy Completions default
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated;
  std::vector<size_t> chunk_sizes;  // ids per chunk: the unit's updates as its codec saw them
  bool finished = false;  // a finish_reason went out
  std::string id, created;  // the first chunk's values, as written
};

// Reads a migratable event's token ids and rewrites it for the client; false when it is malformed.
bool TrackEvent(std::string* event, Continuation* c, bool continued) {
  constexpr std::string_view kData = "data: ";
  if (event->compare(0, kData.size(), kData) != 0 || event->compare(kData.size(), std::string::npos, "[DONE]") == 0)
    return true;
  Json j = Json::parse(event->begin() + static_cast<std::ptrdiff_t>(kData.size()), event->end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  auto choices = j.find("choices");
  if (choices != j.end() && choices->is_array() && !choices->empty() && (*choices)[0].is_object()) {
    const Json& choice = (*choices)[0];
    if (auto p = choice.find("prompt_token_ids"); !continued && p != choice.end() && p->is_array())
      for (const Json& id : *p)
        if (id.is_number_integer()) c->prompt_ids.push_back(id.get<int32_t>());
    if (auto t = choice.find("token_ids"); t != choice.end() && t->is_array()) {
      size_t n = 0;
      for (const Json& id : *t)
        if (id.is_number_integer()) c->generated.push_back(id.get<int32_t>()), ++n;
      if (n > 0) c->chunk_sizes.push_back(n);
    }
    if (auto f = choice.find("finish_reason"); f != choice.end() && !f->is_null()) c->finished = true;
  }
  // A continuation is another request to its unit: its chunks carry the first response's id and time.
  for (const char* key : {"\"id\":", "\"created\":"}) {
    const size_t at = event->find(key);
    if (at == std::string::npos) continue;
    const size_t from = at + std::strlen(key);
    const size_t to = (*event)[from] == '"' ? event->find('"', from + 1) + 1 : event->find_first_of(",}", from);
    if (to == std::string::npos || to <= from) continue;
    std::string& kept = key[1] == 'i' ? c->id : c->created;
    if (!continued && kept.empty()) kept = event->substr(from, to - from);
    else if (continued && !kept.empty()) event->replace(from, to - from, kept);
  }
  if (continued || !c->client_wants_ids) EraseArrayField(event, "prompt_token_ids");
  if (!c->client_wants_ids) EraseArrayField(event, "token_ids");
  return true;
}

}  // namespace

// One attempt's connection, with the unit's counters held while it is open.
struct Router::Exchange {
  std::shared_ptr<Unit> unit;
  Upstream upstream;
  UpstreamHead head;
  int64_t prompt_tokens = 0;
  bool prefill_counted = false;

  ~Exchange() {
    FirstByte();
    if (unit) unit->placed_streams.fetch_sub(1);
  }
  void FirstByte() {
    if (prefill_counted) unit->placed_prefill_tokens.fetch_sub(prompt_tokens);
    prefill_counted = false;
  }
};

void Router::ProxyGet(const HttpRequest& request, ResponseChannel& channel) {
  auto units = Snapshot();
  std::sort(units.begin(), units.end(), [](const auto& a, const auto& b) {
    return a->placed_streams.load() < b->placed_streams.load();
  });
  const int64_t now_ms = UnixMillisNow();
  for (const auto& unit : units) {
    if (!unit->Usable(now_ms)) continue;
    Upstream up;
    const int64_t deadline = Deadline(options_.connect_timeout_s + options_.health_timeout_s);
    UpstreamHead head;
    std::string body;
    Status s = up.Connect(unit->addr.host, unit->addr.port, deadline);
    if (s.ok()) s = up.Send("GET", request.target, ForwardedHeaders(request), {}, deadline);
    if (s.ok()) {
      auto h = up.ReadHead(deadline);
      s = h.status();
      if (h.ok()) head = std::move(*h);
    }
    while (s.ok()) {
      auto done = up.ReadBody(&body, deadline);
      if (!done.ok()) s = done.status();
      else if (*done) break;
      if (body.size() > options_.max_response_bytes) s = Status::ResourceExhausted("response too large");
    }
    if (!s.ok()) {
      unit->failed_at_ms.store(UnixMillisNow());
      continue;
    }
    HttpResponse r;
    r.status = head.status;
    r.content_type = std::string(head.Header("content-type"));
    r.headers = ReturnedHeaders(head, unit->id);
    r.body = std::move(body);
    channel.Respond(std::move(r));
    return;
  }
  counters_.failed.fetch_add(1);
  pipeline::ApiError e;
  e.status = 503;
  e.message = "no healthy unit";
  e.retry_after_s = 1;
  channel.Respond(server::ErrorResponse(server::FamilyForPath(request.path), e));
}

void Router::Proxy(HttpRequest request, std::shared_ptr<ResponseChannel> channel) {
  counters_.requests.fetch_add(1);
  if (request.method == "GET") {
    ProxyGet(request, *channel);
    return;
  }
  const server::ApiFamily family = server::FamilyForPath(request.path);
  auto fail = [&](int status, std::string message, int retry_after_s = 0) {
    counters_.failed.fetch_add(1);
    pipeline::ApiError e;
    e.status = status;
    e.message = std::move(message);
    e.retry_after_s = retry_after_s;
    channel->Respond(server::ErrorResponse(family, e));
  };

  // The request's id travels to every unit it reaches, so that a cancel names it (router.h).
  std::string request_id(request.Header("x-request-id"));
  if (request_id.empty() || request_id.size() > kMaxRequestIdBytes) {
    request_id = "router-" + RandomHex(16);
    std::erase_if(request.headers, [](const HttpHeader& h) { return h.name == "x-request-id"; });  // names: lower case
    request.headers.push_back({"x-request-id", request_id});
  }
  const std::shared_ptr<std::atomic<bool>> cancelled = RegisterInFlight(request_id);
  auto gone = [&] { return channel->cancelled() || cancelled->load(); };
  // On a cancel at the router the client's response ends with the protocol's error: a stream with its error
  // event, anything else with an error response (what was answered already in full stays as it was).
  bool stream_started = false;
  std::optional<ChatStreamTracker> chat;
  struct OnExit {
    std::function<void()> run;
    ~OnExit() { run(); }
  } on_exit{[&] {
    UnregisterInFlight(request_id, cancelled);
    if (!cancelled->load() || channel->cancelled()) return;
    counters_.cancelled.fetch_add(1);
    const std::string message = "the request was cancelled at the router";
    if (stream_started) {
      channel->Write(chat ? chat->ErrorEvent(message)
                          : "data: {\"error\": {\"message\": \"" + message + "\", \"type\": \"api_error\", \"code\": \"cancelled\"}}\n\n");
      channel->End();
      return;
    }
    pipeline::ApiError e;
    e.status = 409;
    e.message = message;
    channel->Respond(server::ErrorResponse(family, e));
  }};

  // What the router reads of the body: only what placement and migration need. Validation is the unit's.
  std::string body = std::move(request.body);
  Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::optional<Continuation> continuation;
  if (request.path == "/v1/completions" && json.is_object() && json.value("stream", false) == true &&
      json.value("n", 1) == 1 && json.value("echo", false) == false &&
      (!json.contains("logprobs") || json["logprobs"].is_null()) && json.contains("prompt") &&
      (json["prompt"].is_string() || (json["prompt"].is_array() && !json["prompt"].empty() && json["prompt"][0].is_number_integer()))) {
    Continuation& c = continuation.emplace();
    c.client_wants_ids = json.value("return_token_ids", false) == true;
    if (json.contains("max_tokens") && json["max_tokens"].is_number_integer()) c.max_tokens = json["max_tokens"].get<int64_t>();
    json["return_token_ids"] = true;
    // A continuation samples as the interrupted request would have: with the same seed.
    if (!json.contains("seed") || json["seed"].is_null()) json["seed"] = std::random_device{}() & 0x7fffffff;
    body = json.dump();
  }
  // A chat-protocol stream: the unit is asked for what resuming it takes (chat_stream_tracker.h).
  if (auto protocol = ResumableChatPath(request.path); protocol && json.is_object() && json.value("stream", false) == true)
    chat.emplace(*protocol);
  const int64_t prompt_tokens = static_cast<int64_t>(body.size() / 4) + 1;  // bytes per token, about
  const bool generation = request.path == "/v1/completions" || ResumableChatPath(request.path).has_value();
  const int64_t arrival_ms = UnixMillisNow();
  std::vector<HttpHeader> headers = ForwardedHeaders(request);
  if (chat) headers.push_back({std::string(server::kStreamResumeHeader), "1"});

  std::vector<std::shared_ptr<Unit>> tried;
  int attempts = 0;
  PlacementDecision refused;
  // Waits in short slices so that a client gone stops the wait.
  auto wait_head = [&](Exchange& ex, int64_t deadline) -> Status {
    while (true) {
      auto head = ex.upstream.ReadHead(std::min(deadline, Deadline(0.2)));
      if (head.ok()) {
        ex.head = std::move(*head);
        return Status::Ok();
      }
      if (head.status().code() != StatusCode::kDeadlineExceeded || NowNanos() >= deadline) return head.status();
      if (gone()) return Status::Cancelled("the client left or the request was cancelled");
    }
  };
  // Opens an exchange on the best unit not yet tried: connected, sent, its head read. Null when none is left.
  // `prefill`: among the prefill units, for a prefill-only request; otherwise among the units that decode.
  auto open = [&](const std::string& payload, int64_t tokens, bool prefill = false) -> std::unique_ptr<Exchange> {
    std::vector<HttpHeader> sent = headers;
    if (prefill) sent.push_back({std::string(server::kPrefillOnlyHeader), "1"});
    while (attempts < options_.max_attempts && !gone()) {
      const auto units = Snapshot();
      const int64_t now_ms = UnixMillisNow();
      std::vector<PlacementLoad> loads;
      loads.reserve(units.size());
      for (const auto& u : units) {
        PlacementLoad l = u->Load(now_ms);
        if (std::find(tried.begin(), tried.end(), u) != tried.end()) l.usable = false;
        if ((u->Role() == UnitRole::kPrefill) != prefill) l.usable = false;
        loads.push_back(l);
      }
      const PlacementDecision d = Place(loads, tokens, options_.slo);
      if (d.order.empty()) {
        refused = d;
        return nullptr;
      }
      auto ex = std::make_unique<Exchange>();
      ex->unit = units[static_cast<size_t>(d.order.front())];
      ex->prompt_tokens = tokens;
      ex->unit->placed_streams.fetch_add(1);
      ex->unit->placed_prefill_tokens.fetch_add(tokens);
      ex->prefill_counted = true;
      tried.push_back(ex->unit);
      if (++attempts > 1) counters_.retries.fetch_add(1);
      Status s = ex->upstream.Connect(ex->unit->addr.host, ex->unit->addr.port, Deadline(options_.connect_timeout_s));
      if (s.ok()) s = ex->upstream.Send("POST", request.target, sent, payload, Deadline(options_.connect_timeout_s + 10));
      if (s.ok()) s = wait_head(*ex, Deadline(options_.first_byte_timeout_s));
      if (s.ok() && ex->head.status >= 500 && attempts < options_.max_attempts) {
        // Loading, draining or broken: the next unit may take it.
        DI_LOG(kInfo, "unit refused a request").Field("unit", ex->unit->id).Field("status", ex->head.status);
        continue;
      }
      if (s.ok()) return ex;
      if (s.code() == StatusCode::kCancelled) return nullptr;
      DI_LOG(kWarn, "unit failed before the first byte").Field("unit", ex->unit->id).Field("reason", s.message());
      ex->unit->failed_at_ms.store(UnixMillisNow());
    }
    return nullptr;
  };
  auto no_unit = [&] {
    if (gone()) return;
    if (refused.retry_after_s == 0) {
      fail(503, "no healthy unit could take the request", 1);
      return;
    }
    counters_.rejected_slo.fetch_add(1);
    fail(429, "no unit can meet the latency objective now (predicted time to first token " +
                  std::to_string(refused.best.ttft_s) + " s)",
         static_cast<int>(std::ceil(refused.retry_after_s)));
  };

  // Reads what body bytes arrive; a failure, the stall deadline or the client leaving is an error.
  auto read_some = [&](Exchange& ex, std::string* out, double stall_s) -> Result<bool> {
    const int64_t deadline = Deadline(stall_s);
    while (true) {
      // Checked before every read: a unit streaming without pause never lets a read time out.
      if (gone()) return Status::Cancelled("the client left or the request was cancelled");
      auto done = ex.upstream.ReadBody(out, std::min(deadline, Deadline(0.2)));
      if (done.ok()) return done;
      if (done.status().code() != StatusCode::kDeadlineExceeded || NowNanos() >= deadline) return done.status();
      if (gone()) return Status::Cancelled("the client left or the request was cancelled");
    }
  };

  // Prefill/decode disaggregation: with prefill units about, a prompt of at least a block is computed on one
  // first, whose answer comes once the prompt's blocks are durable in the shared store; the full request
  // then goes to a decode unit, which reads them from there. Whatever goes wrong on the prefill side (a
  // unit that dies, hangs or refuses, a partial write) leaves blocks the decode unit does not find or
  // refuses on reading them (checksums, token ids): it computes those itself.
  if (generation && json.is_object() && prompt_tokens >= kPrefillMinTokens && HasPrefillUnit()) {
    Json prefill_json = json;
    prefill_json["stream"] = false;
    prefill_json.erase("stream_options");
    if (request.path == "/v1/responses") prefill_json["store"] = false;
    const std::string prefill_body = prefill_json.dump();
    Status s = Status::Unavailable("no prefill unit could take the request");
    std::unique_ptr<Exchange> prefill = open(prefill_body, prompt_tokens, /*prefill=*/true);
    if (prefill) {
      std::string answer;
      s = prefill->head.status == 200 ? Status::Ok() : Status::Unavailable("status " + std::to_string(prefill->head.status));
      while (s.ok()) {
        auto done = read_some(*prefill, &answer, options_.first_byte_timeout_s);
        if (!done.ok()) s = done.status();
        else if (*done) break;
        else if (answer.size() > options_.max_response_bytes) s = Status::ResourceExhausted("the prefill answer is too large");
      }
      if (!s.ok() && s.code() != StatusCode::kCancelled && s.code() != StatusCode::kUnavailable)
        prefill->unit->failed_at_ms.store(UnixMillisNow());
      if (!s.ok()) DI_LOG(kWarn, "prefill failed; the decode unit computes the prompt").Field("unit", prefill->unit->id)
          .Field("reason", s.message());
      // The first output token, sampled where the prompt's last position was computed: the decode unit
      // reports it and resumes after it (the unit checks the id; here only its form).
      const std::string_view first = prefill->head.Header(server::kFirstTokenHeader);
      if (s.ok() && !first.empty() && first.size() <= 10 &&
          std::all_of(first.begin(), first.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        headers.push_back({std::string(server::kFirstTokenHeader), std::string(first)});
        counters_.first_tokens_handed.fetch_add(1);
      }
    }
    if (gone()) return;
    (s.ok() ? counters_.prefills : counters_.prefill_fallbacks).fetch_add(1);
    attempts = 0;
  }

  std::unique_ptr<Exchange> ex;
  std::string pending;  // stream bytes received, not yet forwarded (an incomplete event)
  while (true) {
    ex = open(body, prompt_tokens);
    if (!ex) return no_unit();
    const bool stream = ex->head.Header("content-type").find("text/event-stream") != std::string_view::npos;
    if (!stream) {
      std::string response;
      Status s;
      while (true) {
        auto done = read_some(*ex, &response, options_.first_byte_timeout_s);
        if (!done.ok()) {
          s = done.status();
          break;
        }
        if (response.size() > options_.max_response_bytes) {
          s = Status::ResourceExhausted("the unit's response is too large");
          break;
        }
        if (*done) break;
      }
      if (s.code() == StatusCode::kCancelled) return;
      if (!s.ok()) {
        DI_LOG(kWarn, "unit failed before the first byte").Field("unit", ex->unit->id).Field("reason", s.message());
        ex->unit->failed_at_ms.store(UnixMillisNow());
        continue;
      }
      HttpResponse r;
      r.status = ex->head.status;
      r.content_type = std::string(ex->head.Header("content-type"));
      r.headers = ReturnedHeaders(ex->head, ex->unit->id);
      if (generation && r.status == 200) {
        // Every protocol's usage names its counts one of two ways.
        const Json answer = Json::parse(response, nullptr, false);
        const Json usage = answer.is_object() && answer.contains("usage") ? answer["usage"] : Json();
        auto count = [&](const char* a, const char* b) -> int64_t {
          for (const char* key : {a, b})
            if (usage.is_object() && usage.contains(key) && usage[key].is_number_integer()) return usage[key].get<int64_t>();
          return 0;
        };
        recent_.Add(arrival_ms, count("prompt_tokens", "input_tokens"), count("completion_tokens", "output_tokens"));
      }
      r.body = std::move(response);
      channel->Respond(std::move(r));
      return;
    }
    // A stream: the client's response starts with the first complete event, so a unit that fails before
    // it costs the client nothing.
    pending.clear();
    Status s;
    while (pending.find("\n\n") == std::string::npos) {
      auto done = read_some(*ex, &pending, options_.first_byte_timeout_s);
      if (!done.ok()) {
        s = done.status();
        break;
      }
      if (*done && pending.find("\n\n") == std::string::npos) {
        s = Status::DataLoss("the unit's stream ended before its first event");
        break;
      }
      if (pending.size() > options_.max_response_bytes) {
        s = Status::ResourceExhausted("the unit's event is too large");
        break;
      }
    }
    if (s.code() == StatusCode::kCancelled) return;
    if (s.ok()) break;
    DI_LOG(kWarn, "unit failed before the first byte").Field("unit", ex->unit->id).Field("reason", s.message());
    ex->unit->failed_at_ms.store(UnixMillisNow());
  }

  ex->FirstByte();
  stream_started = true;
  channel->StartStream(ex->head.status, std::string(ex->head.Header("content-type")), ReturnedHeaders(ex->head, ex->unit->id));
  bool continued = false;
  int migrations = 0;
  bool body_done = false;
  while (true) {
    // Forward every complete event.
    Status unit_error;
    size_t at;
    std::string out;
    while (unit_error.ok() && (at = pending.find("\n\n")) != std::string::npos) {
      std::string event = pending.substr(0, at);
      pending.erase(0, at + 2);
      if (chat) {
        if (!chat->Take(event, &out)) unit_error = Status::DataLoss("the unit's resume information is malformed");
        continue;
      }
      if (continuation && !TrackEvent(&event, &*continuation, continued)) continue;
      out += event + "\n\n";
    }
    if (!out.empty()) channel->Write(std::move(out));
    if (unit_error.ok() && body_done) {
      if (chat) {
        std::string rest;
        chat->Flush(&rest);
        channel->Write(std::move(rest));
      }
      if (!pending.empty()) channel->Write(std::move(pending));
      channel->End();
      if (generation && ex->head.status == 200) {
        if (continuation) recent_.Add(arrival_ms, static_cast<int64_t>(continuation->prompt_ids.size()),
                                      static_cast<int64_t>(continuation->generated.size()));
        if (chat) recent_.Add(arrival_ms, prompt_tokens, static_cast<int64_t>(chat->generated()));
      }
      return;
    }
    if (pending.size() + (chat ? chat->held_bytes() : 0) > options_.max_response_bytes) {
      const std::string message = "the unit's event is too large";
      channel->Write(chat ? chat->ErrorEvent(message)
                          : "data: {\"error\": {\"message\": \"" + message + "\", \"type\": \"api_error\"}}\n\n");
      counters_.failed.fetch_add(1);
      channel->End();
      return;
    }
    if (unit_error.ok()) {
      auto done = read_some(*ex, &pending, options_.stall_timeout_s);
      if (done.ok()) {
        body_done = *done;
        continue;
      }
      unit_error = done.status();
    }
    if (unit_error.code() == StatusCode::kCancelled) return;  // the exchange is gone; closing ours aborts the unit's
    DI_LOG(kWarn, "unit failed mid-stream").Field("unit", ex->unit->id).Field("reason", unit_error.message());
    ex->unit->failed_at_ms.store(UnixMillisNow());
    pending.clear();
    body_done = false;
    if (chat) {
      chat->Interrupted();
      if (chat->finished()) {
        channel->Write(chat->EndOfFinishedStream());
        channel->End();
        return;
      }
      std::unique_ptr<Exchange> next;
      if (chat->resumable() && migrations < options_.migration_limit) {
        ++migrations;
        attempts = 0;
        const std::string resumed = chat->ResumeBody(json);
        const int64_t tokens = prompt_tokens + static_cast<int64_t>(chat->generated());
        next = open(resumed, tokens);
        while (next && next->head.status != 200) next = open(resumed, tokens);
      }
      if (!next) {
        if (gone()) return;
        counters_.failed.fetch_add(1);
        channel->Write(chat->ErrorEvent("the unit serving this stream failed and no other could continue it"));
        channel->End();
        return;
      }
      counters_.migrations.fetch_add(1);
      DI_LOG(kInfo, "stream migrated").Field("from", ex->unit->id).Field("to", next->unit->id)
          .Field("tokens", static_cast<int64_t>(chat->generated()));
      ex = std::move(next);
      ex->FirstByte();
      continue;
    }
    Continuation* c = continuation ? &*continuation : nullptr;
    if (c && c->finished) {
      channel->Write("data: [DONE]\n\n");
      channel->End();
      return;
    }
    const int64_t left = c ? c->max_tokens - static_cast<int64_t>(c->generated.size()) : 0;
    std::unique_ptr<Exchange> next;
    if (c && !c->prompt_ids.empty() && !c->id.empty() && left > 0 && migrations < options_.migration_limit) {
      ++migrations;
      // The unit appends the ids to the prompt and primes its detokenizer with them: the bytes of a character
      // the interrupted unit held back are where they were (server/stream_resume.h).
      Json resumed = json;
      Json ids = Json::array();
      for (int32_t id : c->generated) ids.push_back(id);
      Json sizes = Json::array();
      for (size_t n : c->chunk_sizes) sizes.push_back(n);
      const Json id = Json::parse(c->id, nullptr, false);
      const int64_t created = std::strtoll(c->created.c_str(), nullptr, 10);
      resumed[std::string(server::kResumeField)] = {{"token_ids", std::move(ids)}, {"update_sizes", std::move(sizes)},
                                                    {"seed", json["seed"]}, {"id", id.is_string() ? id : Json("")},
                                                    {"created", created}};
      attempts = 0;
      const int64_t tokens = static_cast<int64_t>(c->prompt_ids.size() + c->generated.size());
      const std::string payload = resumed.dump();
      next = open(payload, tokens);
      while (next && next->head.status != 200) next = open(payload, tokens);
    }
    if (!next) {
      if (gone()) return;
      counters_.failed.fetch_add(1);
      channel->Write("data: {\"error\": {\"message\": \"the unit serving this stream failed and no other could continue it\", "
                     "\"type\": \"api_error\", \"code\": \"unit_failed\"}}\n\n");
      channel->End();
      return;
    }
    counters_.migrations.fetch_add(1);
    DI_LOG(kInfo, "stream migrated").Field("from", ex->unit->id).Field("to", next->unit->id)
        .Field("tokens", static_cast<int64_t>(c->generated.size()));
    ex = std::move(next);
    ex->FirstByte();
    continued = true;
  }
}

}  // namespace deepinfer::router
