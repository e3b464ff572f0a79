// Conversation: the protocol-neutral form of a chat request. The three API parsers (Chat Completions,
// Responses, Anthropic Messages) produce it; prompt rendering (V3.2, V4, V4.1) consumes it. It mirrors
// deepseek-recipe's Conversation so the two can be compared field by field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::recipe {

enum class Role { kSystem, kUser, kAssistant, kTool, kLatestReminder };
std::string_view RoleName(Role role);

// An image referenced by a message. Fetching and preprocessing happen later; the prompt only carries a
// placeholder token per image.
struct ImageSource {
  enum class Kind { kDataUrl, kUrl };
  Kind kind = Kind::kUrl;
  std::string url;              // the data: URL or the external URL
  std::string detail = "high";  // low | high | original | auto
  std::string path;             // request location, e.g. ".messages[0]"
  // Where its placeholder starts in the owning Message::content (bytes). Rendering marks exactly these
  // spans as image tokens, so a user's own text that spells the placeholder stays text (as in the oracle,
  // whose content parts keep images apart).
  size_t offset = 0;
};

// A historical tool call. `arguments` is the caller's JSON text, kept verbatim (rendering parses it).
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

struct ToolDefinition {
  std::string name;
  std::optional<std::string> description;
  nlohmann::ordered_json parameters;  // JSON Schema; null when the request gave none
  std::optional<bool> strict;
  // The schema a call's arguments are constrained to (pipeline/structured_output.h); null: the tool is not
  // strict and its arguments are not constrained beyond being a JSON object. It is not rendered.
  nlohmann::ordered_json call_schema;
  bool defer_loading = false;
  // A Responses custom tool (`apply_patch`): the model calls it like a function, and the response reports
  // the call as a custom_tool_call whose input is the raw text of its `input` argument.
  bool custom = false;
  // A Responses namespace member: its namespace and its own name (`name` is the flattened one the model sees).
  std::string ns;
  std::string local_name;
};

// The task tokens of DeepSeek V4 and V4.1 (formats.md DS_TASK_SP_TOKENS).
enum class MessageTask { kAction, kQuery, kAuthority, kDomain, kTitle, kReadUrl };
std::string_view MessageTaskName(MessageTask task);  // "action", "query", ...
std::optional<MessageTask> ParseMessageTask(std::string_view name);

struct Message {
  Role role = Role::kUser;
  // Text with image placeholders already in place (one per entry of `images`, at its `offset`).
  std::string content;
  std::optional<std::string> reasoning_content;  // assistant only
  std::vector<ToolCall> tool_calls;              // assistant only
  std::optional<std::string> tool_call_id;       // tool only
  std::vector<ImageSource> images;               // user / tool / system
  bool prefix = false;  // assistant only: continue this message instead of starting a new turn
  // V4/V4.1 task (encoding_dsv4.py's message `task`): the turn after this message is answered for that
  // task; an extension field that deepseek-recipe 0.2.0 does not read.
  std::optional<MessageTask> task;
};

enum class ReasoningEffort { kLow, kHigh, kXHigh, kMax };
std::string_view ReasoningEffortName(ReasoningEffort effort);

enum class ToolChoice { kAuto, kNone, kRequired };
std::string_view ToolChoiceName(ToolChoice choice);

enum class ResponseFormat { kText, kJsonObject, kJsonSchema, kRegex };
std::string_view ResponseFormatName(ResponseFormat format);

struct Conversation {
  std::vector<Message> messages;
  bool thinking_mode = true;
  std::vector<ToolDefinition> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::optional<ReasoningEffort> reasoning_effort;  // unset outside thinking mode
  ResponseFormat response_format = ResponseFormat::kText;
  nlohmann::ordered_json response_schema;  // kJsonSchema only
  std::string response_regex;              // kRegex only
};

// Sampling and output settings that travel beside the conversation (not part of the prompt).
struct InferenceOptions {
  std::optional<int64_t> max_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<int64_t> seed;
  int64_t n = 1;
  bool logprobs = false;
  std::optional<int64_t> top_logprobs;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::optional<std::string> user;
  nlohmann::ordered_json metadata;  // null when absent
};

// The default image placeholder spelling (deepseek-recipe SpecialToken::Image).
inline constexpr std::string_view kImageToken = "<\xEF\xBD\x9C" "image\xEF\xBD\x9C>";

}  // namespace deepinfer::recipe
