// OpenAI Chat Completions output: the streamed `chat.completion.chunk` objects and the non-streaming
// `chat.completion` body, byte for byte as deepseek-recipe 0.2 writes them (field order, nulls,
// `reasoning_content`, DeepSeek's `prompt_cache_hit_tokens`/`prompt_cache_miss_tokens` usage fields).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "recipe/output_options.h"
#include "recipe/output_parser.h"

namespace deepinfer::recipe {

// Chat Completions finish_reason for how generation ended.
std::string_view ChatFinishReason(BackendFinish finish, bool stopped_by_sequence, int tool_call_count);

// A random tool-call id in the DeepSeek shape: "call_" + two-digit index + "_" + 24 characters.
std::string RandomToolCallId(int index);

class ChatCompletionStream {
 public:
  explicit ChatCompletionStream(ResponseOptions options);

  // The first chunk: the assistant role (sent when the backend is ready).
  std::string RoleChunk() const;
  // One chunk per delta, in order; a tool call's first chunk carries its id and name. `logprobs`, when
  // given, holds for each delta the comma-joined TokenLogprobJson entries of its tokens (empty: none).
  void AppendChunks(const std::vector<OutputDelta>& deltas, std::vector<std::string>* chunks,
                    const std::vector<std::string>* logprobs = nullptr);
  // The last chunk: empty delta, finish_reason and usage.
  std::string FinalChunk(std::string_view finish_reason, const UsageCounts& usage) const;
  // The non-streaming body holding everything the deltas so far carried.
  std::string Response(std::string_view finish_reason, const UsageCounts& usage) const;

 private:
  struct ToolCall {
    std::string id;
    std::string name;
    std::string arguments;
  };
  const std::string& Envelope() const { return envelope_; }
  const std::string& UsageTail() const { return usage_tail_; }

  ResponseOptions options_;
  std::string envelope_;    // every chunk's opening up to the delta, built once
  std::string usage_tail_;  // closes a non-final chunk
  std::string reasoning_;
  std::string content_;
  std::string reasoning_logprobs_;  // comma-joined entries
  std::string content_logprobs_;
  std::vector<ToolCall> tool_calls_;
};

std::string ChatUsageJson(const UsageCounts& usage);

}  // namespace deepinfer::recipe
