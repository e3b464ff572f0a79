// Shared request-parsing helpers, error bodies and the protocol dispatcher.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/json.h"
#include "recipe/response_json.h"
#include "recipe/request_internal.h"

namespace deepinfer::recipe {

std::string ErrorBody(Protocol protocol, const RequestError& error) {
  nlohmann::ordered_json body;
  if (protocol == Protocol::kMessages) {
    body["type"] = "error";
    body["error"]["type"] = error.type;
    // Anthropic's messages name the parameter in the text ("messages.0.content: Field required").
    const bool names_param = error.param.empty() || error.message.rfind(error.param, 0) == 0;
    body["error"]["message"] = names_param ? error.message : error.param + ": " + error.message;
  } else {
    body["error"]["message"] = error.message;
    body["error"]["type"] = error.type;
    // param names the offending parameter as the OpenAI API does (deepseek-recipe always writes null there
    // and puts the path in the message, which ours do too where it does); code repeats the type, as the
    // oracle writes it.
    body["error"]["param"] = error.param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(error.param);
    body["error"]["code"] = error.type;
  }
  return body.dump();
}

ParseOutcome ParseRequest(Protocol protocol, std::string_view body, const RequestOptions& options) {
  switch (protocol) {
    case Protocol::kChatCompletions: return ParseChatCompletionsRequest(body, options);
    case Protocol::kResponses: return ParseResponsesRequest(body, options);
    case Protocol::kMessages: return ParseMessagesRequest(body, options);
  }
  return {std::nullopt, internal::Invalid("", "unknown protocol")};
}

namespace internal {

bool ContainsJsonWord(const Conversation& c) {
  for (const Message& m : c.messages) {
    std::string lower = m.content;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (lower.find("json") != std::string::npos) return true;
  }
  return false;
}

ParseOutcome ParseWith(ProtocolParser parse, std::string_view body_text, const RequestOptions& options) {
  ParseOutcome outcome;
  Json body;
  if (Check error = ParseBody(body_text, &body)) {
    outcome.error = std::move(*error);
    return outcome;
  }
  ParsedRequest request;
  if (Check error = parse(body, options, &request)) {
    outcome.error = std::move(*error);
    return outcome;
  }
  outcome.request = std::move(request);
  return outcome;
}

Check ParseBody(std::string_view body, Json* out) {
  if (JsonTextDepth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return Invalid("", "request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  Result<Json> parsed = ParseSerdeJson(body);
  if (!parsed.ok()) {
    return Invalid("", "We could not parse the JSON body of your request. The body must be valid JSON.");
  }
  *out = std::move(parsed).value();
  if (!out->is_object()) return Invalid("", "the request body must be a JSON object");
  return std::nullopt;
}

std::string_view TypeName(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

RequestError WrongType(const std::string& param, std::string_view expected, const Json& got) {
  return Invalid(param, "Invalid type for '" + param + "': expected " + std::string(expected) + ", but got " +
                            std::string(TypeName(got)) + ".");
}

const Json* Field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Check ReadString(const Json& obj, const char* key, const std::string& path, std::optional<std::string>* out) {
  const Json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) return WrongType(Join(path, key), "a string", *v);
  *out = v->get<std::string>();
  return std::nullopt;
}

Check ReadBool(const Json& obj, const char* key, const std::string& path, std::optional<bool>* out) {
  const Json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return WrongType(Join(path, key), "a boolean", *v);
  *out = v->get<bool>();
  return std::nullopt;
}

Check ReadInt(const Json& obj, const char* key, const std::string& path, std::optional<int64_t>* out) {
  const Json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return Invalid(Join(path, key), "integer is too large");
    *out = static_cast<int64_t>(u);
    return std::nullopt;
  }
  if (v->is_number_integer()) {
    *out = v->get<int64_t>();
    return std::nullopt;
  }
  return WrongType(Join(path, key), "an integer", *v);
}

Check ReadNumber(const Json& obj, const char* key, const std::string& path, std::optional<double>* out) {
  const Json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) return WrongType(Join(path, key), "a number", *v);
  *out = v->get<double>();
  return std::nullopt;
}

std::string Join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string Index(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

Check CheckStopString(const std::string& stop, const std::string& param) {
  if (stop.empty()) {
    return Invalid(param, "Invalid '" + param +
                              "': empty string. Expected a string with minimum length 1, but got an empty string "
                              "instead.");
  }
  return std::nullopt;
}

Check ReadResponseSchema(const Json& schema, bool strict, const std::string& param, Json* out) {
  if (strict) {
    // deepseek-recipe checks a strict response format the way it reads strict tool schemas, but the prompt
    // shows the schema as the client wrote it.
    Json normalized;
    DI_REQ_CHECK(NormalizeStrictSchema(schema, StrictSchemaUse::kResponseFormat, param, &normalized));
  } else {
    DI_REQ_CHECK(CheckSchemaKeywords(schema, "Invalid json schema: ", param));
  }
  *out = schema;
  return std::nullopt;
}

// deepseek-recipe reads sampling settings as 32-bit floats and checks the rounded value: 2.0000001 is 2.0f
// and passes, 1e-46 is 0.0f and is no valid top_p.
Check CheckTemperature(const std::optional<double>& t, const std::string& param) {
  const float f = t ? static_cast<float>(*t) : 0.0f;
  if (t && !(f >= 0.0f && f <= 2.0f)) {
    return Invalid(param, "Invalid temperature value, the valid range of temperature is [0, 2]");
  }
  return std::nullopt;
}

Check CheckTopP(const std::optional<double>& p, const std::string& param) {
  const float f = p ? static_cast<float>(*p) : 0.0f;
  if (p && !(f > 0.0f && f <= 1.0f)) return Invalid(param, "Invalid top_p value, the valid range of top_p is (0, 1.0]");
  return std::nullopt;
}

Check CheckMaxTokens(const std::optional<int64_t>& n, int64_t upper, const std::string& param) {
  if (n && (*n < 1 || *n > upper)) {
    return Invalid(param, "Invalid " + param + " value, the valid range of " + param + " is [1, " +
                              std::to_string(upper) + "]");
  }
  return std::nullopt;
}

std::optional<ReasoningEffort> EffortFromName(std::string_view name, bool* disables_thinking, bool* known) {
  *disables_thinking = false;
  *known = true;
  if (name == "none") {
    *disables_thinking = true;
    return std::nullopt;
  }
  if (name == "minimal" || name == "low") return ReasoningEffort::kLow;
  if (name == "medium" || name == "high") return ReasoningEffort::kHigh;
  if (name == "xhigh") return ReasoningEffort::kXHigh;
  if (name == "ultra" || name == "max") return ReasoningEffort::kMax;
  *known = false;
  return std::nullopt;
}

Check ReadEffort(const Json& obj, const char* key, const std::string& path, std::optional<ReasoningEffort>* effort,
                 bool* disables_thinking) {
  std::optional<std::string> name;
  DI_REQ_CHECK(ReadString(obj, key, path, &name));
  if (!name) return std::nullopt;
  bool known = false;
  *effort = EffortFromName(*name, disables_thinking, &known);
  if (!known) {
    return Invalid(Join(path, key), "Invalid value: '" + *name +
                                        "'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high', "
                                        "'xhigh', 'ultra' and 'max'.");
  }
  return std::nullopt;
}

Check CheckStrictConsistency(const std::vector<ToolDefinition>& tools, const std::string& path) {
  bool any_strict = false, any_loose = false;
  for (const ToolDefinition& tool : tools) (tool.strict.value_or(false) ? any_strict : any_loose) = true;
  if (any_strict && any_loose) return Invalid(path, "Cannot use strict tool with non-strict tool in the same request");
  return std::nullopt;
}

Check CheckToolName(const std::string& name, const std::string& path) {
  bool valid = !name.empty();
  for (char ch : name) {
    valid = valid && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-');
  }
  if (!valid) {
    return Invalid(path, "Invalid '" + path +
                             "': string does not match pattern. Expected a string that matches the pattern "
                             "'^[a-zA-Z0-9_-]+$'.");
  }
  return std::nullopt;
}

std::optional<ImageSource> ImageFromUrl(const std::string& url, const std::string& detail, const std::string& path) {
  ImageSource source;
  source.url = url;
  source.detail = detail.empty() ? "high" : detail;
  source.path = path;
  if (url.rfind("data:", 0) == 0) {
    source.kind = ImageSource::Kind::kDataUrl;
  } else if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) {
    source.kind = ImageSource::Kind::kUrl;
  } else {
    return std::nullopt;
  }
  return source;
}

std::string_view ImagePartText(const RequestOptions& options) {
  return options.model_version == ModelVersion::kV41 ? kImageToken : std::string_view("[Unsupported Image]");
}

namespace {

// Tool by tool, in request order: the name is unique (a hash set: linear in the number of tools), strict
// schemas are rewritten (NormalizeStrictSchema), the others' are checked as written. (deepseek-recipe
// accepts a Responses namespace member and a function tool that flatten to one name; deepinfer does not:
// tests/recipe/data/render/deviations.json.) Anthropic's strict tools keep their schema as written:
// deepseek-recipe reads no `strict` there, so the prompt stays its render, and the grammar then holds the
// calls to the schema the caller gave. Each strict tool's call_schema is its rewrite with the length and
// count bounds kept. A Responses function tool without `strict` is strict when its schema can be rewritten
// (OpenAI's Responses default: normalized into strict mode where possible, best-effort otherwise); its
// prompt stays the oracle's, which reads it as non-strict.
Check CheckToolSchemas(Conversation& c, Protocol protocol) {
  const bool rewrite_strict = protocol != Protocol::kMessages;
  std::unordered_set<std::string_view> names;
  for (size_t i = 0; i < c.tools.size(); ++i) {
    ToolDefinition& tool = c.tools[i];
    if (!names.insert(tool.name).second) return Invalid(Index("tools", i), "Tool names must be unique.");
    const Json raw = tool.parameters.is_null() ? Json{{"type", "object"}, {"properties", Json::object()}}
                                               : tool.parameters;
    if (!tool.strict.value_or(false) || !rewrite_strict) {
      if (!tool.custom) DI_REQ_CHECK(CheckToolParameters(tool, "tools", /*strict_rewritten=*/rewrite_strict));
      if (tool.strict.value_or(false)) {
        tool.call_schema = raw;
      } else if (protocol == Protocol::kResponses && !tool.strict && !tool.custom) {
        Json rewritten;
        if (!NormalizeStrictSchema(raw, StrictSchemaUse::kImplicitToolCallGrammar, "tools", &rewritten)) {
          tool.call_schema = std::move(rewritten);
        }
      }
      continue;
    }
    DI_REQ_CHECK(NormalizeStrictSchema(raw, StrictSchemaUse::kToolParameters, "tools", &tool.parameters));
    DI_REQ_CHECK(NormalizeStrictSchema(raw, StrictSchemaUse::kToolCallGrammar, "tools", &tool.call_schema));
  }
  return std::nullopt;
}

}  // namespace

Check ChooseTools(ParsedRequest* request, std::optional<std::string> named_tool, const std::string& tool_choice_param) {
  Conversation& c = request->conversation;
  if (c.tool_choice == ToolChoice::kNone) c.tools.clear();
  DI_REQ_CHECK(CheckToolSchemas(c, request->protocol));
  if (named_tool) {
    std::vector<ToolDefinition> kept;
    for (ToolDefinition& tool : c.tools) {
      if (tool.name == *named_tool) kept.push_back(std::move(tool));
    }
    if (kept.empty()) {
      return Invalid(tool_choice_param, "Tool choice names a function that is not in tools: " + *named_tool);
    }
    c.tools = std::move(kept);
    c.tool_choice = ToolChoice::kRequired;
  }
  if (c.tool_choice == ToolChoice::kNone) c.tools.clear();
  if (c.tools.empty() && c.tool_choice == ToolChoice::kRequired) c.tool_choice = ToolChoice::kAuto;
  return std::nullopt;
}

void FinishConversation(ParsedRequest* request) {
  Conversation& c = request->conversation;
  if (c.thinking_mode) {
    if (!c.reasoning_effort) c.reasoning_effort = ReasoningEffort::kHigh;
    for (Message& m : c.messages) {
      if (m.role == Role::kAssistant && !m.reasoning_content) m.reasoning_content = "";
    }
    request->inference.temperature = 1.0;
  } else {
    c.reasoning_effort.reset();
    if (!request->inference.temperature) request->inference.temperature = 1.0;
  }
  if (!request->inference.top_p) request->inference.top_p = 1.0;
}

}  // namespace internal
}  // namespace deepinfer::recipe
