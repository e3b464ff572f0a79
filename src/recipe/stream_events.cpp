#include "recipe/stream_events.h"

#include <cstdint>
#include <memory>

#include "recipe/output_parser.h"
#include "recipe/response_chat.h"
#include "recipe/response_messages.h"
#include "recipe/response_responses.h"

namespace deepinfer::recipe {

// The protocol-specific half of a run: turns parser deltas into events.
class CompletionEncoder {
 public:
  virtual ~CompletionEncoder() = default;
  virtual void Start(const UsageCounts& usage, std::vector<StreamEvent>* events) = 0;
  virtual void Deltas(const std::vector<OutputDelta>& deltas, const std::vector<std::string>* logprobs,
                      std::vector<StreamEvent>* events) = 0;
  // Ends the stream; returns the finish/stop reason.
  virtual std::string Finish(std::optional<BackendFinish> finish, const OutputParser& parser,
                             const UsageCounts& usage, std::vector<StreamEvent>* events) = 0;
  virtual std::string Response(const OutputParser& parser, const std::string& reason,
                               const UsageCounts& usage) const = 0;
};

namespace {

class ChatEncoder final : public CompletionEncoder {
 public:
  explicit ChatEncoder(const ResponseOptions& options) : stream_(options) {}
  void Start(const UsageCounts&, std::vector<StreamEvent>* events) override {
    events->push_back({"", stream_.RoleChunk()});
  }
  void Deltas(const std::vector<OutputDelta>& deltas, const std::vector<std::string>* logprobs,
              std::vector<StreamEvent>* events) override {
    std::vector<std::string> chunks;
    stream_.AppendChunks(deltas, &chunks, logprobs);
    for (std::string& chunk : chunks) events->push_back({"", std::move(chunk)});
  }
  std::string Finish(std::optional<BackendFinish> finish, const OutputParser& parser, const UsageCounts& usage,
                     std::vector<StreamEvent>* events) override {
    // Without a backend finish the stream just ended: deepseek-recipe reports "stop" even after tool calls.
    const std::string reason =
        parser.stopped_by_sequence() || !finish
            ? std::string("stop")
            : std::string(ChatFinishReason(*finish, false, parser.tool_call_count()));
    events->push_back({"", stream_.FinalChunk(reason, usage)});
    return reason;
  }
  std::string Response(const OutputParser&, const std::string& reason, const UsageCounts& usage) const override {
    return stream_.Response(reason, usage);
  }

 private:
  ChatCompletionStream stream_;
};

class MessagesEncoder final : public CompletionEncoder {
 public:
  explicit MessagesEncoder(const ResponseOptions& options) : stream_(options) {}
  void Start(const UsageCounts& usage, std::vector<StreamEvent>* events) override {
    std::vector<MessagesEvent> out;
    stream_.Start(usage, &out);
    Move(out, events);
  }
  void Deltas(const std::vector<OutputDelta>& deltas, const std::vector<std::string>*,
              std::vector<StreamEvent>* events) override {  // Anthropic Messages have no logprobs
    std::vector<MessagesEvent> out;
    stream_.AppendEvents(deltas, &out);
    Move(out, events);
  }
  std::string Finish(std::optional<BackendFinish> finish, const OutputParser& parser, const UsageCounts& usage,
                     std::vector<StreamEvent>* events) override {
    const std::string reason(
        MessagesStopReason(finish, parser.stopped_by_sequence(), parser.tool_call_count()));
    std::vector<MessagesEvent> out;
    stream_.Finish(reason, parser.matched_stop_sequence(), usage, &out);
    Move(out, events);
    return reason;
  }
  std::string Response(const OutputParser& parser, const std::string& reason,
                       const UsageCounts& usage) const override {
    return stream_.Response(reason, parser.matched_stop_sequence(), usage);
  }

 private:
  static void Move(std::vector<MessagesEvent>& from, std::vector<StreamEvent>* to) {
    for (MessagesEvent& e : from) to->push_back({std::move(e.name), std::move(e.json)});
  }
  MessagesStream stream_;
};

class ResponsesEncoder final : public CompletionEncoder {
 public:
  explicit ResponsesEncoder(const ResponseOptions& options) : stream_(options) {}
  void Start(const UsageCounts&, std::vector<StreamEvent>* events) override {
    std::vector<ResponsesEvent> out;
    stream_.Start(&out);
    Move(out, events);
  }
  void Deltas(const std::vector<OutputDelta>& deltas, const std::vector<std::string>* logprobs,
              std::vector<StreamEvent>* events) override {
    std::vector<ResponsesEvent> out;
    stream_.AppendEvents(deltas, &out, logprobs);
    Move(out, events);
  }
  std::string Finish(std::optional<BackendFinish> finish, const OutputParser& parser, const UsageCounts& usage,
                     std::vector<StreamEvent>* events) override {
    // A stop sequence completes the response, whatever the backend would have said.
    const std::optional<BackendFinish> effective = parser.stopped_by_sequence() ? std::nullopt : finish;
    std::vector<ResponsesEvent> out;
    stream_.Finish(effective, usage, &out);
    Move(out, events);
    return effective == BackendFinish::kLength           ? "max_output_tokens"
           : effective == BackendFinish::kContentFilter ? "content_filter"
                                                         : "completed";
  }
  std::string Response(const OutputParser&, const std::string&, const UsageCounts&) const override {
    return stream_.Response();
  }

 private:
  static void Move(std::vector<ResponsesEvent>& from, std::vector<StreamEvent>* to) {
    for (ResponsesEvent& e : from) to->push_back({std::move(e.name), std::move(e.json)});
  }
  ResponsesStream stream_;
};

}  // namespace

CompletionStream::CompletionStream(OutputProtocol protocol, const OutputParserOptions& parser_options,
                                   const ResponseOptions& response_options, UsageCounts prompt_usage)
    : parser_(std::make_unique<OutputParser>(parser_options)),
      usage_(prompt_usage),
      thinking_(parser_options.thinking_stage.has_value()),
      starts_in_reasoning_(thinking_ && !parser_options.starts_in_tool_calls &&
                           parser_options.thinking_stage != ThinkingStage::kContentContinuation) {
  if (protocol == OutputProtocol::kMessages) encoder_ = std::make_unique<MessagesEncoder>(response_options);
  else if (protocol == OutputProtocol::kResponses) encoder_ = std::make_unique<ResponsesEncoder>(response_options);
  else encoder_ = std::make_unique<ChatEncoder>(response_options);
  usage_.completion_tokens = 0;
}

CompletionStream::~CompletionStream() = default;

std::vector<StreamEvent> CompletionStream::Start() {
  std::vector<StreamEvent> events;
  encoder_->Start(usage_, &events);
  return events;
}

bool CompletionStream::done() const { return parser_->stopped_by_sequence(); }

std::vector<StreamEvent> CompletionStream::Feed(const CompletionChunk& chunk) {
  std::vector<StreamEvent> events;
  if (finished_ || parser_->stopped_by_sequence()) return events;
  std::vector<OutputDelta> deltas;
  if (!chunk.logprobs.empty()) token_mode_ = true;
  const size_t chunk_begin = token_bytes_;
  std::vector<size_t> token_starts;
  for (const TokenLogprob& token : chunk.logprobs) {
    token_starts.push_back(token_bytes_);
    if (starts_in_reasoning_ && !parser_->reasoning_end()) token_spans_.push_back({token_bytes_, token_bytes_ + token.token.size()});
    token_bytes_ += token.token.size();
    pending_tokens_.push_back({token_bytes_, TokenLogprobJson(token)});
  }
  parser_->Feed(chunk.text, &deltas, std::move(token_starts));
  usage_.completion_tokens += chunk.token_count;
  if (token_mode_) {
    const std::vector<std::string> logprobs = AttachLogprobs(deltas, chunk_begin);
    encoder_->Deltas(deltas, &logprobs, &events);
  } else {
    encoder_->Deltas(deltas, nullptr, &events);
  }
  if (parser_->stopped_by_sequence()) {
    // A stop sequence completes the response here; the backend's finish no longer matters.
    CountReasoningTokens();
    finish_reason_ = encoder_->Finish(std::nullopt, *parser_, usage_, &events);
    finished_ = true;
  }
  return events;
}

std::vector<StreamEvent> CompletionStream::Finish(std::optional<BackendFinish> finish) {
  std::vector<StreamEvent> events;
  if (finished_) return events;
  std::vector<OutputDelta> deltas;
  parser_->Finish(&deltas);
  if (token_mode_) {
    const std::vector<std::string> logprobs = AttachLogprobs(deltas, token_bytes_);
    encoder_->Deltas(deltas, &logprobs, &events);
  } else {
    encoder_->Deltas(deltas, nullptr, &events);
  }
  pending_tokens_.clear();
  CountReasoningTokens();
  finish_reason_ = encoder_->Finish(finish, *parser_, usage_, &events);
  finished_ = true;
  return events;
}

std::vector<std::string> CompletionStream::AttachLogprobs(const std::vector<OutputDelta>& deltas, size_t chunk_begin) {
  std::vector<std::string> entries(deltas.size());
  for (size_t i = 0; i < deltas.size(); ++i) {
    const OutputDelta& delta = deltas[i];
    if (delta.kind != OutputDelta::Kind::kReasoning && delta.kind != OutputDelta::Kind::kContent) continue;
    // Tokens that ended inside a delimiter before this text belong to no delta.
    while (!pending_tokens_.empty() && pending_tokens_.front().end <= delta.after_delimiter) pending_tokens_.pop_front();
    while (!pending_tokens_.empty() && pending_tokens_.front().end <= delta.input_end) {
      if (!entries[i].empty()) entries[i] += ',';
      entries[i] += pending_tokens_.front().json;
      pending_tokens_.pop_front();
    }
  }
  // What the parser no longer holds has gone out or been dropped (skipped newlines, tool calls, markup),
  // except that while it holds text of this chunk, this chunk's tokens wait with it.
  const size_t held_begin = parser_->held_input_begin();
  const bool holds_this_chunk = held_begin < parser_->consumed() && held_begin >= chunk_begin;
  const size_t gone = holds_this_chunk ? chunk_begin : held_begin;
  while (!pending_tokens_.empty() && pending_tokens_.front().end <= gone) pending_tokens_.pop_front();
  return entries;
}

// deepseek-recipe counts, for token chunks, the tokens of the reasoning: those ending after the newlines a
// new turn drops and beginning before the reasoning's end (the newlines and `</think>` that close it, or
// a tool-call block).
void CompletionStream::CountReasoningTokens() {
  if (!token_mode_ || !thinking_) return;
  const size_t begin = parser_->reasoning_begin();
  const size_t end = parser_->reasoning_end().value_or(SIZE_MAX);
  for (const auto& [token_begin, token_end] : token_spans_) {
    if (token_end > begin && token_begin < end) ++reasoning_tokens_;
  }
  token_spans_.clear();
  usage_.reasoning_tokens = reasoning_tokens_;
}

std::string CompletionStream::Response() const { return encoder_->Response(*parser_, finish_reason_, usage_); }

std::vector<int> CompletionStream::issues() const {
  std::vector<int> out;
  for (OutputIssue issue : parser_->issues()) out.push_back(static_cast<int>(issue));
  return out;
}

StreamRunResult RunCompletion(OutputProtocol protocol, const OutputParserOptions& parser_options,
                              const ResponseOptions& response_options, const std::vector<CompletionChunk>& chunks,
                              std::optional<BackendFinish> finish, UsageCounts prompt_usage) {
  StreamRunResult result;
  CompletionStream stream(protocol, parser_options, response_options, prompt_usage);
  result.events_per_step.push_back(stream.Start());
  for (const CompletionChunk& chunk : chunks) {
    if (stream.done()) break;
    result.events_per_step.push_back(stream.Feed(chunk));
  }
  if (!stream.done()) result.events_per_step.push_back(stream.Finish(finish));
  result.finish_reason = stream.finish_reason();
  result.response = stream.Response();
  result.issues = stream.issues();
  return result;
}

std::string FormatSse(OutputProtocol protocol, const std::vector<std::vector<StreamEvent>>& events_per_step) {
  std::string out;
  for (const auto& step : events_per_step) {
    for (const StreamEvent& event : step) {
      if (!event.name.empty()) out += "event: " + event.name + "\n";
      out += "data: " + event.json + "\n\n";
    }
  }
  if (protocol == OutputProtocol::kChatCompletions) out += "data: [DONE]\n\n";
  return out;
}

}  // namespace deepinfer::recipe
