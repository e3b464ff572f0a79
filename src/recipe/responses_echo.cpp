// The request settings an OpenAI Responses object repeats, read from the request body the way
// deepseek-recipe 0.2.0's `ResponsesRequest.echo()` reads them: each setting re-serialized from its typed
// form (so absent optional fields appear as null, unknown fields disappear, and temperature and top_p are
// 32-bit floats), built-in tools the oracle drops (`apply_patch`, `web_search_preview`) left out. It
// echoes neither metadata, store, parallel_tool_calls nor previous_response_id: the oracle reports
// their defaults whatever the request said.
#include "recipe/request_internal.h"
#include "recipe/response_json.h"

#include "core/py_json.h"

namespace deepinfer::recipe::internal {
namespace {

std::string StringOrNull(const Json& obj, const char* key) {
  const Json* value = Field(obj, key);
  return value && value->is_string() ? PyJsonString(value->get_ref<const std::string&>(), false) : "null";
}

std::string ValueOrNull(const Json& obj, const char* key) {
  const Json* value = Field(obj, key);
  return value ? SerdeJsonDumps(*value) : "null";
}

std::string Float32OrDefault(const Json& obj, const char* key) {
  const Json* value = Field(obj, key);
  if (!value || !value->is_number()) return "1.0";
  std::string out;
  SerdeJsonAppendFloat32(out, static_cast<float>(value->get<double>()));
  return out;
}

std::string FunctionToolEcho(const Json& tool) {
  return "{\"type\":\"function\",\"name\":" + StringOrNull(tool, "name") +
         ",\"description\":" + StringOrNull(tool, "description") + ",\"parameters\":" +
         ValueOrNull(tool, "parameters") + ",\"strict\":" + ValueOrNull(tool, "strict") + "}";
}

std::string WebSearchToolEcho(const std::string& type, const Json& tool) {
  std::string location = "null";
  if (const Json* where = Field(tool, "user_location"); where && where->is_object()) {
    location = "{\"city\":" + StringOrNull(*where, "city") + ",\"country\":" + StringOrNull(*where, "country") +
               ",\"region\":" + StringOrNull(*where, "region") + ",\"timezone\":" +
               StringOrNull(*where, "timezone") + "}";
  }
  return "{\"type\":" + PyJsonString(type, false) + ",\"search_context_size\":" +
         StringOrNull(tool, "search_context_size") + ",\"user_location\":" + location + "}";
}

std::string ToolsEcho(const Json& body) {
  const Json* tools = Field(body, "tools");
  if (!tools || !tools->is_array()) return "[]";
  std::string out = "[";
  for (const Json& tool : *tools) {
    if (!tool.is_object()) continue;
    const Json* type_value = Field(tool, "type");
    const std::string type = type_value && type_value->is_string() ? type_value->get<std::string>() : "";
    std::string echo;
    if (type == "function") {
      echo = FunctionToolEcho(tool);
    } else if (type == "namespace") {
      echo = "{\"type\":\"namespace\",\"name\":" + StringOrNull(tool, "name") +
             ",\"description\":" + StringOrNull(tool, "description") + ",\"tools\":[";
      if (const Json* members = Field(tool, "tools"); members && members->is_array()) {
        for (size_t i = 0; i < members->size(); ++i) {
          if (i) echo += ',';
          echo += FunctionToolEcho((*members)[i]);
        }
      }
      echo += "]}";
    } else if (type == "custom") {
      echo = "{\"type\":\"custom\",\"name\":" + StringOrNull(tool, "name") + "}";
    } else if (type == "web_search" || type == "web_search_2025_08_26") {
      echo = WebSearchToolEcho(type, tool);
    } else {
      continue;  // apply_patch, web_search_preview: the oracle drops them before echoing
    }
    if (out.size() > 1) out += ',';
    out += echo;
  }
  return out + "]";
}

std::string ToolChoiceEcho(const Json& body) {
  const Json* choice = Field(body, "tool_choice");
  if (!choice) return "\"auto\"";
  if (choice->is_string()) return PyJsonString(choice->get_ref<const std::string&>(), false);
  if (!choice->is_object()) return "\"auto\"";
  const Json* type = Field(*choice, "type");
  const std::string t = type && type->is_string() ? type->get<std::string>() : "function";
  if (t == "function" || t == "custom") {
    return "{\"type\":" + PyJsonString(t, false) + ",\"name\":" + StringOrNull(*choice, "name") + "}";
  }
  return "{\"type\":" + PyJsonString(t, false) + "}";
}

std::string TextEcho(const Json& body) {
  std::string format = "{\"type\":\"text\"}";
  std::string verbosity = "null";
  if (const Json* text = Field(body, "text"); text && text->is_object()) {
    verbosity = StringOrNull(*text, "verbosity");
    if (const Json* f = Field(*text, "format"); f && f->is_object()) {
      const Json* type = Field(*f, "type");
      const std::string t = type && type->is_string() ? type->get<std::string>() : "text";
      if (t == "json_object") {
        format = "{\"type\":\"json_object\"}";
      } else if (t == "json_schema") {
        format = "{\"type\":\"json_schema\",\"name\":" + StringOrNull(*f, "name") + ",\"schema\":" +
                 ValueOrNull(*f, "schema") + ",\"description\":" + StringOrNull(*f, "description") +
                 ",\"strict\":" + ValueOrNull(*f, "strict") + "}";
      }
    }
  }
  return "{\"format\":" + format + ",\"verbosity\":" + verbosity + "}";
}

}  // namespace

ResponsesEcho ResponsesEchoFromBody(const Json& body) {
  ResponsesEcho echo;
  echo.instructions = StringOrNull(body, "instructions");
  if (const Json* n = Field(body, "max_output_tokens"); n && n->is_number_integer()) {
    echo.max_output_tokens = SerdeJsonDumps(*n);
  }
  echo.temperature = Float32OrDefault(body, "temperature");
  echo.top_p = Float32OrDefault(body, "top_p");
  if (const Json* n = Field(body, "top_logprobs"); n && n->is_number_integer()) echo.top_logprobs = SerdeJsonDumps(*n);
  echo.user = StringOrNull(body, "user");
  if (const Json* reasoning = Field(body, "reasoning"); reasoning && reasoning->is_object()) {
    echo.reasoning = "{\"effort\":" + StringOrNull(*reasoning, "effort") +
                     ",\"summary\":" + StringOrNull(*reasoning, "summary") + "}";
  }
  echo.text = TextEcho(body);
  echo.tool_choice = ToolChoiceEcho(body);
  echo.tools = ToolsEcho(body);
  return echo;
}

}  // namespace deepinfer::recipe::internal
