// Anthropic Messages output: the streamed events (message_start, content_block_start/delta/stop for
// thinking, text and tool_use blocks, ping, message_delta, message_stop) and the non-streaming message,
// byte for byte as deepseek-recipe 0.2 writes them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/output_options.h"
#include "recipe/output_parser.h"

namespace deepinfer::recipe {

struct MessagesEvent {
  std::string name;  // the SSE event name (= the JSON's "type")
  std::string json;
};

// Messages stop_reason for how generation ended.
std::string_view MessagesStopReason(std::optional<BackendFinish> finish, bool stopped_by_sequence,
                                    int tool_call_count);

class MessagesStream {
 public:
  // `options.thinking` opens a thinking block at the start; its signature is the message id.
  explicit MessagesStream(ResponseOptions options);

  void Start(const UsageCounts& usage, std::vector<MessagesEvent>* events);
  void AppendEvents(const std::vector<OutputDelta>& deltas, std::vector<MessagesEvent>* events);
  // `stop_sequence` is the matched stop sequence, when stop_reason is "stop_sequence".
  void Finish(std::string_view stop_reason, const std::string* stop_sequence, const UsageCounts& usage,
              std::vector<MessagesEvent>* events);
  // The non-streaming message holding every block so far.
  std::string Response(std::string_view stop_reason, const std::string* stop_sequence,
                       const UsageCounts& usage) const;

 private:
  enum class BlockType { kThinking, kText, kToolUse };
  struct Block {
    BlockType type;
    std::string text;  // thinking, text, or the tool's arguments JSON
    std::string id;
    std::string name;
  };
  void OpenBlock(Block block, std::vector<MessagesEvent>* events);
  void CloseBlock(std::vector<MessagesEvent>* events);
  std::string UsageJson(const UsageCounts& usage) const;

  ResponseOptions options_;
  std::vector<Block> blocks_;
  bool block_open_ = false;
  bool pinged_ = false;
};

}  // namespace deepinfer::recipe
