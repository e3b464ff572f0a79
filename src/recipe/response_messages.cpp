#include "recipe/response_messages.h"

#include <optional>
#include <string_view>
#include <utility>

#include "core/json.h"
#include "core/py_json.h"
#include "recipe/response_chat.h"
#include "recipe/response_json.h"

namespace deepinfer::recipe {
namespace {

void AppendJsonString(std::string& out, std::string_view text) { PyJsonAppendString(out, text, false); }

std::string BlockIndexPrefix(std::string_view type, size_t index) {
  return "{\"type\":\"" + std::string(type) + "\",\"index\":" + std::to_string(index);
}

// The end of the JSON value that starts at text[begin] (a member's value inside an object): the first ','
// or '}' outside strings and brackets.
size_t ValueEnd(std::string_view text, size_t begin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (depth == 0) return i;
      --depth;
    } else if (c == ',' && depth == 0) {
      return i;
    }
  }
  return std::string_view::npos;
}

// Arguments that nest deeper than the parser's limit, read member by member: a member whose value still
// nests too deep keeps its raw text as a string, so nothing the model wrote is lost. Empty when the text
// is no object of members.
std::optional<nlohmann::ordered_json> MembersKeepingDeepValues(std::string_view text) {
  auto skip_space = [&](size_t i) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) ++i;
    return i;
  };
  size_t i = skip_space(0);
  if (i >= text.size() || text[i] != '{') return std::nullopt;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  i = skip_space(i + 1);
  if (i < text.size() && text[i] == '}') return skip_space(i + 1) == text.size() ? std::optional(out) : std::nullopt;
  while (i < text.size()) {
    if (text[i] != '"') return std::nullopt;
    size_t key_end = i + 1;
    while (key_end < text.size() && text[key_end] != '"') key_end += text[key_end] == '\\' ? 2 : 1;
    if (key_end >= text.size()) return std::nullopt;
    const Result<nlohmann::ordered_json> key = ParseSerdeJson(text.substr(i, key_end + 1 - i));
    const size_t colon = skip_space(key_end + 1);
    if (!key.ok() || !key->is_string() || colon >= text.size() || text[colon] != ':') return std::nullopt;
    const size_t value_begin = skip_space(colon + 1);
    const size_t value_end = ValueEnd(text, value_begin);
    if (value_end == std::string_view::npos) return std::nullopt;
    std::string_view raw = text.substr(value_begin, value_end - value_begin);
    while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\t' || raw.back() == '\r')) {
      raw.remove_suffix(1);
    }
    const Result<nlohmann::ordered_json> value = ParseSerdeJson(raw);
    if (value.ok()) {
      out[key->get<std::string>()] = *value;
    } else if (JsonTextDepth(raw, kSerdeMaxDepth) > kSerdeMaxDepth) {
      out[key->get<std::string>()] = std::string(raw);
    } else {
      return std::nullopt;  // malformed, not merely deep
    }
    i = skip_space(value_end + 1);
    if (text[value_end] == '}') return i == text.size() ? std::optional(out) : std::nullopt;
  }
  return std::nullopt;
}

// The `input` of a finished tool_use block: the streamed arguments parsed as a JSON object, or `{}`
// when they are not one (a truncated or malformed call), as deepseek-recipe does. Arguments that are an
// object but nest past the parser's depth limit keep the too-deep values as raw text instead.
std::string ToolInput(const std::string& arguments) {
  const Result<nlohmann::ordered_json> parsed = ParseSerdeJson(arguments);
  if (parsed.ok()) return parsed->is_object() ? SerdeJsonDumps(*parsed) : "{}";
  if (JsonTextDepth(arguments, kSerdeMaxDepth) <= kSerdeMaxDepth) return "{}";
  const std::optional<nlohmann::ordered_json> members = MembersKeepingDeepValues(arguments);
  return members ? SerdeJsonDumps(*members) : "{}";
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
  AppendJsonString(json, options_.id);
  json += ",\"type\":\"message\",\"role\":\"assistant\",\"model\":";
  AppendJsonString(json, options_.model);
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
      AppendJsonString(json, block.id);
      json += ",\"name\":";
      AppendJsonString(json, block.name);
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
    AppendJsonString(json, options_.id);
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
        AppendJsonString(json, delta.text);
        break;
      case OutputDelta::Kind::kContent:
        if (!block_open_ || current != BlockType::kText) {
          CloseBlock(events);
          OpenBlock(Block{BlockType::kText, "", "", ""}, events);
        }
        blocks_.back().text += delta.text;
        json = BlockIndexPrefix("content_block_delta", blocks_.size() - 1) +
               ",\"delta\":{\"type\":\"text_delta\",\"text\":";
        AppendJsonString(json, delta.text);
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
        AppendJsonString(json, delta.text);
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
  AppendJsonString(json, stop_reason);
  json += ",\"stop_sequence\":";
  if (stop_sequence) AppendJsonString(json, *stop_sequence);
  else json += "null";
  json += "},\"usage\":" + UsageJson(usage) + "}";
  events->push_back({"message_delta", std::move(json)});
  events->push_back({"message_stop", "{\"type\":\"message_stop\"}"});
}

std::string MessagesStream::Response(std::string_view stop_reason, const std::string* stop_sequence,
                                     const UsageCounts& usage) const {
  std::string out = "{\"id\":";
  AppendJsonString(out, options_.id);
  out += ",\"type\":\"message\",\"role\":\"assistant\",\"model\":";
  AppendJsonString(out, options_.model);
  out += ",\"content\":[";
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& block = blocks_[i];
    if (i > 0) out += ',';
    switch (block.type) {
      case BlockType::kThinking:
        out += "{\"type\":\"thinking\",\"thinking\":";
        AppendJsonString(out, block.text);
        out += ",\"signature\":";
        AppendJsonString(out, options_.id);
        out += '}';
        break;
      case BlockType::kText:
        out += "{\"type\":\"text\",\"text\":";
        AppendJsonString(out, block.text);
        out += '}';
        break;
      case BlockType::kToolUse:
        out += "{\"type\":\"tool_use\",\"id\":";
        AppendJsonString(out, block.id);
        out += ",\"name\":";
        AppendJsonString(out, block.name);
        out += ",\"input\":" + ToolInput(block.text) + '}';
        break;
    }
  }
  out += "],\"stop_reason\":";
  AppendJsonString(out, stop_reason);
  out += ",\"stop_sequence\":";
  if (stop_sequence) AppendJsonString(out, *stop_sequence);
  else out += "null";
  out += ",\"usage\":" + UsageJson(usage) + '}';
  return out;
}

}  // namespace deepinfer::recipe
