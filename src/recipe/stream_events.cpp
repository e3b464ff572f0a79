#include "recipe/stream_events.h"

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
  virtual void Deltas(const std::vector<OutputDelta>& deltas, std::vector<StreamEvent>* events) = 0;
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
  void Deltas(const std::vector<OutputDelta>& deltas, std::vector<StreamEvent>* events) override {
    std::vector<std::string> chunks;
    stream_.AppendChunks(deltas, &chunks);
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
  void Deltas(const std::vector<OutputDelta>& deltas, std::vector<StreamEvent>* events) override {
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
  void Deltas(const std::vector<OutputDelta>& deltas, std::vector<StreamEvent>* events) override {
    std::vector<ResponsesEvent> out;
    stream_.AppendEvents(deltas, &out);
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
    : parser_(std::make_unique<OutputParser>(parser_options)), usage_(prompt_usage) {
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
  parser_->Feed(chunk.text, &deltas);
  usage_.completion_tokens += chunk.token_count;
  encoder_->Deltas(deltas, &events);
  if (parser_->stopped_by_sequence()) {
    // A stop sequence completes the response here; the backend's finish no longer matters.
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
  encoder_->Deltas(deltas, &events);
  finish_reason_ = encoder_->Finish(finish, *parser_, usage_, &events);
  finished_ = true;
  return events;
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
