// Anthropic Messages request → Conversation. Content blocks map the way deepseek-recipe maps them: every
// user text or image block is its own user message (the encoder merges adjacent ones), tool_result blocks
// become tool messages, an assistant's text and thinking blocks are joined by "\n\n".
#include <algorithm>

#include "core/py_json.h"
#include "recipe/request_internal.h"

namespace deepinfer::recipe {
namespace {

using internal::Check;
using internal::Field;
using internal::Index;
using internal::Invalid;
using internal::Join;
using internal::Json;
using internal::WrongType;

std::string FieldRequired(const std::string& path) { return path + ": Field required"; }

std::string JoinTexts(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += "\n\n";
    out += parts[i];
  }
  return out;
}

// An image block's source as an image, and the text it becomes in the message.
Check ReadImage(const Json& block, const std::string& path, const std::string& message_path,
                const RequestOptions& options, std::vector<ImageSource>* images, std::string* text) {
  const Json* source = Field(block, "source");
  if (!source || !source->is_object()) return Invalid(Join(path, "source"), FieldRequired(Join(path, "source")));
  std::optional<std::string> type, data, media_type, url;
  DI_REQ_CHECK(internal::ReadString(*source, "type", Join(path, "source"), &type));
  std::string full_url;
  if (type && *type == "base64") {
    DI_REQ_CHECK(internal::ReadString(*source, "data", Join(path, "source"), &data));
    DI_REQ_CHECK(internal::ReadString(*source, "media_type", Join(path, "source"), &media_type));
    if (!data) return Invalid(Join(path, "source.data"), FieldRequired(Join(path, "source.data")));
    full_url = "data:" + media_type.value_or("image/png") + ";base64," + *data;
  } else if (type && *type == "url") {
    DI_REQ_CHECK(internal::ReadString(*source, "url", Join(path, "source"), &url));
    if (!url) return Invalid(Join(path, "source.url"), FieldRequired(Join(path, "source.url")));
    full_url = *url;
  } else {
    return Invalid(Join(path, "source.type"), "Input tag '" + type.value_or("") +
                                                  "' found using 'type' does not match any of the expected tags: "
                                                  "'base64', 'url'");
  }
  auto image = internal::ImageFromUrl(full_url, "high", message_path);
  if (!image) return Invalid(Join(path, "source.url"), "Invalid image URL: expected a data: or http(s) URL.");
  if (options.model_version == ModelVersion::kV41) images->push_back(std::move(*image));
  *text = std::string(internal::ImagePartText(options));
  return std::nullopt;
}

Check ReadToolResultContent(const Json& block, const std::string& path, const std::string& message_path,
                            const RequestOptions& options, Message* out) {
  const Json* content = Field(block, "content");
  if (!content) return std::nullopt;
  if (content->is_string()) {
    out->content = content->get<std::string>();
    return std::nullopt;
  }
  if (!content->is_array()) return WrongType(Join(path, "content"), "a string or an array", *content);
  std::vector<std::string> parts;
  size_t offset = 0;  // where the next part starts in the joined text
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string part_path = Index(Join(path, "content"), i);
    if (i) offset += 2;  // JoinTexts' "\n\n"
    if (!part.is_object()) return WrongType(part_path, "an object", part);
    std::optional<std::string> type;
    DI_REQ_CHECK(internal::ReadString(part, "type", part_path, &type));
    if (type && *type == "text") {
      std::optional<std::string> text;
      DI_REQ_CHECK(internal::ReadString(part, "text", part_path, &text));
      if (!text) return Invalid(Join(part_path, "text"), FieldRequired(Join(part_path, "text")));
      parts.push_back(*text);
    } else if (type && *type == "image") {
      std::string text;
      const size_t before = out->images.size();
      DI_REQ_CHECK(ReadImage(part, part_path, message_path, options, &out->images, &text));
      if (out->images.size() > before) out->images.back().offset = offset;
      parts.push_back(text);
    } else {
      return Invalid(Join(part_path, "type"), "Input tag '" + type.value_or("") +
                                                  "' found using 'type' does not match any of the expected tags: "
                                                  "'text', 'image'");
    }
    offset += parts.back().size();
  }
  out->content = JoinTexts(parts);
  return std::nullopt;
}

// Appends the messages one request message turns into.
Check ParseMessage(const Json& m, size_t index, const RequestOptions& options, const Message* previous_assistant,
                   std::vector<Message>* out) {
  const std::string path = Index("messages", index);
  if (!m.is_object()) return WrongType(path, "an object", m);
  std::optional<std::string> role;
  DI_REQ_CHECK(internal::ReadString(m, "role", path, &role));
  if (!role) return Invalid(Join(path, "role"), FieldRequired(Join(path, "role")));
  if (*role != "user" && *role != "assistant") {
    return Invalid(Join(path, "role"), "Input should be 'user' or 'assistant'");
  }
  const bool is_user = *role == "user";
  const Json* content = Field(m, "content");
  if (!content) return Invalid(Join(path, "content"), FieldRequired(Join(path, "content")));
  const std::string empty_message = "messages." + std::to_string(index) + ": all messages must have non-empty content";
  if (content->is_string()) {
    Message message;
    message.role = is_user ? Role::kUser : Role::kAssistant;
    message.content = content->get<std::string>();
    if (is_user && previous_assistant && !previous_assistant->tool_calls.empty()) {
      return Invalid(path, "`tool_use` ids were found without `tool_result` blocks immediately after. Each "
                           "`tool_use` block must have a corresponding `tool_result` block in the next message.");
    }
    out->push_back(std::move(message));
    return std::nullopt;
  }
  if (!content->is_array()) return WrongType(Join(path, "content"), "a string or an array of content blocks", *content);
  if (content->empty()) return Invalid(path, empty_message);

  const std::string message_path = "messages." + std::to_string(index) + ".content";
  if (is_user) {
    std::vector<std::string> answered;
    bool seen_other = false;
    for (size_t i = 0; i < content->size(); ++i) {
      const Json& block = (*content)[i];
      const std::string block_path = Index(Join(path, "content"), i);
      if (!block.is_object()) return WrongType(block_path, "an object", block);
      std::optional<std::string> type;
      DI_REQ_CHECK(internal::ReadString(block, "type", block_path, &type));
      const std::string t = type.value_or("");
      Message message;
      if (t == "tool_result") {
        std::optional<std::string> id;
        DI_REQ_CHECK(internal::ReadString(block, "tool_use_id", block_path, &id));
        if (!id) return Invalid(Join(block_path, "tool_use_id"), FieldRequired(Join(block_path, "tool_use_id")));
        bool known = false;
        if (previous_assistant) {
          for (const ToolCall& call : previous_assistant->tool_calls) known = known || call.id == *id;
        }
        if (!known || seen_other) {
          return Invalid(block_path, "unexpected `tool_use_id` found in `tool_result` blocks: " + *id +
                                         ". Each `tool_result` block must have a corresponding `tool_use` block in "
                                         "the previous message.");
        }
        message.role = Role::kTool;
        message.tool_call_id = *id;
        DI_REQ_CHECK(ReadToolResultContent(block, block_path, message_path + "." + std::to_string(i) + ".tool_result",
                                           options, &message));
        answered.push_back(*id);
      } else if (t == "text") {
        std::optional<std::string> text;
        DI_REQ_CHECK(internal::ReadString(block, "text", block_path, &text));
        if (!text) return Invalid(Join(block_path, "text"), FieldRequired(Join(block_path, "text")));
        message.role = Role::kUser;
        message.content = *text;
        seen_other = true;
      } else if (t == "image") {
        message.role = Role::kUser;
        DI_REQ_CHECK(ReadImage(block, block_path, message_path + "[" + std::to_string(i) + "]", options,
                               &message.images, &message.content));
        seen_other = true;
      } else {
        return Invalid(Join(block_path, "type"), "Input tag '" + t +
                                                     "' found using 'type' does not match any of the expected tags: "
                                                     "'text', 'image', 'tool_result'");
      }
      out->push_back(std::move(message));
    }
    if (previous_assistant) {
      std::string missing;
      for (const ToolCall& call : previous_assistant->tool_calls) {
        if (std::find(answered.begin(), answered.end(), call.id) == answered.end()) {
          missing += (missing.empty() ? "" : ", ") + call.id;
        }
      }
      if (!missing.empty()) {
        return Invalid(path, "`tool_use` ids were found without `tool_result` blocks immediately after: " + missing +
                                 ". Each `tool_use` block must have a corresponding `tool_result` block in the next "
                                 "message.");
      }
    }
    return std::nullopt;
  }

  Message message;
  message.role = Role::kAssistant;
  std::vector<std::string> texts, thoughts;
  bool has_thinking = false;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& block = (*content)[i];
    const std::string block_path = Index(Join(path, "content"), i);
    if (!block.is_object()) return WrongType(block_path, "an object", block);
    std::optional<std::string> type;
    DI_REQ_CHECK(internal::ReadString(block, "type", block_path, &type));
    const std::string t = type.value_or("");
    if (!message.tool_calls.empty() && t != "tool_use") {
      return Invalid(block_path, "`tool_use` blocks must come last in an assistant message");
    }
    if (t == "text") {
      std::optional<std::string> text;
      DI_REQ_CHECK(internal::ReadString(block, "text", block_path, &text));
      if (!text) return Invalid(Join(block_path, "text"), FieldRequired(Join(block_path, "text")));
      texts.push_back(*text);
    } else if (t == "thinking") {
      std::optional<std::string> thinking;
      DI_REQ_CHECK(internal::ReadString(block, "thinking", block_path, &thinking));
      if (!thinking) return Invalid(Join(block_path, "thinking"), FieldRequired(Join(block_path, "thinking")));
      thoughts.push_back(*thinking);
      has_thinking = true;
    } else if (t == "tool_use") {
      std::optional<std::string> id, name;
      DI_REQ_CHECK(internal::ReadString(block, "id", block_path, &id));
      DI_REQ_CHECK(internal::ReadString(block, "name", block_path, &name));
      if (!id) return Invalid(Join(block_path, "id"), FieldRequired(Join(block_path, "id")));
      if (!name) return Invalid(Join(block_path, "name"), FieldRequired(Join(block_path, "name")));
      const Json* input = Field(block, "input");
      if (input && !input->is_object()) return WrongType(Join(block_path, "input"), "an object", *input);
      message.tool_calls.push_back({*id, *name, PyJsonDumps(input ? *input : Json::object())});
    } else {
      return Invalid(Join(block_path, "type"), "Input tag '" + t +
                                                   "' found using 'type' does not match any of the expected tags: "
                                                   "'text', 'thinking', 'tool_use'");
    }
  }
  message.content = JoinTexts(texts);
  if (has_thinking) message.reasoning_content = JoinTexts(thoughts);
  out->push_back(std::move(message));
  return std::nullopt;
}

Check ParseMessagesTools(const Json& body, Conversation* c) {
  const Json* tools = Field(body, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return WrongType("tools", "an array", *tools);
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& tool = (*tools)[i];
    const std::string path = Index("tools", i);
    if (!tool.is_object()) return WrongType(path, "an object", tool);
    if (Field(tool, "type")) return Invalid(Join(path, "type"), path + ": server tools are not supported");
    ToolDefinition def;
    std::optional<std::string> name;
    DI_REQ_CHECK(internal::ReadString(tool, "name", path, &name));
    if (!name) return Invalid(Join(path, "name"), FieldRequired(Join(path, "name")));
    DI_REQ_CHECK(internal::CheckToolName(*name, Join(path, "name")));
    def.name = *name;
    DI_REQ_CHECK(internal::ReadString(tool, "description", path, &def.description));
    const Json* schema = Field(tool, "input_schema");
    if (!schema) return Invalid(Join(path, "input_schema"), FieldRequired(Join(path, "input_schema")));
    if (!schema->is_object()) return WrongType(Join(path, "input_schema"), "an object", *schema);
    def.parameters = *schema;
    // `strict: true` (Messages API): the tool's calls are constrained to its input_schema as written
    // (pipeline/structured_output.cpp); the prompt is unchanged. Anthropic lets strict and non-strict tools
    // mix (deepseek-recipe renders both); one grammar then holds every tool's calls to its schema.
    DI_REQ_CHECK(internal::ReadBool(tool, "strict", path, &def.strict));
    c->tools.push_back(std::move(def));
  }
  return std::nullopt;
}

Check ParseMessagesBody(const Json& body, const RequestOptions& options, ParsedRequest* r) {
  r->protocol = Protocol::kMessages;
  Conversation& c = r->conversation;
  InferenceOptions& inf = r->inference;
  std::optional<std::string> model;
  DI_REQ_CHECK(internal::ReadString(body, "model", "", &model));
  if (!model) return Invalid("model", FieldRequired("model"));
  r->model = *model;
  DI_REQ_CHECK(internal::ReadInt(body, "max_tokens", "", &inf.max_tokens));
  if (!inf.max_tokens) return Invalid("max_tokens", FieldRequired("max_tokens"));
  // Messages lowers an over-large max_tokens to the bound instead of rejecting it (deepseek-recipe).
  if (*inf.max_tokens > options.max_tokens_upper_bound) inf.max_tokens = options.max_tokens_upper_bound;
  DI_REQ_CHECK(internal::CheckMaxTokens(inf.max_tokens, options.max_tokens_upper_bound, "max_tokens"));

  if (const Json* system = Field(body, "system")) {
    Message message;
    message.role = Role::kSystem;
    if (system->is_string()) {
      message.content = system->get<std::string>();
    } else if (system->is_array()) {
      std::vector<std::string> parts;
      for (size_t i = 0; i < system->size(); ++i) {
        const Json& block = (*system)[i];
        std::optional<std::string> text;
        if (!block.is_object()) return WrongType(Index("system", i), "an object", block);
        DI_REQ_CHECK(internal::ReadString(block, "text", Index("system", i), &text));
        if (!text) return Invalid(Index("system", i) + ".text", FieldRequired(Index("system", i) + ".text"));
        parts.push_back(*text);
      }
      message.content = JoinTexts(parts);
    } else {
      return WrongType("system", "a string or an array of text blocks", *system);
    }
    c.messages.push_back(std::move(message));
  }

  const Json* messages = Field(body, "messages");
  if (!messages) return Invalid("messages", FieldRequired("messages"));
  if (!messages->is_array()) return WrongType("messages", "an array", *messages);
  if (messages->empty()) return Invalid("messages", "messages: at least one message is required");
  const Message* previous_assistant = nullptr;
  for (size_t i = 0; i < messages->size(); ++i) {
    std::vector<Message> converted;
    DI_REQ_CHECK(ParseMessage((*messages)[i], i, options, previous_assistant, &converted));
    const bool assistant = !converted.empty() && converted.front().role == Role::kAssistant;
    if (previous_assistant && !previous_assistant->tool_calls.empty() && assistant) {
      return Invalid(Index("messages", i - 1),
                     "`tool_use` ids were found without `tool_result` blocks immediately after. Each `tool_use` "
                     "block must have a corresponding `tool_result` block in the next message.");
    }
    for (Message& m : converted) c.messages.push_back(std::move(m));
    previous_assistant = assistant ? &c.messages.back() : nullptr;
  }
  if (previous_assistant && !previous_assistant->tool_calls.empty()) {
    return Invalid(Index("messages", messages->size() - 1),
                   "`tool_use` ids were found without `tool_result` blocks immediately after. Each `tool_use` block "
                   "must have a corresponding `tool_result` block in the next message.");
  }

  DI_REQ_CHECK(ParseMessagesTools(body, &c));
  std::optional<std::string> named_tool;
  if (const Json* choice = Field(body, "tool_choice")) {
    if (!choice->is_object()) return WrongType("tool_choice", "an object", *choice);
    std::optional<std::string> type, name;
    DI_REQ_CHECK(internal::ReadString(*choice, "type", "tool_choice", &type));
    if (type && (*type == "auto" || *type == "any")) {
      c.tool_choice = ToolChoice::kAuto;
    } else if (type && *type == "none") {
      c.tool_choice = ToolChoice::kNone;
    } else if (type && *type == "tool") {
      DI_REQ_CHECK(internal::ReadString(*choice, "name", "tool_choice", &name));
      if (!name) return Invalid("tool_choice.name", FieldRequired("tool_choice.name"));
      named_tool = name;
    } else {
      return Invalid("tool_choice.type", "Input tag '" + type.value_or("") +
                                             "' found using 'type' does not match any of the expected tags: 'auto', "
                                             "'any', 'tool', 'none'");
    }
  }

  std::optional<bool> thinking;
  if (const Json* t = Field(body, "thinking")) {
    if (!t->is_object()) return WrongType("thinking", "an object", *t);
    std::optional<std::string> type;
    DI_REQ_CHECK(internal::ReadString(*t, "type", "thinking", &type));
    if (type && (*type == "enabled" || *type == "adaptive")) thinking = true;
    else if (type && *type == "disabled") thinking = false;
    else {
      return Invalid("thinking.type", "Input tag '" + type.value_or("") +
                                          "' found using 'type' does not match any of the expected tags: 'enabled', "
                                          "'disabled', 'adaptive'");
    }
  }
  std::optional<ReasoningEffort> effort;
  if (const Json* config = Field(body, "output_config")) {
    if (!config->is_object()) return WrongType("output_config", "an object", *config);
    bool disables = false;
    DI_REQ_CHECK(internal::ReadEffort(*config, "effort", "output_config", &effort, &disables));
    if (disables && !thinking) thinking = false;
  }
  c.thinking_mode = thinking.value_or(options.default_thinking_mode);
  c.reasoning_effort = c.thinking_mode ? effort : std::nullopt;
  if (c.thinking_mode && named_tool) return Invalid("tool_choice", "Thinking mode does not support this tool_choice");
  DI_REQ_CHECK(internal::ChooseTools(r, named_tool, "tool_choice"));  // schemas fail before sampling settings

  DI_REQ_CHECK(internal::ReadNumber(body, "temperature", "", &inf.temperature));
  DI_REQ_CHECK(internal::CheckTemperature(inf.temperature, "temperature"));
  DI_REQ_CHECK(internal::ReadNumber(body, "top_p", "", &inf.top_p));
  DI_REQ_CHECK(internal::CheckTopP(inf.top_p, "top_p"));
  DI_REQ_CHECK(internal::ReadInt(body, "top_k", "", &inf.top_k));
  std::optional<bool> stream;
  DI_REQ_CHECK(internal::ReadBool(body, "stream", "", &stream));
  inf.stream = stream.value_or(false);
  inf.include_usage = inf.stream;  // Messages streams always report usage
  if (const Json* stop = Field(body, "stop_sequences")) {
    if (!stop->is_array()) return WrongType("stop_sequences", "an array of strings", *stop);
    for (size_t i = 0; i < stop->size(); ++i) {
      if (!(*stop)[i].is_string()) return WrongType(Index("stop_sequences", i), "a string", (*stop)[i]);
      // deepseek-recipe names the parameter `stop` here as in Chat Completions.
      DI_REQ_CHECK(internal::CheckStopString((*stop)[i].get<std::string>(), Index("stop", i)));
      inf.stop.push_back((*stop)[i].get<std::string>());
    }
  }
  if (const Json* metadata = Field(body, "metadata")) {
    if (!metadata->is_object()) return WrongType("metadata", "an object", *metadata);
    inf.metadata = *metadata;
    DI_REQ_CHECK(internal::ReadString(*metadata, "user_id", "metadata", &inf.user));
  }
  internal::FinishConversation(r);
  return std::nullopt;
}

}  // namespace

ParseOutcome ParseMessagesRequest(std::string_view body_text, const RequestOptions& options) {
  return internal::ParseWith(ParseMessagesBody, body_text, options);
}

}  // namespace deepinfer::recipe
