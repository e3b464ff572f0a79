#include "recipe/response_messages.h"

#include <utility>

#include "core/py_json.h"
#include "recipe/response_chat.h"
#include "recipe/response_json.h"

namespace deepinfer::recipe {
namespace {

void AppendString(std::string& out, std::string_view text) { PyJsonAppendString(out, text, false); }

std::string BlockIndexPrefix(std::string_view type, size_t index) {
  return "{\"type\":\"" + std::string(type) + "\",\"index\":" + std::to_string(index);
}

// The `input` of a finished tool_use block: the streamed arguments parsed as a JSON object, or `{}`
// when they are not one (a truncated or malformed call), as deepseek-recipe does.
std::string ToolInput(const std::string& arguments) {
  const Result<nlohmann::ordered_json> parsed = ParseSerdeJson(arguments);
  if (!parsed.ok() || !parsed->is_object()) return "{}";
  return SerdeJsonDumps(*parsed);
}

}  // namespace

std::string_view MessagesStopReason(std::optional<BackendFinish> finish, bool stopped_by_sequence,
                                    int tool_call_count) {
  if (stopped_by_sequence) return "stop_sequence";
  if (!finish) return "end_turn";  // the stream just ended: no tool_use, as deepseek-recipe
  if (finish == BackendFinish::kLength) return "max_tokens";
  if (finish == BackendFinish::kContentFilter) return "refusal";
  return tool_call_count > 0 ? "tool_use" : "end_turn";
}

MessagesStream::MessagesStream(ResponseOptions options) : options_(std::move(options)) {
  if (!options_.tool_call_id) options_.tool_call_id = RandomToolCallId;
}

std::string MessagesStream::UsageJson(const UsageCounts& usage) const {
  return "{\"input_tokens\":" + std::to_string(usage.prompt_tokens - usage.prompt_cache_hit_tokens) +
         ",\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":" +
         std::to_string(usage.prompt_cache_hit_tokens) + ",\"output_tokens\":" +
         std::to_string(usage.completion_tokens) + ",\"service_tier\":\"standard\"}";
}

void MessagesStream::Start(const UsageCounts& usage, std::vector<MessagesEvent>* events) {
  std::string json = "{\"type\":\"message_start\",\"message\":{\"id\":";
  AppendString(json, options_.id);
  json += ",\"type\":\"message\",\"role\":\"assistant\",\"model\":";
  AppendString(json, options_.model);
  UsageCounts start = usage;
  start.completion_tokens = 0;
  json += ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":" + UsageJson(start) + "}}";
  events->push_back({"message_start", std::move(json)});
  if (options_.thinking) OpenBlock(Block{BlockType::kThinking, "", "", ""}, events);
}

void MessagesStream::OpenBlock(Block block, std::vector<MessagesEvent>* events) {
  std::string json = BlockIndexPrefix("content_block_start", blocks_.size()) + ",\"content_block\":";
  switch (block.type) {
    case BlockType::kThinking:
      json += "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}";
      break;
    case BlockType::kText:
      json += "{\"type\":\"text\",\"text\":\"\"}}";
      break;
    case BlockType::kToolUse:
      json += "{\"type\":\"tool_use\",\"id\":";
      AppendString(json, block.id);
      json += ",\"name\":";
      AppendString(json, block.name);
      json += ",\"input\":{}}}";
      break;
  }
  events->push_back({"content_block_start", std::move(json)});
  if (!pinged_) {  // one ping, right after the first block starts
    events->push_back({"ping", "{\"type\":\"ping\"}"});
    pinged_ = true;
  }
  blocks_.push_back(std::move(block));
  block_open_ = true;
}

void MessagesStream::CloseBlock(std::vector<MessagesEvent>* events) {
  if (!block_open_) return;
  const size_t index = blocks_.size() - 1;
  if (blocks_.back().type == BlockType::kThinking) {
    std::string json = BlockIndexPrefix("content_block_delta", index) +
                       ",\"delta\":{\"type\":\"signature_delta\",\"signature\":";
    AppendString(json, options_.id);
    json += "}}";
    events->push_back({"content_block_delta", std::move(json)});
  }
  events->push_back({"content_block_stop", BlockIndexPrefix("content_block_stop", index) + "}"});
  block_open_ = false;
}

void MessagesStream::AppendEvents(const std::vector<OutputDelta>& deltas, std::vector<MessagesEvent>* events) {
  for (const OutputDelta& delta : deltas) {
    const BlockType current = block_open_ ? blocks_.back().type : BlockType::kToolUse;
    std::string json;
    switch (delta.kind) {
      case OutputDelta::Kind::kReasoning:
        if (!block_open_ || current != BlockType::kThinking) {
          CloseBlock(events);
          OpenBlock(Block{BlockType::kThinking, "", "", ""}, events);
        }
        blocks_.back().text += delta.text;
        json = BlockIndexPrefix("content_block_delta", blocks_.size() - 1) +
               ",\"delta\":{\"type\":\"thinking_delta\",\"thinking\":";
        AppendString(json, delta.text);
        break;
      case OutputDelta::Kind::kContent:
        if (!block_open_ || current != BlockType::kText) {
          CloseBlock(events);
          OpenBlock(Block{BlockType::kText, "", "", ""}, events);
        }
        blocks_.back().text += delta.text;
        json = BlockIndexPrefix("content_block_delta", blocks_.size() - 1) +
               ",\"delta\":{\"type\":\"text_delta\",\"text\":";
        AppendString(json, delta.text);
        break;
      case OutputDelta::Kind::kToolCallBegin:
        CloseBlock(events);
        OpenBlock(Block{BlockType::kToolUse, "", options_.tool_call_id(delta.tool_index), delta.text}, events);
        continue;
      case OutputDelta::Kind::kToolArguments:
        if (!block_open_ || current != BlockType::kToolUse) continue;  // cannot happen: calls begin first
        blocks_.back().text += delta.text;
        json = BlockIndexPrefix("content_block_delta", blocks_.size() - 1) +
               ",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":";
        AppendString(json, delta.text);
        break;
    }
    json += "}}";
    events->push_back({"content_block_delta", std::move(json)});
  }
}

void MessagesStream::Finish(std::string_view stop_reason, const std::string* stop_sequence, const UsageCounts& usage,
                            std::vector<MessagesEvent>* events) {
  CloseBlock(events);
  std::string json = "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":";
  AppendString(json, stop_reason);
  json += ",\"stop_sequence\":";
  if (stop_sequence) AppendString(json, *stop_sequence);
  else json += "null";
  json += "},\"usage\":" + UsageJson(usage) + "}";
  events->push_back({"message_delta", std::move(json)});
  events->push_back({"message_stop", "{\"type\":\"message_stop\"}"});
}

std::string MessagesStream::Response(std::string_view stop_reason, const std::string* stop_sequence,
                                     const UsageCounts& usage) const {
  std::string out = "{\"id\":";
  AppendString(out, options_.id);
  out += ",\"type\":\"message\",\"role\":\"assistant\",\"model\":";
  AppendString(out, options_.model);
  out += ",\"content\":[";
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& block = blocks_[i];
    if (i > 0) out += ',';
    switch (block.type) {
      case BlockType::kThinking:
        out += "{\"type\":\"thinking\",\"thinking\":";
        AppendString(out, block.text);
        out += ",\"signature\":";
        AppendString(out, options_.id);
        out += '}';
        break;
      case BlockType::kText:
        out += "{\"type\":\"text\",\"text\":";
        AppendString(out, block.text);
        out += '}';
        break;
      case BlockType::kToolUse:
        out += "{\"type\":\"tool_use\",\"id\":";
        AppendString(out, block.id);
        out += ",\"name\":";
        AppendString(out, block.name);
        out += ",\"input\":" + ToolInput(block.text) + '}';
        break;
    }
  }
  out += "],\"stop_reason\":";
  AppendString(out, stop_reason);
  out += ",\"stop_sequence\":";
  if (stop_sequence) AppendString(out, *stop_sequence);
  else out += "null";
  out += ",\"usage\":" + UsageJson(usage) + '}';
  return out;
}

}  // namespace deepinfer::recipe
