#include "recipe/stream_events.h"

#include "recipe/output_parser.h"
#include "recipe/response_chat.h"

namespace deepinfer::recipe {

StreamRunResult RunChatCompletion(const OutputParserOptions& parser_options, const ResponseOptions& response_options,
                                  const std::vector<CompletionChunk>& chunks, std::optional<BackendFinish> finish,
                                  UsageCounts prompt_usage) {
  StreamRunResult result;
  OutputParser parser(parser_options);
  ChatCompletionStream stream(response_options);
  UsageCounts usage = prompt_usage;
  usage.completion_tokens = 0;
  result.events_per_step.push_back({stream.RoleChunk()});
  std::vector<OutputDelta> deltas;
  for (const CompletionChunk& chunk : chunks) {
    if (parser.stopped_by_sequence()) break;
    deltas.clear();
    parser.Feed(chunk.text, &deltas);
    usage.completion_tokens += chunk.token_count;
    std::vector<std::string> events;
    stream.AppendChunks(deltas, &events);
    if (parser.stopped_by_sequence()) {
      result.finish_reason = "stop";
      events.push_back(stream.FinalChunk(result.finish_reason, usage));
    }
    result.events_per_step.push_back(std::move(events));
  }
  if (!parser.stopped_by_sequence()) {
    deltas.clear();
    parser.Finish(&deltas);
    std::vector<std::string> events;
    stream.AppendChunks(deltas, &events);
    // Without a backend finish the stream just ended: deepseek-recipe reports "stop" even after tool calls.
    result.finish_reason =
        finish ? std::string(ChatFinishReason(*finish, false, parser.tool_call_count())) : std::string("stop");
    events.push_back(stream.FinalChunk(result.finish_reason, usage));
    result.events_per_step.push_back(std::move(events));
  }
  result.response = stream.Response(result.finish_reason, usage);
  for (OutputIssue issue : parser.issues()) result.issues.push_back(static_cast<int>(issue));
  return result;
}

}  // namespace deepinfer::recipe
