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

struct StreamRunResult {
  // Protocol events (JSON objects) produced by each step: ready, one per chunk fed, then the finish.
  // Chunks after a stop sequence are not fed (the response is already complete).
  std::vector<std::vector<std::string>> events_per_step;
  std::string response;  // the non-streaming body for the same completion
  std::string finish_reason;
  std::vector<int> issues;  // OutputIssue values seen
};

// `finish` absent: the stream ended without a backend finish (treated as a normal stop).
StreamRunResult RunChatCompletion(const OutputParserOptions& parser_options, const ResponseOptions& response_options,
                                  const std::vector<CompletionChunk>& chunks, std::optional<BackendFinish> finish,
                                  UsageCounts prompt_usage);

}  // namespace deepinfer::recipe
