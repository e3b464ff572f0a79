// Drives a whole completion through the output parser and a protocol serializer, the way the serving path
// does: the backend becomes ready, text chunks arrive (each counted as its tokens), generation ends.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "recipe/output_options.h"

namespace deepinfer::recipe {

class OutputParser;
struct OutputDelta;

struct CompletionChunk {
  std::string text;
  int64_t token_count = 1;  // with per-token data, the tokens decoded count instead
  // The chunk's tokens with their log probabilities, when the engine reports them: their bytes
  // concatenated over the completion equal the text. The completion is then read as deepseek-recipe reads
  // token chunks, from these tokens (`text` is not used): a run of ordinary tokens is decoded and parsed
  // as one unit (waiting for the next chunk while it ends inside a character), each control token as a
  // unit of its own, and every reasoning or content delta carries the entries of all the tokens of the
  // unit its text came from (Chat Completions `logprobs`, Responses `output_text` `logprobs`); units
  // that produce no such delta (delimiters, tool calls, dropped text) give theirs to none. A completion fed
  // such chunks also reports its reasoning tokens in the usage.
  std::vector<TokenLogprob> logprobs;
};

// One protocol event: the SSE event name (empty for Chat Completions' unnamed events) and its JSON.
struct StreamEvent {
  std::string name;
  std::string json;
  bool operator==(const StreamEvent&) const = default;
};

struct StreamRunResult {
  // Events produced by each step: ready, one step per chunk fed, then the finish. Chunks after a stop
  // sequence are not fed (the response is already complete).
  std::vector<std::vector<StreamEvent>> events_per_step;
  std::string response;  // the non-streaming body for the same completion
  std::string finish_reason;
  std::vector<int> issues;  // OutputIssue values seen
};

class ProtocolSerializer;

// One completion in flight, fed as the model produces it: Start() once, Feed() per decoded text chunk until
// done(), then Finish(). Each call returns the protocol events it produced, ready to send.
class CompletionStream {
 public:
  CompletionStream(Protocol protocol, const OutputParserOptions& parser_options,
                   const ResponseOptions& response_options, UsageCounts prompt_usage);
  ~CompletionStream();
  CompletionStream(const CompletionStream&) = delete;
  CompletionStream& operator=(const CompletionStream&) = delete;

  std::vector<StreamEvent> Start();
  std::vector<StreamEvent> Feed(const CompletionChunk& chunk);
  // `finish` absent: the stream ended without a backend finish (deepseek-recipe's `finish()` alone).
  std::vector<StreamEvent> Finish(std::optional<BackendFinish> finish);
  // True once a stop sequence completed the response: the caller stops generating and feeds no more.
  bool done() const;
  const std::string& finish_reason() const { return finish_reason_; }
  // The non-streaming body for everything fed so far (call after Finish()).
  std::string Response() const;
  std::vector<int> issues() const;

 private:
  void FeedTokens(const std::vector<TokenLogprob>& tokens, std::vector<OutputDelta>* deltas);
  void FeedUnit(std::vector<OutputDelta>* deltas);
  // For each delta, the entries of the unit its text came from; forgets units the parser no longer holds.
  std::vector<std::string> AttachLogprobs(const std::vector<OutputDelta>& deltas);
  void CountReasoningTokens();

  std::unique_ptr<OutputParser> parser_;
  bool emit_logprobs_ = true;  // ResponseOptions::emit_logprobs
  bool keep_incomplete_character_ = false;  // ResponseOptions::keep_incomplete_character
  std::unique_ptr<ProtocolSerializer> serializer_;
  UsageCounts usage_;
  bool thinking_ = false;
  bool starts_in_reasoning_ = false;
  bool token_mode_ = false;  // some chunk carried per-token data
  size_t token_bytes_ = 0;   // bytes of all tokens reported so far
  // The unit being gathered (ordinary tokens not yet parsed): its bytes and its tokens' entries.
  std::string unit_text_;
  std::string unit_entries_;
  int64_t unit_tokens_ = 0;
  // Entries of the units parsed (parser chunks), from the oldest the parser may still emit text of.
  std::deque<std::string> source_entries_;
  size_t first_source_ = 0;
  std::vector<std::pair<size_t, size_t>> token_spans_;  // each token's bytes, until the reasoning's extent is known
  int64_t reasoning_tokens_ = 0;
  std::function<int64_t(std::string_view)> count_tokens_;
  std::string reasoning_text_;  // the reasoning emitted, for count_tokens_
  std::string finish_reason_;
  bool finished_ = false;
};

// The whole run at once, through a CompletionStream.
StreamRunResult RunCompletion(Protocol protocol, const OutputParserOptions& parser_options,
                              const ResponseOptions& response_options, const std::vector<CompletionChunk>& chunks,
                              std::optional<BackendFinish> finish, UsageCounts prompt_usage);

}  // namespace deepinfer::recipe
