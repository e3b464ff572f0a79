// libFuzzer target for the recipe output parser: arbitrary bytes as a model completion, arbitrary
// options and chunking. Checks that nothing crashes, every Chat Completions chunk, Messages and Responses
// event and final body is valid JSON (valid UTF-8 included), and the deltas do not depend on the chunking.
//
// Input layout: byte 0 = option bits, byte 1 = chunking seed, byte 2 = stop-sequence length (0-7), then
// the stop sequence, then the completion text.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "recipe/output_parser.h"
#include "recipe/response_chat.h"
#include "recipe/response_messages.h"
#include "recipe/response_responses.h"

namespace {

using deepinfer::recipe::OutputDelta;

// Adjacent deltas of one kind merged, so that two chunkings can be compared.
std::vector<std::pair<int, std::string>> Merged(const std::vector<OutputDelta>& deltas) {
  std::vector<std::pair<int, std::string>> merged;
  for (const OutputDelta& d : deltas) {
    const int key = static_cast<int>(d.kind) * 1000 + d.tool_index;
    if (d.kind != OutputDelta::Kind::kToolCallBegin && !merged.empty() && merged.back().first == key) {
      merged.back().second += d.text;
    } else {
      merged.emplace_back(key, d.text);
    }
  }
  return merged;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::recipe;
  if (size < 3) return 0;
  const uint8_t bits = data[0];
  const uint8_t seed = data[1];
  const size_t stop_length = std::min<size_t>(data[2] % 8, size - 3);
  const std::string stop(reinterpret_cast<const char*>(data + 3), stop_length);
  const std::string_view text(reinterpret_cast<const char*>(data + 3 + stop_length), size - 3 - stop_length);

  OutputParserOptions options;
  options.parse_tool_calls = bits & 1;
  options.parse_json_output = bits & 2;
  options.starts_in_tool_calls = (bits & 0x1c) == 0x1c;
  switch ((bits >> 2) & 3) {
    case 0: break;
    case 1: options.thinking_stage = ThinkingStage::kReasoningStart; break;
    case 2: options.thinking_stage = ThinkingStage::kReasoningContinuation; break;
    case 3: options.thinking_stage = ThinkingStage::kContentContinuation; break;
  }
  options.model_version = (bits & 0x20) ? ModelVersion::kV32 : ModelVersion::kV4;
  if (bits & 0x40) options.stop_sequences.push_back(stop);

  auto run = [&](size_t max_chunk, std::vector<OutputDelta>* deltas) {
    OutputParser parser(options);
    uint32_t state = seed + 1;
    for (size_t pos = 0; pos < text.size() && !parser.stopped_by_sequence();) {
      state = state * 1103515245u + 12345u;
      const size_t n = max_chunk == 0 ? text.size() : 1 + (state >> 16) % max_chunk;
      parser.Feed(text.substr(pos, n), deltas);
      pos += n;
    }
    if (!parser.stopped_by_sequence()) parser.Finish(deltas);
    return parser.tool_call_count();
  };

  std::vector<OutputDelta> whole;
  const int tool_calls = run(0, &whole);
  std::vector<OutputDelta> chunked;
  run(1 + seed % 9, &chunked);
  // JSON mode writes one filler space per emitted piece, a chunking-dependent count (as the reference).
  if (!options.parse_json_output && Merged(whole) != Merged(chunked)) {
    std::abort();
  }

  ResponseOptions response_options;
  response_options.thinking = options.thinking_stage.has_value();
  response_options.include_usage = true;
  ChatCompletionStream stream(response_options);
  std::vector<std::string> chunks{stream.RoleChunk()};
  stream.AppendChunks(chunked, &chunks);
  const std::string finish(ChatFinishReason(BackendFinish::kStop, false, tool_calls));
  chunks.push_back(stream.FinalChunk(finish, UsageCounts{5, 2, 3}));
  chunks.push_back(stream.Response(finish, UsageCounts{5, 2, 3}));

  MessagesStream messages(response_options);
  std::vector<MessagesEvent> message_events;
  messages.Start(UsageCounts{5, 2, 0}, &message_events);
  messages.AppendEvents(chunked, &message_events);
  const std::string stop_reason(MessagesStopReason(BackendFinish::kLength, false, tool_calls));
  messages.Finish(stop_reason, nullptr, UsageCounts{5, 2, 3}, &message_events);
  for (const MessagesEvent& e : message_events) chunks.push_back(e.json);
  chunks.push_back(messages.Response(stop_reason, nullptr, UsageCounts{5, 2, 3}));

  ResponsesStream responses(response_options);
  std::vector<ResponsesEvent> response_events;
  responses.Start(&response_events);
  responses.AppendEvents(chunked, &response_events);
  responses.Finish(BackendFinish::kStop, UsageCounts{5, 2, 3}, &response_events);
  for (const ResponsesEvent& e : response_events) chunks.push_back(e.json);
  chunks.push_back(responses.Response());

  for (const std::string& chunk : chunks) {
    if (!nlohmann::json::accept(chunk)) std::abort();
  }
  return 0;
}
