// OpenAI Responses request → Conversation. Input items map the way deepseek-recipe maps them: developer
// messages count as user text, reasoning items feed the next assistant message, function calls join the
// assistant message before them (ordered by call id, with their outputs in the same order), namespace tools
// are flattened into functions.
#include <algorithm>
#include <cctype>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

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

std::string MissingParameter(const std::string& path) { return "Missing required parameter: '" + path + "'."; }

// Text of a message's content: a string or parts (input_text, output_text, input_image) joined by "\n\n".
Check ReadContent(const Json& content, const std::string& path, const RequestOptions& options,
                  const std::string& message_path, Message* out) {
  if (content.is_string()) {
    out->content = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return WrongType(path, "a string or an array of content parts", content);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string part_path = Index(path, i);
    if (!part.is_object()) return WrongType(part_path, "an object", part);
    std::optional<std::string> type;
    DI_REQ_CHECK(internal::ReadString(part, "type", part_path, &type));
    const std::string t = type.value_or("");
    std::string piece;
    if (t == "input_text" || t == "output_text" || t == "text" || t == "refusal") {
      std::optional<std::string> value;
      DI_REQ_CHECK(internal::ReadString(part, t == "refusal" ? "refusal" : "text", part_path, &value));
      if (!value) return Invalid(Join(part_path, "text"), MissingParameter(Join(part_path, "text")));
      piece = *value;
    } else if (t == "input_image") {
      std::optional<std::string> url, detail;
      DI_REQ_CHECK(internal::ReadString(part, "image_url", part_path, &url));
      DI_REQ_CHECK(internal::ReadString(part, "detail", part_path, &detail));
      if (!url) {
        // An image by file_id: a model that reads no images sees the placeholder text, as for any image; one
        // that does cannot fetch a file by id.
        if (options.model_version != ModelVersion::kV41) {
          piece = std::string(internal::ImagePartText(options));
          if (i) text += "\n\n";
          text += piece;
          continue;
        }
        return Invalid(part_path, part_path + ": file_id is not supported. Pass the image as a base64 data url instead.");
      }
      std::string d = detail.value_or("high");
      if (d == "auto") d = "high";
      auto image = internal::ImageFromUrl(*url, d, message_path);
      if (!image) return Invalid(Join(part_path, "image_url"), "Invalid image URL: expected a data: or http(s) URL.");
      if (options.model_version == ModelVersion::kV41) {
        image->offset = text.size() + (i ? 2 : 0);  // after the "\n\n" below
        out->images.push_back(std::move(*image));
      }
      piece = std::string(internal::ImagePartText(options));
    } else if (t == "input_file") {
      piece = "[Unsupported Document]";  // documents are not read; the model is told one was there
    } else {
      return Invalid(Join(part_path, "type"), "Invalid value: '" + t +
                                                  "'. Supported values are: 'input_text', 'output_text', "
                                                  "'input_image' and 'input_file'.");
    }
    if (i) text += "\n\n";
    text += piece;
  }
  out->content = std::move(text);
  return std::nullopt;
}

// Assistant output items (reasoning, messages, tool calls) build one assistant message as deepseek-recipe
// builds it from the item list: reasoning opens a new message unless the open one has neither text nor tool
// calls yet (then it joins its reasoning, "\n" between items, as between the parts of one); text joins the
// open message unless that one already has tool calls ("\n\n" between non-empty texts); tool calls join the
// open message. Any other item closes it. A reasoning item with no text is no item at all.
Message* OpenAssistant(Conversation* c) {
  if (!c->messages.empty() && c->messages.back().role == Role::kAssistant) return &c->messages.back();
  return nullptr;
}

Message* NewAssistant(Conversation* c) {
  Message m;
  m.role = Role::kAssistant;
  c->messages.push_back(std::move(m));
  return &c->messages.back();
}

void AddReasoning(std::string text, Conversation* c) {
  Message* open = OpenAssistant(c);
  if (!open || !open->content.empty() || !open->tool_calls.empty()) open = NewAssistant(c);
  if (open->reasoning_content) open->reasoning_content->append("\n").append(text);
  else open->reasoning_content = std::move(text);
}

void AddAssistantText(std::string text, Conversation* c) {
  Message* open = OpenAssistant(c);
  if (!open || !open->tool_calls.empty()) open = NewAssistant(c);
  if (text.empty()) return;
  if (!open->content.empty()) open->content += "\n\n";
  open->content += text;
}

Message* AssistantForToolCall(Conversation* c) {
  Message* open = OpenAssistant(c);
  return open ? open : NewAssistant(c);
}

Check ParseItem(const Json& item, size_t index, const RequestOptions& options, Conversation* c) {
  const std::string path = Index("input", index);
  if (!item.is_object()) return WrongType(path, "an object", item);
  std::optional<std::string> type, role;
  DI_REQ_CHECK(internal::ReadString(item, "type", path, &type));
  DI_REQ_CHECK(internal::ReadString(item, "role", path, &role));
  const std::string t = type.value_or(role ? "message" : "");
  const std::string message_path = ".input[" + std::to_string(index) + "]";
  if (t == "message") {
    if (!role) return Invalid(Join(path, "role"), MissingParameter(Join(path, "role")));
    Message m;
    // deepseek-recipe reads developer messages as system messages for V4.1 and as user text otherwise.
    if (*role == "developer") m.role = options.model_version == ModelVersion::kV41 ? Role::kSystem : Role::kUser;
    else if (*role == "user") m.role = Role::kUser;
    else if (*role == "system") m.role = Role::kSystem;
    else if (*role == "assistant") m.role = Role::kAssistant;
    else {
      return Invalid(Join(path, "role"), "Invalid value: '" + *role +
                                             "'. Supported values are: 'user', 'assistant', 'system' and "
                                             "'developer'.");
    }
    const Json* content = Field(item, "content");
    if (!content) return Invalid(Join(path, "content"), MissingParameter(Join(path, "content")));
    DI_REQ_CHECK(ReadContent(*content, Join(path, "content"), options, message_path, &m));
    if (m.role == Role::kAssistant) {
      AddAssistantText(std::move(m.content), c);
      return std::nullopt;
    }
    c->messages.push_back(std::move(m));
    return std::nullopt;
  }
  if (t == "reasoning") {
    std::string text;
    if (const Json* content = Field(item, "content")) {
      if (!content->is_array()) return WrongType(Join(path, "content"), "an array", *content);
      for (size_t i = 0; i < content->size(); ++i) {
        std::optional<std::string> part;
        if (!(*content)[i].is_object()) return WrongType(Index(Join(path, "content"), i), "an object", (*content)[i]);
        DI_REQ_CHECK(internal::ReadString((*content)[i], "text", Index(Join(path, "content"), i), &part));
        if (i) text += "\n";
        text += part.value_or("");
      }
    }
    if (!text.empty()) AddReasoning(std::move(text), c);
    return std::nullopt;
  }
  if (t == "function_call") {
    std::optional<std::string> call_id, name, arguments;
    DI_REQ_CHECK(internal::ReadString(item, "call_id", path, &call_id));
    DI_REQ_CHECK(internal::ReadString(item, "name", path, &name));
    DI_REQ_CHECK(internal::ReadString(item, "arguments", path, &arguments));
    if (!call_id) return Invalid(Join(path, "call_id"), MissingParameter(Join(path, "call_id")));
    if (!name) return Invalid(Join(path, "name"), MissingParameter(Join(path, "name")));
    if (!arguments) return Invalid(Join(path, "arguments"), MissingParameter(Join(path, "arguments")));
    Message* assistant = AssistantForToolCall(c);
    std::optional<std::string> ns;
    DI_REQ_CHECK(internal::ReadString(item, "namespace", path, &ns));
    std::string full_name = *name;
    if (ns) full_name = *ns + (options.model_version == ModelVersion::kV41 ? "::" : "__") + *name;
    assistant->tool_calls.push_back({*call_id, full_name, *arguments});
    return std::nullopt;
  }
  if (t == "custom_tool_call") {
    // deepseek-recipe replays a custom tool call as a function call whose one argument is the raw input.
    std::optional<std::string> call_id, name, input;
    DI_REQ_CHECK(internal::ReadString(item, "call_id", path, &call_id));
    DI_REQ_CHECK(internal::ReadString(item, "name", path, &name));
    DI_REQ_CHECK(internal::ReadString(item, "input", path, &input));
    if (!call_id) return Invalid(Join(path, "call_id"), MissingParameter(Join(path, "call_id")));
    if (!name) return Invalid(Join(path, "name"), MissingParameter(Join(path, "name")));
    if (!input) return Invalid(Join(path, "input"), MissingParameter(Join(path, "input")));
    Message* assistant = AssistantForToolCall(c);
    Json arguments = Json::object();
    arguments["input"] = *input;
    assistant->tool_calls.push_back({*call_id, *name, arguments.dump()});
    return std::nullopt;
  }
  if (t == "function_call_output" || t == "custom_tool_call_output") {
    std::optional<std::string> call_id;
    DI_REQ_CHECK(internal::ReadString(item, "call_id", path, &call_id));
    if (!call_id) return Invalid(Join(path, "call_id"), MissingParameter(Join(path, "call_id")));
    const Json* output = Field(item, "output");
    if (!output) return Invalid(Join(path, "output"), MissingParameter(Join(path, "output")));
    Message m;
    m.role = Role::kTool;
    m.tool_call_id = *call_id;
    DI_REQ_CHECK(ReadContent(*output, Join(path, "output"), options, message_path, &m));
    c->messages.push_back(std::move(m));
    return std::nullopt;
  }
  if (t.empty()) return Invalid(Join(path, "type"), MissingParameter(Join(path, "type")));
  // Items of the tools this server does not run (item_reference, web_search_call, mcp_*, local_shell_call,
  // computer_call, compaction, ...), and any type added to the API later: a client replaying a Codex or
  // Agents-SDK history sends them, and the oracle skips them rather than failing the request.
  return std::nullopt;
}

// Function calls in call-id order, and each run of outputs in the order of the calls it answers.
void OrderToolCalls(Conversation* c) {
  auto& ms = c->messages;
  std::unordered_map<std::string_view, size_t> rank;
  for (size_t i = 0; i < ms.size(); ++i) {
    if (ms[i].role != Role::kAssistant || ms[i].tool_calls.empty()) continue;
    auto& calls = ms[i].tool_calls;
    std::stable_sort(calls.begin(), calls.end(), [](const ToolCall& a, const ToolCall& b) { return a.id < b.id; });
    rank.clear();
    for (size_t k = 0; k < calls.size(); ++k) rank.emplace(calls[k].id, k);
    size_t j = i + 1;
    while (j < ms.size() && ms[j].role == Role::kTool) ++j;
    auto rank_of = [&](const Message& m) {
      const auto it = m.tool_call_id ? rank.find(*m.tool_call_id) : rank.end();
      return it == rank.end() ? calls.size() : it->second;
    };
    std::stable_sort(ms.begin() + static_cast<ptrdiff_t>(i) + 1, ms.begin() + static_cast<ptrdiff_t>(j),
                     [&](const Message& a, const Message& b) { return rank_of(a) < rank_of(b); });
  }
}

// The Responses pairing rules as deepseek-recipe applies them to the input items themselves, in item
// order (so an error in a later item is reported after them): a run of adjacent call items must be followed
// at once by a run of output items answering each call once. Any other item between them (a message, a
// reasoning item even with no text, an item this server skips) ends the run. Call ids are unique. Linear in
// the number of items; where several calls lack an output the first in item order is named (the oracle
// names an arbitrary one).
class ToolPairing {
 public:
  static std::string StringOr(const Json& item, const char* key) {
    if (!item.is_object()) return {};
    const auto it = item.find(key);
    return it != item.end() && it->is_string() ? it->get<std::string>() : std::string();
  }

  Check Feed(const Json& item) {
    // Items are not validated yet here: a field of the wrong type reads as absent (json::value would throw).
    const std::string type = item.is_object() && !item.contains("type") && item.contains("role") ? "message"
                                                                                                 : StringOr(item, "type");
    if (type == "function_call" || type == "custom_tool_call") {
      if (outputs_started_) DI_REQ_CHECK(Close());
      const std::string id = StringOr(item, "call_id");
      if (!all_calls_.insert(id).second) return Invalid("input", "Duplicate 'call_id': " + id + ".");
      run_.push_back(id);
      answered_.emplace(id, false);
      return std::nullopt;
    }
    if (type == "function_call_output" || type == "custom_tool_call_output") {
      const std::string id = StringOr(item, "call_id");
      const auto it = answered_.find(id);
      if (it == answered_.end()) return Invalid("input", "No tool call found for tool output with call_id " + id + ".");
      if (it->second) return Invalid("input", "Duplicate tool output for call_id: " + id + ".");
      it->second = true;
      outputs_started_ = true;
      return std::nullopt;
    }
    return Close();
  }
  Check Close() {
    for (const std::string& id : run_) {
      if (!answered_[id]) return Invalid("input", "No tool output found for tool call " + id + ".");
    }
    run_.clear();
    answered_.clear();
    outputs_started_ = false;
    return std::nullopt;
  }

 private:
  std::unordered_set<std::string> all_calls_;
  std::vector<std::string> run_;                    // the open run's call ids, in item order
  std::unordered_map<std::string, bool> answered_;  // of the open run
  bool outputs_started_ = false;
};

Check ParseFunctionTool(const Json& tool, const std::string& path, ToolDefinition* def) {
  std::optional<std::string> name;
  DI_REQ_CHECK(internal::ReadString(tool, "name", path, &name));
  if (!name) return Invalid(Join(path, "name"), MissingParameter(Join(path, "name")));
  DI_REQ_CHECK(internal::CheckToolName(*name, Join(path, "name")));
  def->name = *name;
  DI_REQ_CHECK(internal::ReadString(tool, "description", path, &def->description));
  DI_REQ_CHECK(internal::ReadBool(tool, "strict", path, &def->strict));
  if (const Json* params = Field(tool, "parameters")) {
    if (!params->is_object()) return WrongType(Join(path, "parameters"), "an object", *params);
    def->parameters = *params;  // strict tools are normalized once tool_choice has chosen the tools
  }

  return std::nullopt;
}

#include "recipe/apply_patch_tool.inc"

ToolDefinition ApplyPatchTool(ModelVersion version) {
  ToolDefinition def;
  def.name = "apply_patch";
  def.description = std::string(version == ModelVersion::kV41 ? kApplyPatchDescriptionV41 : kApplyPatchDescriptionV4);
  def.parameters = Json::parse(kApplyPatchParameters);
  def.custom = true;
  return def;
}

Check ParseResponsesTools(const Json& body, const RequestOptions& options, Conversation* c) {
  const Json* tools = Field(body, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return WrongType("tools", "an array", *tools);
  // Names are checked for uniqueness with the schemas (ChooseTools), across function tools and the
  // flattened members of namespaces.
  auto add = [&](ToolDefinition def) -> Check {
    c->tools.push_back(std::move(def));
    return std::nullopt;
  };
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& tool = (*tools)[i];
    const std::string path = Index("tools", i);
    if (!tool.is_object()) return WrongType(path, "an object", tool);
    std::optional<std::string> type;
    DI_REQ_CHECK(internal::ReadString(tool, "type", path, &type));
    const std::string t = type.value_or("");
    if (t == "function") {
      ToolDefinition def;
      DI_REQ_CHECK(ParseFunctionTool(tool, path, &def));
      DI_REQ_CHECK(add(std::move(def)));
    } else if (t == "namespace") {
      std::optional<std::string> ns, ns_description;
      DI_REQ_CHECK(internal::ReadString(tool, "name", path, &ns));
      DI_REQ_CHECK(internal::ReadString(tool, "description", path, &ns_description));
      if (!ns) return Invalid(Join(path, "name"), MissingParameter(Join(path, "name")));
      const Json* members = Field(tool, "tools");
      if (!members || !members->is_array()) return Invalid(Join(path, "tools"), MissingParameter(Join(path, "tools")));
      for (size_t k = 0; k < members->size(); ++k) {
        const std::string member_path = Index(Join(path, "tools"), k);
        if (!(*members)[k].is_object()) return WrongType(member_path, "an object", (*members)[k]);
        ToolDefinition def;
        DI_REQ_CHECK(ParseFunctionTool((*members)[k], member_path, &def));
        def.ns = *ns;
        def.local_name = def.name;
        if (options.model_version == ModelVersion::kV41) {
          def.name = *ns + "::" + def.name;
          // deepseek-recipe prefixes the namespace's description only when it has text.
          if (ns_description && !ns_description->empty()) {
            def.description = *ns_description + "\n" + def.description.value_or("");
          }
        } else {
          def.name = *ns + "__" + def.name;
        }
        DI_REQ_CHECK(add(std::move(def)));
      }
    } else if (t == "custom") {
      std::optional<std::string> name;
      DI_REQ_CHECK(internal::ReadString(tool, "name", path, &name));
      if (!name) return Invalid(Join(path, "name"), MissingParameter(Join(path, "name")));
      if (*name != "apply_patch") {
        return Invalid(Join(path, "name"), "Unsupported custom tool: '" + *name + "'. Only 'apply_patch' is supported.");
      }
      // The oracle ignores the request's description and grammar and declares its own function tool.
      DI_REQ_CHECK(add(ApplyPatchTool(options.model_version)));
    } else if (t.empty()) {
      return Invalid(Join(path, "type"), MissingParameter(Join(path, "type")));
    }
    // Other types are tools this server does not run (web_search, apply_patch, local_shell, mcp, file_search,
    // computer_use_preview, code_interpreter, ...): dropped, as deepseek-recipe drops them by default.
  }
  return std::nullopt;
}

Check ParseResponsesBody(const Json& body, const RequestOptions& options, ParsedRequest* r) {
  r->protocol = Protocol::kResponses;
  Conversation& c = r->conversation;
  InferenceOptions& inf = r->inference;
  std::optional<std::string> model, instructions;
  DI_REQ_CHECK(internal::ReadString(body, "model", "", &model));
  if (!model) return Invalid("model", MissingParameter("model"));
  r->model = *model;
  DI_REQ_CHECK(internal::ReadString(body, "instructions", "", &instructions));
  if (instructions && !instructions->empty()) {
    Message m;
    m.role = Role::kSystem;
    m.content = *instructions;
    c.messages.push_back(std::move(m));
  }
  const Json* input = Field(body, "input");
  if (!input) return Invalid("input", MissingParameter("input"));
  // Tools before the items, as deepseek-recipe checks them (its error for a bad tool wins over an item's).
  DI_REQ_CHECK(ParseResponsesTools(body, options, &c));
  if (input->is_string()) {
    Message m;
    m.role = Role::kUser;
    m.content = input->get<std::string>();
    c.messages.push_back(std::move(m));
  } else if (input->is_array()) {
    if (input->empty()) return Invalid("input", "Input items array must not be empty");
    ToolPairing pairing;
    for (size_t i = 0; i < input->size(); ++i) {
      if ((*input)[i].is_object()) DI_REQ_CHECK(pairing.Feed((*input)[i]));
      DI_REQ_CHECK(ParseItem((*input)[i], i, options, &c));
    }
    DI_REQ_CHECK(pairing.Close());
  } else {
    return WrongType("input", "a string or an array of input items", *input);
  }
  OrderToolCalls(&c);

  std::optional<std::string> named_tool;
  if (const Json* choice = Field(body, "tool_choice")) {
    if (choice->is_string()) {
      const std::string s = choice->get<std::string>();
      if (s == "auto") c.tool_choice = ToolChoice::kAuto;
      else if (s == "none") c.tool_choice = ToolChoice::kNone;
      else if (s == "required") c.tool_choice = ToolChoice::kRequired;
      else return Invalid("tool_choice", "Invalid value: '" + s + "'. Supported values are: 'none', 'auto' and 'required'.");
    } else if (choice->is_object()) {
      std::optional<std::string> name;
      DI_REQ_CHECK(internal::ReadString(*choice, "name", "tool_choice", &name));
      if (!name) return Invalid("tool_choice.name", MissingParameter("tool_choice.name"));
      named_tool = name;
    } else {
      return WrongType("tool_choice", "a string or an object", *choice);
    }
  }
  if (const Json* text = Field(body, "text")) {
    if (!text->is_object()) return WrongType("text", "an object", *text);
    if (const Json* format = Field(*text, "format")) {
      if (!format->is_object()) return WrongType("text.format", "an object", *format);
      std::optional<std::string> type;
      DI_REQ_CHECK(internal::ReadString(*format, "type", "text.format", &type));
      if (!type || *type == "text") {
        c.response_format = ResponseFormat::kText;
      } else if (*type == "json_object") {
        c.response_format = ResponseFormat::kJsonObject;
        if (!internal::ContainsJsonWord(c)) {
          return Invalid("text.format", "Response input messages must contain the word 'json' in some form to use "
                                        "'text.format' of type 'json_object'.");
        }
      } else if (*type == "json_schema") {
        std::optional<std::string> name;
        DI_REQ_CHECK(internal::ReadString(*format, "name", "text.format", &name));
        if (!name) return Invalid("text.format.name", MissingParameter("text.format.name"));
        const Json* schema = Field(*format, "schema");
        if (!schema) return Invalid("text.format.schema", MissingParameter("text.format.schema"));
        c.response_format = ResponseFormat::kJsonSchema;
        std::optional<bool> strict;
        DI_REQ_CHECK(internal::ReadBool(*format, "strict", "text.format", &strict));
        DI_REQ_CHECK(internal::ReadResponseSchema(*schema, strict.value_or(false), "text.format.schema",
                                                  &c.response_schema));
      } else {
        return Invalid("text.format.type", "Invalid value: '" + *type +
                                               "'. Supported values are: 'text', 'json_object' and 'json_schema'.");
      }
    }
  }
  std::optional<bool> thinking;
  std::optional<ReasoningEffort> effort;
  if (const Json* reasoning = Field(body, "reasoning")) {
    if (!reasoning->is_object()) return WrongType("reasoning", "an object", *reasoning);
    bool disables = false;
    DI_REQ_CHECK(internal::ReadEffort(*reasoning, "effort", "reasoning", &effort, &disables));
    if (disables) thinking = false;
  }
  c.thinking_mode = thinking.value_or(options.default_thinking_mode);
  c.reasoning_effort = c.thinking_mode ? effort : std::nullopt;
  if (c.thinking_mode && !c.tools.empty() && (named_tool || c.tool_choice == ToolChoice::kRequired)) {
    return Invalid("tool_choice", "Thinking mode does not support this tool_choice");
  }
  DI_REQ_CHECK(internal::ChooseTools(r, named_tool, "tool_choice"));  // schemas fail before sampling settings
  DI_REQ_CHECK(internal::ReadInt(body, "max_output_tokens", "", &inf.max_tokens));
  DI_REQ_CHECK(internal::CheckMaxTokens(inf.max_tokens, options.max_tokens_upper_bound, "max_tokens"));
  DI_REQ_CHECK(internal::ReadNumber(body, "temperature", "", &inf.temperature));
  DI_REQ_CHECK(internal::CheckTemperature(inf.temperature, "temperature"));
  DI_REQ_CHECK(internal::ReadNumber(body, "top_p", "", &inf.top_p));
  DI_REQ_CHECK(internal::CheckTopP(inf.top_p, "top_p"));
  DI_REQ_CHECK(internal::ReadInt(body, "top_logprobs", "", &inf.top_logprobs));
  if (inf.top_logprobs && (*inf.top_logprobs < 0 || *inf.top_logprobs > 20)) {
    return Invalid("top_logprobs", "Invalid top_logprobs value, the valid range of top_logprobs is [0, 20]");
  }
  std::optional<bool> stream;
  DI_REQ_CHECK(internal::ReadBool(body, "stream", "", &stream));
  inf.stream = stream.value_or(false);
  inf.include_usage = inf.stream;  // Responses streams always end with usage
  DI_REQ_CHECK(internal::ReadString(body, "user", "", &inf.user));
  if (const Json* metadata = Field(body, "metadata")) {
    if (!metadata->is_object()) return WrongType("metadata", "an object", *metadata);
    inf.metadata = *metadata;
  }
  internal::FinishConversation(r);
  r->responses_echo = internal::ResponsesEchoFromBody(body);
  // deepseek-recipe refuses text.format beside strict tools; OpenAI takes the pair (deviations.json).
  DI_REQ_CHECK(internal::CheckStrictConsistency(c.tools, "tools"));
  return std::nullopt;
}

}  // namespace

ParseOutcome ParseResponsesRequest(std::string_view body_text, const RequestOptions& options) {
  return internal::ParseWith(ParseResponsesBody, body_text, options);
}

}  // namespace deepinfer::recipe
