// Chat Completions, Responses and Messages: one CompletionStream per output, fed the output's tokens.
#include <chrono>
#include <random>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "pipeline/sse.h"
#include "pipeline/update_translator.h"
#include "recipe/completion_options.h"

namespace deepinfer::pipeline {

std::string NewResponseId(std::string_view prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id += kChars[rng() % 62];
  return id;
}

std::string_view ResponseIdPrefix(Api api) {
  switch (api) {
    case Api::kChatCompletions: return "chatcmpl-";
    case Api::kResponses: return "resp_";
    case Api::kMessages: return "msg_";
    case Api::kCompletions: return "cmpl-";
  }
  return "";
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void UpdateTranslator::NoteFailure(const engine::RequestUpdate& update, const engine::SequenceDelta& delta) {
  if (delta.finish && *delta.finish == engine::FinishReason::kError)
    failure_ = update.status.ok() ? Status::Internal("generation failed") : update.status;
}

namespace {

std::optional<recipe::BackendFinish> ToBackendFinish(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop: return recipe::BackendFinish::kStop;
    case engine::FinishReason::kLength:
    case engine::FinishReason::kDeadline: return recipe::BackendFinish::kLength;
    default: return std::nullopt;
  }
}

class ChatTranslator : public UpdateTranslator {
 public:
  ChatTranslator(recipe::Protocol protocol, recipe::ParsedRequest request, ResponseContext context)
      : protocol_(protocol), request_(std::move(request)), context_(std::move(context)) {
    stream_ = request_.inference.stream;
    n_ = static_cast<int>(request_.inference.n);
    logprobs_ = request_.inference.logprobs;
    outputs_.resize(static_cast<size_t>(n_));
  }

  TranslatedUpdate Translate(const engine::RequestUpdate& update) override {
    TranslatedUpdate out;
    auto append = [&out](std::vector<recipe::StreamEvent> events) {
      for (recipe::StreamEvent& event : events) out.events.push_back(std::move(event));
    };
    for (const engine::SequenceDelta& delta : update.sequences) {
      if (delta.index < 0 || delta.index >= n_) continue;
      Output& output = outputs_[static_cast<size_t>(delta.index)];
      if (!output.stream) append(Begin(output, delta.index, update));
      if (output.finished) continue;
      const size_t first_event = out.events.size();
      recipe::CompletionChunk chunk;
      chunk.token_count = 0;
      for (const engine::GeneratedToken& token : delta.tokens) {
        if (delta.finish && token.id == delta.stop_token) continue;  // the end token is not text
        ++chunk.token_count;
        // Always token chunks, so the codec reads `</think>` as the control token and counts reasoning
        // tokens; the entries are written only when the request asked (ResponseOptions::emit_logprobs).
        recipe::TokenLogprob entry;
        // The output parser reads no special token (`</think>` and the DSML markers are not special), so
        // a skipped one is an ordinary token without bytes: counted, its entry kept, no text.
        const bool skipped = token.special && context_.skip_special_tokens;
        entry.token = skipped ? std::string() : token.bytes;
        entry.control = token.control && !skipped;
        if (logprobs_) {
          entry.logprob = token.logprob;
          for (const auto& alt : token.top_logprobs) entry.top_logprobs.push_back({alt.bytes, alt.logprob});
        }
        chunk.logprobs.push_back(std::move(entry));
      }
      if (chunk.token_count > 0) append(output.stream->Feed(chunk));
      if (output.stream->done()) {
        output.finished = true;  // a stop sequence completed it: the codec already wrote its finish
        ++finished_outputs_;
        if (finished_outputs_ == n_) out.stop_engine = true;
      } else if (delta.finish) {
        NoteFailure(update, delta);
        append(output.stream->Finish(ToBackendFinish(*delta.finish)));
        output.finished = true;
        ++finished_outputs_;
      }
      if (output.finished && n_ > 1 && protocol_ == recipe::Protocol::kChatCompletions) {
        for (size_t e = first_event; e < out.events.size(); ++e) ReportUsageOnce(&out.events[e]);
      }
    }
    return out;
  }

  std::vector<recipe::StreamEvent> StreamEnd() override {
    if (protocol_ == recipe::Protocol::kChatCompletions) return {kSseDone};
    return {};
  }

  // n > 1 merges the choices of the per-output bodies.
  std::string Body() override {
    for (Output& output : outputs_)
      if (output.stream && !output.finished) output.stream->Finish(std::nullopt);
    if (n_ == 1 || protocol_ != recipe::Protocol::kChatCompletions)
      return outputs_[0].stream ? outputs_[0].stream->Response() : "{}";
    nlohmann::ordered_json merged;
    UsageTotal total;
    for (const Output& output : outputs_) {
      if (!output.stream) continue;
      auto body = ParseOrderedJson(output.stream->Response());
      if (!body.ok()) continue;
      if (merged.is_null()) {
        merged = *body;
        merged["choices"] = nlohmann::ordered_json::array();
      }
      for (auto& choice : (*body)["choices"]) merged["choices"].push_back(choice);  // index from choice_index
      if ((*body).contains("usage")) total.Add((*body)["usage"]);
    }
    if (merged.contains("usage")) total.WriteInto(&merged["usage"]);
    return DumpJson(merged);
  }

 private:
  struct Output {
    std::unique_ptr<recipe::CompletionStream> stream;
    bool finished = false;
  };

  // The usage of all n outputs: the prompt once, the completions summed.
  struct UsageTotal {
    int64_t completion_tokens = 0;
    std::optional<int64_t> reasoning_tokens;
    void Add(const nlohmann::ordered_json& usage) {
      completion_tokens += usage.value("completion_tokens", int64_t{0});
      auto details = usage.find("completion_tokens_details");
      if (details != usage.end() && details->is_object() && details->contains("reasoning_tokens")) {
        reasoning_tokens = reasoning_tokens.value_or(0) + details->value("reasoning_tokens", int64_t{0});
      }
    }
    void WriteInto(nlohmann::ordered_json* usage) const {
      (*usage)["completion_tokens"] = completion_tokens;
      (*usage)["total_tokens"] = usage->value("prompt_tokens", int64_t{0}) + completion_tokens;
      if (reasoning_tokens) (*usage)["completion_tokens_details"]["reasoning_tokens"] = *reasoning_tokens;
    }
  };

  // A streamed output's last chunk carries its usage. With n outputs the stream reports the total once, on
  // the last output to finish; the others' last chunks say `"usage":null`, as the other chunks do.
  void ReportUsageOnce(recipe::StreamEvent* event) {
    if (event->json.find("\"usage\":{") == std::string::npos) return;
    auto chunk = ParseOrderedJson(event->json);
    if (!chunk.ok() || !chunk->contains("usage") || !(*chunk)["usage"].is_object()) return;
    streamed_usage_.Add((*chunk)["usage"]);
    if (finished_outputs_ == n_) {
      streamed_usage_.WriteInto(&(*chunk)["usage"]);
    } else {
      (*chunk)["usage"] = nullptr;
    }
    event->json = DumpJson(*chunk);
  }

  std::vector<recipe::StreamEvent> Begin(Output& output, int index, const engine::RequestUpdate& update) {
    recipe::ResponseOptions options = recipe::ResponseOptionsFor(request_);
    options.id = context_.id;
    if (!context_.model.empty()) options.model = context_.model;
    options.created = context_.created;
    if (!context_.previous_response_id.empty()) {
      options.responses_echo.previous_response_id = DumpJson(nlohmann::json(context_.previous_response_id));
    }
    // Served responses count what was generated: the reasoning's own tokens, and the tokens of a last
    // character that max_tokens cut short (deepseek-recipe re-encodes the one and drops the other).
    options.keep_incomplete_character = true;
    options.emit_logprobs = logprobs_;
    options.choice_index = index;  // Chat Completions' "choices":[{"index":i (n > 1)
    recipe::UsageCounts usage;
    usage.prompt_tokens = update.prompt_tokens;
    usage.prompt_cache_hit_tokens = update.prompt_cache_hit_tokens;
    output.stream = std::make_unique<recipe::CompletionStream>(
        protocol_, recipe::OutputParserOptionsFor(request_, context_.model_version), options, usage);
    return output.stream->Start();
  }

  recipe::Protocol protocol_;
  recipe::ParsedRequest request_;
  ResponseContext context_;
  bool logprobs_ = false;
  int n_ = 1;
  int finished_outputs_ = 0;
  std::vector<Output> outputs_;
  UsageTotal streamed_usage_;
};

}  // namespace

std::unique_ptr<UpdateTranslator> NewChatTranslator(recipe::Protocol protocol, recipe::ParsedRequest request,
                                                    ResponseContext context) {
  return std::make_unique<ChatTranslator>(protocol, std::move(request), std::move(context));
}

}  // namespace deepinfer::pipeline
