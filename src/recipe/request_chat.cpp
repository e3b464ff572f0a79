// OpenAI Chat Completions request → Conversation.
#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "recipe/request_internal.h"

namespace deepinfer::recipe {

namespace internal {

Check ParseResponseFormat(const Json& body, Conversation* c) {
  const Json* rf = Field(body, "response_format");
  if (!rf) return std::nullopt;
  if (!rf->is_object()) return WrongType("response_format", "an object", *rf);
  std::optional<std::string> type;
  DI_REQ_CHECK(internal::ReadString(*rf, "type", "response_format", &type));
  if (!type) return Invalid("response_format.type", "Missing required parameter: 'response_format.type'.");
  if (*type == "text") {
    c->response_format = ResponseFormat::kText;
  } else if (*type == "json_object") {
    c->response_format = ResponseFormat::kJsonObject;
  } else if (*type == "json_schema") {
    const Json* js = Field(*rf, "json_schema");
    if (!js || !js->is_object()) {
      return Invalid("response_format.json_schema", "Missing required parameter: 'response_format.json_schema'.");
    }
    std::optional<std::string> name;
    DI_REQ_CHECK(internal::ReadString(*js, "name", "response_format.json_schema", &name));
    if (!name) return Invalid("response_format.json_schema.name", "Missing required parameter: 'response_format.json_schema.name'.");
    c->response_format = ResponseFormat::kJsonSchema;
    const Json* schema = Field(*js, "schema");
    if (!schema) {
      return Invalid("response_format.json_schema.schema",
                     "Missing required parameter: 'response_format.json_schema.schema'.");
    }
    std::optional<bool> strict;
    DI_REQ_CHECK(internal::ReadBool(*js, "strict", "response_format.json_schema", &strict));
    DI_REQ_CHECK(internal::ReadResponseSchema(*schema, strict.value_or(false), "response_format.json_schema.schema",
                                              &c->response_schema));
  } else {
    return Invalid("response_format.type",
                   "Invalid value: '" + *type + "'. Supported values are: 'text', 'json_object' and 'json_schema'.");
  }
  return std::nullopt;
}

}  // namespace internal

namespace {

using internal::Check;
using internal::Field;
using internal::Index;
using internal::Invalid;
using internal::Join;
using internal::Json;
using internal::WrongType;

// Text of a content value: a string, or an array of parts joined by "\n\n". Image parts are allowed only
// where `images` is given.
Check ReadContent(const Json& content, const std::string& path, const RequestOptions& options, std::string* text,
                  std::vector<ImageSource>* images, const std::string& message_path) {
  if (content.is_string()) {
    *text = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return WrongType(path, "a string or an array of content parts", content);
  std::vector<std::string> parts;
  std::vector<size_t> image_parts;  // the parts that are the placeholders of new entries of `images`
  const size_t first_image = images ? images->size() : 0;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string part_path = Index(path, i);
    if (!part.is_object()) return WrongType(part_path, "an object", part);
    std::optional<std::string> type;
    DI_REQ_CHECK(internal::ReadString(part, "type", part_path, &type));
    if (!type) return Invalid(Join(part_path, "type"), "Missing required parameter: '" + Join(part_path, "type") + "'.");
    if (*type == "text") {
      std::optional<std::string> t;
      DI_REQ_CHECK(internal::ReadString(part, "text", part_path, &t));
      if (!t) return Invalid(Join(part_path, "text"), "Missing required parameter: '" + Join(part_path, "text") + "'.");
      parts.push_back(*t);
    } else if (*type == "image_url" && images) {
      const Json* image = Field(part, "image_url");
      std::string url, detail;
      if (image && image->is_object()) {
        std::optional<std::string> u, d;
        DI_REQ_CHECK(internal::ReadString(*image, "url", Join(part_path, "image_url"), &u));
        DI_REQ_CHECK(internal::ReadString(*image, "detail", Join(part_path, "image_url"), &d));
        if (!u) return Invalid(Join(part_path, "image_url.url"), "Missing required parameter: 'url'.");
        url = *u;
        detail = d.value_or("");
        if (!detail.empty() && detail != "low" && detail != "high" && detail != "auto" && detail != "original") {
          return Invalid(Join(part_path, "image_url.detail"), "Invalid value for 'detail': '" + detail + "'.");
        }
        if (detail == "auto") detail = "high";
      } else if (image) {
        return WrongType(Join(part_path, "image_url"), "an object", *image);  // the API takes no bare URL string
      } else {
        return Invalid(Join(part_path, "image_url"), "Missing required parameter: 'image_url'.");
      }
      auto source = internal::ImageFromUrl(url, detail, message_path);
      if (!source) return Invalid(Join(part_path, "image_url.url"), "Invalid image URL: expected a data: or http(s) URL.");
      if (options.model_version == ModelVersion::kV41) {
        images->push_back(std::move(*source));
        image_parts.push_back(parts.size());
      }
      parts.emplace_back(internal::ImagePartText(options));
    } else {
      return Invalid(Join(part_path, "type"), "Invalid value: '" + *type + "'. Supported values are: 'text'" +
                                                   std::string(images ? " and 'image_url'." : "."));
    }
  }
  text->clear();
  for (size_t i = 0, k = 0; i < parts.size(); ++i) {
    if (i) text->append("\n\n");
    if (k < image_parts.size() && image_parts[k] == i) (*images)[first_image + k++].offset = text->size();
    text->append(parts[i]);
  }
  return std::nullopt;
}

Check ParseMessage(const Json& m, size_t index, const RequestOptions& options, Message* out) {
  const std::string path = Index("messages", index);
  const std::string message_path = ".messages[" + std::to_string(index) + "]";
  if (!m.is_object()) return WrongType(path, "an object", m);
  std::optional<std::string> role;
  DI_REQ_CHECK(internal::ReadString(m, "role", path, &role));
  if (!role) return Invalid(Join(path, "role"), "Missing required parameter: '" + Join(path, "role") + "'.");
  const Json* content = Field(m, "content");
  if (*role == "system" || *role == "developer") {
    out->role = Role::kSystem;
  } else if (*role == "user") {
    out->role = Role::kUser;
  } else if (*role == "assistant") {
    out->role = Role::kAssistant;
  } else if (*role == "tool") {
    out->role = Role::kTool;
  } else if (*role == "latest_reminder") {
    out->role = Role::kLatestReminder;
  } else {
    return Invalid(Join(path, "role"), "Invalid value: '" + *role +
                                           "'. Supported values are: 'system', 'developer', 'user', 'assistant', "
                                           "'tool' and 'latest_reminder'.");
  }
  const bool takes_images = out->role == Role::kUser;
  if (content) {
    DI_REQ_CHECK(ReadContent(*content, Join(path, "content"), options, &out->content,
                             takes_images ? &out->images : nullptr, message_path));
  } else if (out->role != Role::kAssistant) {
    return Invalid(Join(path, "content"), "Missing required parameter: '" + Join(path, "content") + "'.");
  }
  // The task extension (conversation.h) has a name of its own: clients send unrelated `task` keys, which
  // the API ignores, as deepseek-recipe does.
  std::optional<std::string> task;
  DI_REQ_CHECK(internal::ReadString(m, internal::kTaskField, path, &task));
  if (task) {
    out->task = ParseMessageTask(*task);
    if (!out->task) {
      return Invalid(Join(path, internal::kTaskField), "Invalid value: '" + *task +
                                             "'. Supported values are: 'action', 'query', 'authority', 'domain', "
                                             "'title' and 'read_url'.");
    }
  }
  if (out->role == Role::kAssistant) {
    DI_REQ_CHECK(internal::ReadString(m, "reasoning_content", path, &out->reasoning_content));
    std::optional<bool> prefix;
    DI_REQ_CHECK(internal::ReadBool(m, "prefix", path, &prefix));
    out->prefix = prefix.value_or(false);
    const Json* calls = Field(m, "tool_calls");
    if (calls && calls->is_array() && calls->empty()) {
      return Invalid(Join(path, "tool_calls"), "Invalid '" + Join(path, "tool_calls") +
                                                   "': empty array. Expected an array with minimum length 1, but got "
                                                   "an empty array instead.");
    }
    if (!content && !calls) {
      return Invalid(Join(path, "content"), "Invalid assistant message: content or tool_calls must be set");
    }
    if (calls) {
      if (!calls->is_array()) return WrongType(Join(path, "tool_calls"), "an array", *calls);
      for (size_t i = 0; i < calls->size(); ++i) {
        const Json& call = (*calls)[i];
        const std::string call_path = Index(Join(path, "tool_calls"), i);
        if (!call.is_object()) return WrongType(call_path, "an object", call);
        ToolCall tc;
        std::optional<std::string> id, type;
        DI_REQ_CHECK(internal::ReadString(call, "id", call_path, &id));
        DI_REQ_CHECK(internal::ReadString(call, "type", call_path, &type));
        if (!id) return Invalid(Join(call_path, "id"), "Missing required parameter: '" + Join(call_path, "id") + "'.");
        if (type && *type != "function") {
          return Invalid(Join(call_path, "type"), "Invalid value: '" + *type + "'. Supported values are: 'function'.");
        }
        const Json* function = Field(call, "function");
        if (!function || !function->is_object()) {
          return Invalid(Join(call_path, "function"), "Missing required parameter: '" + Join(call_path, "function") + "'.");
        }
        std::optional<std::string> name, arguments;
        DI_REQ_CHECK(internal::ReadString(*function, "name", Join(call_path, "function"), &name));
        DI_REQ_CHECK(internal::ReadString(*function, "arguments", Join(call_path, "function"), &arguments));
        if (!name) return Invalid(Join(call_path, "function.name"), "Missing required parameter: 'name'.");
        if (!arguments) return Invalid(Join(call_path, "function.arguments"), "Missing required parameter: 'arguments'.");
        tc.id = *id;
        tc.name = *name;
        tc.arguments = *arguments;
        out->tool_calls.push_back(std::move(tc));
      }
    }
  }
  if (out->role == Role::kTool) {
    DI_REQ_CHECK(internal::ReadString(m, "tool_call_id", path, &out->tool_call_id));
    if (!out->tool_call_id) {
      return Invalid(Join(path, "tool_call_id"), "Missing required parameter: '" + Join(path, "tool_call_id") + "'.");
    }
  }
  return std::nullopt;
}

// The Chat Completions pairing rules, with the API's messages, on the request's own message indices: an
// assistant message with k tool calls (distinct ids) is followed by k tool messages answering them, each
// once; no other tool message exists. Linear in the number of messages and calls.
Check CheckToolSequence(const Json& messages) {
  std::unordered_map<std::string, bool> answered;
  size_t i = 0;
  auto role_of = [&](size_t k) { return messages[k].value("role", std::string()); };
  while (i < messages.size()) {
    const Json& m = messages[i];
    const std::string role = role_of(i);
    if (role == "tool") {
      return Invalid(Index("messages", i), "Messages with role 'tool' must be a response to a preceding message with "
                                           "'tool_calls'");
    }
    const Json* calls = role == "assistant" ? Field(m, "tool_calls") : nullptr;
    if (!calls || calls->empty()) {
      ++i;
      continue;
    }
    answered.clear();
    for (const Json& call : *calls) {
      const std::string id = call.value("id", std::string());
      if (!answered.emplace(id, false).second) {
        return Invalid(Index("messages", i),
                       "Duplicate value for 'tool_call_id' of " + id + " in message[" + std::to_string(i) + "]");
      }
    }
    const size_t k = calls->size();
    for (size_t j = i + 1; j <= i + k; ++j) {
      if (j >= messages.size() || role_of(j) != "tool") {
        return Invalid(Index("messages", i),
                       "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                       "'tool_call_id'. (insufficient tool messages following tool_calls message)");
      }
      const std::string id = messages[j].value("tool_call_id", std::string());
      const auto it = answered.find(id);
      if (it == answered.end()) {
        return Invalid(Index("messages", i),
                       "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                       "'tool_call_id', The following tool_call_ids did not have response messages: " + id);
      }
      if (it->second) {
        return Invalid(Index("messages", j),
                       "Duplicate value for 'tool_call_id' of " + id + " in message[" + std::to_string(j) + "]");
      }
      it->second = true;
    }
    i += k + 1;
  }
  return std::nullopt;
}

Check ParseTools(const Json& body, Conversation* c) {
  const Json* tools = Field(body, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return WrongType("tools", "an array", *tools);
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& tool = (*tools)[i];
    const std::string path = Index("tools", i);
    if (!tool.is_object()) return WrongType(path, "an object", tool);
    std::optional<std::string> type;
    DI_REQ_CHECK(internal::ReadString(tool, "type", path, &type));
    if (type && *type != "function") {
      return Invalid(Join(path, "type"), "Invalid value: '" + *type + "'. Supported values are: 'function'.");
    }
    const Json* function = Field(tool, "function");
    if (!function || !function->is_object()) {
      return Invalid(Join(path, "function"), "Missing required parameter: '" + Join(path, "function") + "'.");
    }
    const std::string fpath = Join(path, "function");
    ToolDefinition def;
    std::optional<std::string> name;
    DI_REQ_CHECK(internal::ReadString(*function, "name", fpath, &name));
    if (!name) return Invalid(Join(fpath, "name"), "Missing required parameter: '" + Join(fpath, "name") + "'.");
    DI_REQ_CHECK(internal::CheckToolName(*name, Join(fpath, "name")));
    def.name = *name;
    DI_REQ_CHECK(internal::ReadString(*function, "description", fpath, &def.description));
    DI_REQ_CHECK(internal::ReadBool(*function, "strict", fpath, &def.strict));
    if (const Json* params = Field(*function, "parameters")) {
      if (!params->is_object()) return WrongType(Join(fpath, "parameters"), "an object", *params);
      def.parameters = *params;  // strict tools are normalized once tool_choice has chosen the tools
    }
    c->tools.push_back(std::move(def));
  }
  return std::nullopt;
}

Check ParseToolChoice(const Json& body, Conversation* c, std::optional<std::string>* named) {
  const Json* choice = Field(body, "tool_choice");
  if (!choice) return std::nullopt;
  if (choice->is_string()) {
    const std::string s = choice->get<std::string>();
    if (s == "auto") c->tool_choice = ToolChoice::kAuto;
    else if (s == "none") c->tool_choice = ToolChoice::kNone;
    else if (s == "required") c->tool_choice = ToolChoice::kRequired;
    else return Invalid("tool_choice", "Invalid value: '" + s + "'. Supported values are: 'none', 'auto' and 'required'.");
    return std::nullopt;
  }
  if (!choice->is_object()) return WrongType("tool_choice", "a string or an object", *choice);
  const Json* function = Field(*choice, "function");
  std::optional<std::string> name;
  if (function && function->is_object()) DI_REQ_CHECK(internal::ReadString(*function, "name", "tool_choice.function", &name));
  if (!name) return Invalid("tool_choice.function.name", "Missing required parameter: 'tool_choice.function.name'.");
  *named = name;
  return std::nullopt;
}


Check ParseSampling(const Json& body, const RequestOptions& options, ParsedRequest* r) {
  InferenceOptions& inf = r->inference;
  if (const Json* stop = Field(body, "stop")) {
    if (stop->is_string()) {
      DI_REQ_CHECK(internal::CheckStopString(stop->get<std::string>(), "stop"));
      inf.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > 16) return Invalid("stop", "Invalid stop: at most 16 stop sequences are supported");
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string()) return WrongType(Index("stop", i), "a string", (*stop)[i]);
        DI_REQ_CHECK(internal::CheckStopString((*stop)[i].get<std::string>(), Index("stop", i)));
        inf.stop.push_back((*stop)[i].get<std::string>());
      }
    } else {
      return WrongType("stop", "a string or an array of strings", *stop);
    }
  }
  DI_REQ_CHECK(internal::ReadNumber(body, "temperature", "", &inf.temperature));
  DI_REQ_CHECK(internal::CheckTemperature(inf.temperature, "temperature"));
  DI_REQ_CHECK(internal::ReadNumber(body, "top_p", "", &inf.top_p));
  DI_REQ_CHECK(internal::CheckTopP(inf.top_p, "top_p"));
  DI_REQ_CHECK(internal::ReadInt(body, "top_k", "", &inf.top_k));
  std::optional<int64_t> max_tokens, max_completion_tokens;
  DI_REQ_CHECK(internal::ReadInt(body, "max_tokens", "", &max_tokens));
  DI_REQ_CHECK(internal::ReadInt(body, "max_completion_tokens", "", &max_completion_tokens));
  DI_REQ_CHECK(internal::CheckMaxTokens(max_tokens, options.max_tokens_upper_bound, "max_tokens"));
  DI_REQ_CHECK(internal::CheckMaxTokens(max_completion_tokens, options.max_tokens_upper_bound, "max_completion_tokens"));
  inf.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  DI_REQ_CHECK(internal::ReadInt(body, "seed", "", &inf.seed));
  if (inf.seed && *inf.seed < 0) return Invalid("seed", "Invalid seed value, the valid range of seed is [0, 2^63)");
  std::optional<int64_t> n;
  DI_REQ_CHECK(internal::ReadInt(body, "n", "", &n));
  if (n && options.max_n <= 1 && *n != 1) return Invalid("n", "Invalid n value (currently only n = 1 is supported)");
  if (n && (*n < 1 || *n > options.max_n)) {
    return Invalid("n", "Invalid n value, the valid range of n is [1, " + std::to_string(options.max_n) + "]");
  }
  inf.n = n.value_or(1);
  std::optional<bool> logprobs, stream;
  DI_REQ_CHECK(internal::ReadBool(body, "logprobs", "", &logprobs));
  inf.logprobs = logprobs.value_or(false);
  DI_REQ_CHECK(internal::ReadInt(body, "top_logprobs", "", &inf.top_logprobs));
  if (inf.top_logprobs && (*inf.top_logprobs < 0 || *inf.top_logprobs > 20)) {
    return Invalid("top_logprobs", "Invalid top_logprobs value, the valid range of top_logprobs is [0, 20]");
  }
  if (inf.top_logprobs && !inf.logprobs) {
    return Invalid("top_logprobs", "Invalid top_logprobs: logprobs must be true when top_logprobs is set");
  }
  DI_REQ_CHECK(internal::ReadBool(body, "stream", "", &stream));
  inf.stream = stream.value_or(false);
  if (const Json* so = Field(body, "stream_options")) {
    if (!so->is_object()) return WrongType("stream_options", "an object", *so);
    std::optional<bool> include_usage;
    DI_REQ_CHECK(internal::ReadBool(*so, "include_usage", "stream_options", &include_usage));
    inf.include_usage = include_usage.value_or(false);
  }
  DI_REQ_CHECK(internal::ReadString(body, "user", "", &inf.user));
  if (const Json* metadata = Field(body, "metadata")) {
    if (!metadata->is_object()) return WrongType("metadata", "an object", *metadata);
    inf.metadata = *metadata;
  }
  return std::nullopt;
}

Check ParseThinking(const Json& body, const RequestOptions& options, Conversation* c) {
  std::optional<bool> thinking;
  if (const Json* t = Field(body, "thinking")) {
    if (!t->is_object()) return WrongType("thinking", "an object", *t);
    std::optional<std::string> type;
    DI_REQ_CHECK(internal::ReadString(*t, "type", "thinking", &type));
    // "adaptive" (the model decides how long to think) is thinking mode for DeepSeek, as for the oracle.
    if (type && (*type == "enabled" || *type == "adaptive")) thinking = true;
    else if (type && *type == "disabled") thinking = false;
    else if (type) {
      return Invalid("thinking.type",
                     "Invalid value: '" + *type + "'. Supported values are: 'enabled', 'disabled' and 'adaptive'.");
    }
  }
  std::optional<ReasoningEffort> effort;
  bool disables = false;
  DI_REQ_CHECK(internal::ReadEffort(body, "reasoning_effort", "", &effort, &disables));
  if (disables && !thinking) thinking = false;
  c->thinking_mode = thinking.value_or(options.default_thinking_mode);
  c->reasoning_effort = c->thinking_mode ? effort : std::nullopt;
  return std::nullopt;
}

Check Parse(const Json& body, const RequestOptions& options, ParsedRequest* r) {
  r->protocol = Protocol::kChatCompletions;
  std::optional<std::string> model;
  DI_REQ_CHECK(internal::ReadString(body, "model", "", &model));
  if (!model) return Invalid("model", "Missing required parameter: 'model'.");
  r->model = *model;
  const Json* messages = Field(body, "messages");
  if (!messages) return Invalid("messages", "Missing required parameter: 'messages'.");
  if (!messages->is_array()) return WrongType("messages", "an array", *messages);
  if (messages->empty()) return Invalid("messages", "Empty input messages");
  Conversation& c = r->conversation;
  for (size_t i = 0; i < messages->size(); ++i) {
    Message m;
    DI_REQ_CHECK(ParseMessage((*messages)[i], i, options, &m));
    // deepseek-recipe drops system messages without text.
    if (m.role == Role::kSystem && m.content.empty()) continue;
    c.messages.push_back(std::move(m));
  }
  for (size_t i = 0; i + 1 < c.messages.size(); ++i) {
    if (c.messages[i].prefix) {
      return Invalid(Index("messages", i) + ".prefix",
                     "Invalid completion message: prefix set true with message which is not final message or "
                     "message role is not assistant");
    }
  }
  DI_REQ_CHECK(CheckToolSequence(*messages));
  DI_REQ_CHECK(ParseTools(body, &c));
  std::optional<std::string> named_tool;
  DI_REQ_CHECK(ParseToolChoice(body, &c, &named_tool));
  DI_REQ_CHECK(internal::ParseResponseFormat(body, &c));
  if (c.response_format == ResponseFormat::kJsonObject && !internal::ContainsJsonWord(c)) {
    return Invalid("response_format",
                   "Prompt must contain the word 'json' in some form to use 'response_format' of type 'json_object'.");
  }
  DI_REQ_CHECK(ParseThinking(body, options, &c));
  // deepseek-recipe's order: the thinking tool_choice rule before the prefix rules.
  if (c.thinking_mode && !c.tools.empty() && (named_tool || c.tool_choice == ToolChoice::kRequired)) {
    return Invalid("tool_choice", "Thinking mode does not support this tool_choice");
  }
  const bool has_prefix = !c.messages.empty() && c.messages.back().prefix;
  if (has_prefix && !c.tools.empty()) return Invalid("tools", "Function call should not be used with prefix");
  if (has_prefix && c.response_format == ResponseFormat::kJsonObject) {
    return Invalid("response_format", "response_format json_object should not be used with prefix");
  }
  DI_REQ_CHECK(internal::ChooseTools(r, named_tool, "tool_choice"));  // strict schemas fail before sampling
  DI_REQ_CHECK(ParseSampling(body, options, r));
  internal::FinishConversation(r);
  // deepseek-recipe refuses response_format beside strict tools; OpenAI takes the pair (the model calls a
  // tool or answers in the format), and agent frameworks send it (deviations.json).
  DI_REQ_CHECK(internal::CheckStrictConsistency(c.tools, "tools"));
  return std::nullopt;
}

}  // namespace

ParseOutcome ParseChatCompletionsRequest(std::string_view body_text, const RequestOptions& options) {
  return internal::ParseWith(Parse, body_text, options);
}

}  // namespace deepinfer::recipe
