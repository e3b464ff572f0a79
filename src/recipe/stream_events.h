// Drives a whole completion through the output parser and a protocol encoder, the way the serving path
// does: the backend becomes ready, text chunks arrive (each counted as its tokens), generation ends.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "recipe/output_options.h"

namespace deepinfer::recipe {

struct CompletionChunk {
  std::string text;
  int64_t token_count = 1;
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

// `finish` absent: the stream ended without a backend finish (deepseek-recipe's `finish()` alone).
StreamRunResult RunCompletion(OutputProtocol protocol, const OutputParserOptions& parser_options,
                              const ResponseOptions& response_options, const std::vector<CompletionChunk>& chunks,
                              std::optional<BackendFinish> finish, UsageCounts prompt_usage);

// The text of a server-sent-events stream: `data: ...` lines (with `event:` lines where events are
// named) and, for Chat Completions, the closing `data: [DONE]`.
std::string FormatSse(OutputProtocol protocol, const std::vector<std::vector<StreamEvent>>& events_per_step);

}  // namespace deepinfer::recipe
