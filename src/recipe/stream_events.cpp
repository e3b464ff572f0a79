#include "recipe/stream_events.h"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "core/utf8.h"
#include "recipe/output_parser.h"
#include "recipe/response_chat.h"
#include "recipe/response_messages.h"
#include "recipe/response_responses.h"

namespace deepinfer::recipe {

// The protocol-specific half of a run: turns parser deltas into events.
class ProtocolSerializer {
 public:
  virtual ~ProtocolSerializer() = default;
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

class ChatSerializer final : public ProtocolSerializer {
 public:
  explicit ChatSerializer(const ResponseOptions& options) : stream_(options) {}
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

class MessagesSerializer final : public ProtocolSerializer {
 public:
  explicit MessagesSerializer(const ResponseOptions& options) : stream_(options) {}
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

class ResponsesSerializer final : public ProtocolSerializer {
 public:
  explicit ResponsesSerializer(const ResponseOptions& options) : stream_(options) {}
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

CompletionStream::CompletionStream(Protocol protocol, const OutputParserOptions& parser_options,
                                   const ResponseOptions& response_options, UsageCounts prompt_usage)
    : parser_(std::make_unique<OutputParser>(parser_options)),
      emit_logprobs_(response_options.emit_logprobs),
      keep_incomplete_character_(response_options.keep_incomplete_character),
      usage_(prompt_usage),
      thinking_(parser_options.thinking_stage.has_value()),
      starts_in_reasoning_(thinking_ && !parser_options.starts_in_tool_calls &&
                           parser_options.thinking_stage != ThinkingStage::kContentContinuation),
      count_tokens_(response_options.count_tokens) {
  ResponseOptions options = response_options;
  if (options.id.empty()) options.id = RandomResponseId(protocol);
  if (protocol == Protocol::kMessages) serializer_ = std::make_unique<MessagesSerializer>(options);
  else if (protocol == Protocol::kResponses) serializer_ = std::make_unique<ResponsesSerializer>(options);
  else serializer_ = std::make_unique<ChatSerializer>(options);
  usage_.completion_tokens = 0;
}

CompletionStream::~CompletionStream() = default;

std::vector<StreamEvent> CompletionStream::Start() {
  std::vector<StreamEvent> events;
  serializer_->Start(usage_, &events);
  return events;
}

bool CompletionStream::done() const { return parser_->stopped_by_sequence(); }

std::vector<StreamEvent> CompletionStream::Feed(const CompletionChunk& chunk) {
  std::vector<StreamEvent> events;
  if (finished_ || parser_->stopped_by_sequence()) return events;
  std::vector<OutputDelta> deltas;
  if (!chunk.logprobs.empty() && !token_mode_) {
    token_mode_ = true;
    parser_->UseThinkingEndToken();
    first_source_ = parser_->chunks_fed();
  }
  if (token_mode_) {
    FeedTokens(chunk.logprobs, &deltas);
  } else {
    parser_->Feed(chunk.text, &deltas);
    usage_.completion_tokens += chunk.token_count;
  }
  if (token_mode_) {
    const std::vector<std::string> logprobs = AttachLogprobs(deltas);
    serializer_->Deltas(deltas, emit_logprobs_ ? &logprobs : nullptr, &events);
  } else {
    serializer_->Deltas(deltas, nullptr, &events);
  }
  if (parser_->stopped_by_sequence()) {
    // A stop sequence completes the response here; the backend's finish no longer matters.
    CountReasoningTokens();
    finish_reason_ = serializer_->Finish(std::nullopt, *parser_, usage_, &events);
    finished_ = true;
  }
  return events;
}

namespace {

// deepseek-recipe's streaming decoding releases a unit's text once it no longer ends in U+FFFD.
bool EndsUndecoded(std::string_view bytes) {
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  if (utf8::IncompleteTailLength(bytes) > 0) return true;
  const std::string text = utf8::ToValidLossy(bytes.substr(bytes.size() - std::min<size_t>(bytes.size(), 4)));
  return std::string_view(text).ends_with(kReplacement);
}

}  // namespace

void CompletionStream::FeedTokens(const std::vector<TokenLogprob>& tokens, std::vector<OutputDelta>* deltas) {
  for (const TokenLogprob& token : tokens) {
    // Tokens after a stop sequence's unit are not read (nor counted).
    if (parser_->stopped_by_sequence()) return;
    if (starts_in_reasoning_ && !count_tokens_ && !parser_->reasoning_end()) {
      token_spans_.push_back({token_bytes_, token_bytes_ + token.token.size()});
    }
    token_bytes_ += token.token.size();
    if (token.control) {
      if (!unit_text_.empty() || !unit_entries_.empty()) FeedUnit(deltas);
      if (parser_->stopped_by_sequence()) return;
      if (token.token == "</think>") {
        source_entries_.push_back(TokenLogprobJson(token));
        ++usage_.completion_tokens;
        parser_->FeedThinkingEndToken(deltas);
        continue;
      }
    }
    ++unit_tokens_;
    unit_text_ += token.token;
    if (!unit_entries_.empty()) unit_entries_ += ',';
    unit_entries_ += TokenLogprobJson(token);
    if (token.control) FeedUnit(deltas);
  }
  if (!unit_text_.empty() && !EndsUndecoded(unit_text_)) FeedUnit(deltas);
}

void CompletionStream::FeedUnit(std::vector<OutputDelta>* deltas) {
  source_entries_.push_back(std::move(unit_entries_));
  unit_entries_.clear();
  const std::string text = std::move(unit_text_);
  unit_text_.clear();
  usage_.completion_tokens += unit_tokens_;  // deepseek-recipe counts the tokens it has decoded
  unit_tokens_ = 0;
  parser_->Feed(text, deltas, /*ends_unit=*/true);
}

std::vector<StreamEvent> CompletionStream::Finish(std::optional<BackendFinish> finish) {
  std::vector<StreamEvent> events;
  if (finished_) return events;
  std::vector<OutputDelta> deltas;
  // Tokens still waiting to form a character never decode: deepseek-recipe drops their unit.
  if (keep_incomplete_character_ && unit_tokens_ > 0) {
    unit_text_ = utf8::ToValidLossy(unit_text_);
    FeedUnit(&deltas);
  }
  unit_text_.clear();
  unit_entries_.clear();
  unit_tokens_ = 0;
  parser_->Finish(&deltas);
  if (token_mode_) {
    const std::vector<std::string> logprobs = AttachLogprobs(deltas);
    serializer_->Deltas(deltas, emit_logprobs_ ? &logprobs : nullptr, &events);
  } else {
    serializer_->Deltas(deltas, nullptr, &events);
  }
  source_entries_.clear();
  CountReasoningTokens();
  finish_reason_ = serializer_->Finish(finish, *parser_, usage_, &events);
  finished_ = true;
  return events;
}

std::vector<std::string> CompletionStream::AttachLogprobs(const std::vector<OutputDelta>& deltas) {
  std::vector<std::string> entries(deltas.size());
  for (size_t i = 0; i < deltas.size(); ++i) {
    const OutputDelta& delta = deltas[i];
    if (delta.kind != OutputDelta::Kind::kReasoning && delta.kind != OutputDelta::Kind::kContent) continue;
    if (delta.kind == OutputDelta::Kind::kReasoning && count_tokens_) reasoning_text_ += delta.text;
    if (delta.source >= first_source_ && delta.source - first_source_ < source_entries_.size()) {
      entries[i] = source_entries_[delta.source - first_source_];
    }
  }
  const size_t oldest = parser_->oldest_held_source();
  while (!source_entries_.empty() && first_source_ < oldest) {
    source_entries_.pop_front();
    ++first_source_;
  }
  return entries;
}

// deepseek-recipe reports, for token chunks, the reasoning text it emitted re-encoded (so `</`, `think`,
// `>` count as one `</think>` token, and "a" + "a" as "aa"). Without a token counter, the generated
// tokens of the reasoning are counted: those ending after the newlines a new turn drops and beginning
// before the reasoning's end (the newlines and `</think>` that close it, or a tool-call block).
void CompletionStream::CountReasoningTokens() {
  if (!token_mode_ || !thinking_) return;
  if (count_tokens_) {
    usage_.reasoning_tokens = count_tokens_(reasoning_text_);
    return;
  }
  const size_t begin = parser_->reasoning_begin();
  const size_t end = parser_->reasoning_end().value_or(SIZE_MAX);
  for (const auto& [token_begin, token_end] : token_spans_) {
    if (token_end > begin && token_begin < end) ++reasoning_tokens_;
  }
  token_spans_.clear();
  usage_.reasoning_tokens = reasoning_tokens_;
}

std::string CompletionStream::Response() const { return serializer_->Response(*parser_, finish_reason_, usage_); }

std::vector<int> CompletionStream::issues() const {
  std::vector<int> out;
  for (OutputIssue issue : parser_->issues()) out.push_back(static_cast<int>(issue));
  return out;
}

StreamRunResult RunCompletion(Protocol protocol, const OutputParserOptions& parser_options,
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

}  // namespace deepinfer::recipe
