#include "recipe/structured_output.h"

#include "recipe/request_internal.h"

namespace deepinfer::recipe {
namespace {

using internal::Check;
using internal::Field;
using internal::Invalid;
using internal::Json;
using internal::WrongType;
using Kind = StructuredOutput::Kind;

// A schema given as an object, or as JSON text (vLLM accepts both for `json`).
Check ReadSchemaValue(const Json& v, const std::string& param, std::string* out) {
  if (v.is_object() || v.is_boolean()) {
    *out = v.dump();
    return std::nullopt;
  }
  if (v.is_string()) {
    Json parsed;
    if (internal::ParseBody(v.get_ref<const std::string&>(), &parsed)) {
      return Invalid(param, param + " must be a JSON Schema object (or its JSON text)");
    }
    *out = parsed.dump();
    return std::nullopt;
  }
  return WrongType(param, "an object", v);
}

Check ReadChoices(const Json& v, const std::string& param, std::vector<std::string>* out) {
  if (!v.is_array() || v.empty()) return Invalid(param, param + " must be a non-empty array of strings");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return WrongType(internal::Index(param, i), "a string", v[i]);
    out->push_back(v[i].get<std::string>());
  }
  return std::nullopt;
}

Check ReadText(const Json& v, const std::string& param, std::string* out) {
  if (!v.is_string()) return WrongType(param, "a string", v);
  *out = v.get<std::string>();
  return std::nullopt;
}

// One extension field (`key` of `obj`, spelled `param` in errors) into `out`; `found` counts constraints.
Check ReadExtension(const Json& obj, const char* key, const std::string& param, Kind kind, StructuredOutput* out,
                    int* found) {
  const Json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (kind == Kind::kJsonObject) {
    if (!v->is_boolean()) return WrongType(param, "a boolean", *v);
    if (!v->get<bool>()) return std::nullopt;
  }
  ++*found;
  out->kind = kind;
  out->param = param;
  switch (kind) {
    case Kind::kJsonSchema: return ReadSchemaValue(*v, param, &out->text);
    case Kind::kRegex:
    case Kind::kGrammar: return ReadText(*v, param, &out->text);
    case Kind::kChoice: return ReadChoices(*v, param, &out->choices);
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<RequestError> ReadStructuredOutput(std::string_view body, const ParsedRequest& request,
                                                 StructuredOutput* out) {
  *out = {};
  Json doc;
  if (internal::ParseBody(body, &doc)) return std::nullopt;  // the protocol parser accepted it; nothing to read
  int found = 0;
  const Conversation& c = request.conversation;
  if (c.response_format == ResponseFormat::kJsonObject || c.response_format == ResponseFormat::kJsonSchema) {
    ++found;
    const bool chat = request.protocol == Protocol::kChatCompletions;
    out->kind = c.response_format == ResponseFormat::kJsonObject ? Kind::kJsonObject : Kind::kJsonSchema;
    out->param = chat ? "response_format" : "text.format";
    out->protocol_format = true;
    if (out->kind == Kind::kJsonSchema) {
      out->param += chat ? ".json_schema.schema" : ".schema";
      out->text = c.response_schema.dump();
      // The codec checked the field's type; only its value matters here.
      const Json* holder = chat ? Field(doc, "response_format") : Field(doc, "text");
      if (holder && holder->is_object()) holder = Field(*holder, chat ? "json_schema" : "format");
      const Json* strict = holder && holder->is_object() ? Field(*holder, "strict") : nullptr;
      out->strict = strict && strict->is_boolean() && strict->get<bool>();
    }
  }
  if (request.protocol == Protocol::kMessages) {
    const Json* config = Field(doc, "output_config");
    const Json* format = config && config->is_object() ? Field(*config, "format") : nullptr;
    std::string param = "output_config.format";
    if (!format) {
      format = Field(doc, "output_format");
      param = "output_format";
    }
    if (format) {
      if (!format->is_object()) return WrongType(param, "an object", *format);
      const Json* type = Field(*format, "type");
      if (!type || !type->is_string() || *type != "json_schema") {
        return Invalid(param + ".type", param + ".type must be \"json_schema\"");
      }
      const Json* schema = Field(*format, "schema");
      if (!schema) return Invalid(param + ".schema", param + ".schema: Field required");
      if (!schema->is_object()) return WrongType(param + ".schema", "an object", *schema);
      ++found;
      out->kind = Kind::kJsonSchema;
      out->param = param + ".schema";
      out->protocol_format = true;
      out->text = schema->dump();
      // Anthropic's structured outputs are strict: no members beyond the schema's.
      out->strict = true;
    }
  }
  if (const Json* so = Field(doc, "structured_outputs")) {
    if (!so->is_object()) return WrongType("structured_outputs", "an object", *so);
    DI_REQ_CHECK(ReadExtension(*so, "json", "structured_outputs.json", Kind::kJsonSchema, out, &found));
    DI_REQ_CHECK(ReadExtension(*so, "regex", "structured_outputs.regex", Kind::kRegex, out, &found));
    DI_REQ_CHECK(ReadExtension(*so, "choice", "structured_outputs.choice", Kind::kChoice, out, &found));
    DI_REQ_CHECK(ReadExtension(*so, "grammar", "structured_outputs.grammar", Kind::kGrammar, out, &found));
    DI_REQ_CHECK(ReadExtension(*so, "json_object", "structured_outputs.json_object", Kind::kJsonObject, out, &found));
  }
  DI_REQ_CHECK(ReadExtension(doc, "guided_json", "guided_json", Kind::kJsonSchema, out, &found));
  DI_REQ_CHECK(ReadExtension(doc, "guided_regex", "guided_regex", Kind::kRegex, out, &found));
  DI_REQ_CHECK(ReadExtension(doc, "guided_choice", "guided_choice", Kind::kChoice, out, &found));
  DI_REQ_CHECK(ReadExtension(doc, "guided_grammar", "guided_grammar", Kind::kGrammar, out, &found));
  if (found > 1) {
    return Invalid(out->param, "only one structured-output constraint per request (response_format, "
                               "output_config.format, structured_outputs or guided_*)");
  }
  return std::nullopt;
}

std::optional<RequestError> ParseCompletionsConstraint(std::string_view body, ParsedRequest* out) {
  *out = {};
  out->protocol = Protocol::kChatCompletions;
  out->conversation.thinking_mode = false;  // a raw prompt is continued: no reasoning block precedes the output
  Json doc;
  if (internal::ParseBody(body, &doc)) return std::nullopt;  // the Completions parser reports a malformed body
  return internal::ParseResponseFormat(doc, &out->conversation);
}

}  // namespace deepinfer::recipe
