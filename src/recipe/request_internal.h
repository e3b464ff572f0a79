// Helpers shared by the three request parsers (not part of the public interface).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "recipe/request.h"

namespace deepinfer::recipe::internal {

using Json = nlohmann::ordered_json;

// An optional error: empty means success.
using Check = std::optional<RequestError>;

#define DI_REQ_CHECK(expr)          \
  do {                              \
    ::deepinfer::recipe::internal::Check di_check_ = (expr); \
    if (di_check_) return di_check_; \
  } while (0)

inline RequestError Invalid(std::string param, std::string message) {
  return RequestError{400, "invalid_request_error", std::move(param), std::move(message)};
}

// Parses the body into a JSON object as the oracle's serde_json reads it (ParseSerdeJson); rejects
// non-objects and nesting deeper than kMaxJsonDepth (serde's own limit).
inline constexpr int kMaxJsonDepth = 128;
Check ParseBody(std::string_view body, Json* out);

// Whether any message mentions "json" (any case): json_object mode requires it, as the official API does.
bool ContainsJsonWord(const Conversation& c);

// Parses the body as JSON and hands it to one protocol's `parse`; either error becomes the outcome's.
using ProtocolParser = Check (*)(const Json& body, const RequestOptions& options, ParsedRequest* request);
ParseOutcome ParseWith(ProtocolParser parse, std::string_view body_text, const RequestOptions& options);

std::string_view TypeName(const Json& value);  // "string", "number", "object", ...
RequestError WrongType(const std::string& param, std::string_view expected, const Json& got);

// Typed field readers: absent or null leaves *out untouched and succeeds; a wrong type is an error.
Check ReadString(const Json& obj, const char* key, const std::string& path, std::optional<std::string>* out);
Check ReadBool(const Json& obj, const char* key, const std::string& path, std::optional<bool>* out);
Check ReadInt(const Json& obj, const char* key, const std::string& path, std::optional<int64_t>* out);
Check ReadNumber(const Json& obj, const char* key, const std::string& path, std::optional<double>* out);
const Json* Field(const Json& obj, const char* key);  // nullptr when absent or null

std::string Join(const std::string& path, std::string_view key);  // "a" + "b" → "a.b"
std::string Index(const std::string& path, size_t i);             // "a" + 2 → "a[2]"

// The message field of deepinfer's task extension (conversation.h MessageTask).
inline constexpr const char* kTaskField = "deepinfer_task";

// A stop sequence: empty strings are rejected, as the API does.
Check CheckStopString(const std::string& stop, const std::string& param);

// A response format's json_schema `schema`: checked as every schema is, rewritten when strict.
Check ReadResponseSchema(const Json& schema, bool strict, const std::string& param, Json* out);

// Chat Completions' `response_format` (text, json_object or json_schema) into c->response_format and
// c->response_schema; the legacy Completions API reads the same field the same way.
Check ParseResponseFormat(const Json& body, Conversation* c);

// Common range checks (deepseek-recipe's messages).
Check CheckTemperature(const std::optional<double>& t, const std::string& param);
Check CheckTopP(const std::optional<double>& p, const std::string& param);
Check CheckMaxTokens(const std::optional<int64_t>& n, int64_t upper, const std::string& param);

// Thinking mode and effort from a protocol's spelling of them.
std::optional<ReasoningEffort> EffortFromName(std::string_view name, bool* disables_thinking, bool* known);
// obj[key] as an effort name (absent or null leaves both outputs untouched); an unknown name is an error
// naming path.key. *disables_thinking is set true for "none".
Check ReadEffort(const Json& obj, const char* key, const std::string& path, std::optional<ReasoningEffort>* effort,
                 bool* disables_thinking);

// The `strict: true` rewrite of a schema as deepseek-recipe reads it (schema_checks.cpp): each type keeps its
// own keywords, every object schema gets additionalProperties false and all of its properties required (a
// `required` list naming a different set is an error). Errors carry the oracle's messages.
// kToolCallGrammar: the tool-parameters rewrite that also keeps the length and count bounds (minLength,
// maxLength, minItems, maxItems) the oracle drops from the prompt, so the tool-call grammar holds the
// arguments to the bounds the client sent, as response_format does. kImplicitToolCallGrammar: the same for a
// Responses tool without `strict` (OpenAI normalizes it into strict mode where it can): a `required` list
// naming only some properties is no error, every property becomes required all the same.
enum class StrictSchemaUse { kToolParameters, kResponseFormat, kToolCallGrammar, kImplicitToolCallGrammar };
Check NormalizeStrictSchema(const Json& schema, StrictSchemaUse use, const std::string& param, Json* out);
// The meta-schema's rules for the keywords a schema uses (types, counts, bounds, subschema shapes), as
// deepseek-recipe checks every schema it is given; `message_prefix` names the schema in the message.
Check CheckSchemaKeywords(const Json& schema, const std::string& message_prefix, const std::string& param);
// A tool's parameters: an object schema whose keywords pass CheckSchemaKeywords.
Check CheckToolParameters(const ToolDefinition& tool, const std::string& param, bool strict_rewritten = true);
// Strict and non-strict tools cannot be mixed.
Check CheckStrictConsistency(const std::vector<ToolDefinition>& tools, const std::string& path);
// Function names match ^[a-zA-Z0-9_-]+$.
Check CheckToolName(const std::string& name, const std::string& path);

// An image URL (data: or http(s)) as an image source; nullopt when it is neither.
std::optional<ImageSource> ImageFromUrl(const std::string& url, const std::string& detail, const std::string& path);

// The text an image part becomes in the message: a placeholder where the model reads images.
std::string_view ImagePartText(const RequestOptions& options);

// The tools the model sees, the way deepseek-recipe chooses them for every protocol: tool_choice "none"
// drops them; every remaining tool's schema is checked (strict ones rewritten), whichever a named
// tool_choice then narrows them to. The oracle checks this before the sampling settings.
Check ChooseTools(ParsedRequest* request, std::optional<std::string> named_tool, const std::string& tool_choice_param);
// Finishes the conversation the way deepseek-recipe does for every protocol: thinking-mode reasoning
// defaults, temperature in thinking mode, top_p's default.
void FinishConversation(ParsedRequest* request);

// The settings a Responses object repeats (deepseek-recipe's ResponsesRequest.echo()), from a valid body.
ResponsesEcho ResponsesEchoFromBody(const Json& body);

}  // namespace deepinfer::recipe::internal
