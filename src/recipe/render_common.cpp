// Helpers shared by the prompt renderers: tool schema lines, tool-call arguments, response-format text.
#include <charconv>
#include <cmath>

#include "core/json.h"
#include "core/py_json.h"
#include "recipe/response_json.h"
#include "recipe/render_internal.h"

namespace deepinfer::recipe {

// deepseek-recipe writes numbers the way its Rust JSON writer does: shortest round-trip digits laid out
// like ryu (fixed notation while the decimal point sits within 16 digits, down to 0.0000ddd), with an
// explicit "+" on positive exponents. Python's repr differs (1e-05 vs 0.00001, 1e+16 vs 1e+16 agree, 1e-07
// vs 1e-7), and the oracle wins.
std::string RecipeFloatRepr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exponent = std::stoi(sci.substr(e + 1));
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int length = static_cast<int>(digits.size());
  const int kk = exponent + 1;  // value = 0.DIGITS × 10^kk
  if (length <= kk && kk <= 16) {
    out += digits + std::string(kk - length, '0') + ".0";
  } else if (0 < kk && kk <= 16) {
    out += digits.substr(0, kk) + "." + digits.substr(kk);
  } else if (-5 < kk && kk <= 0) {
    out += "0." + std::string(-kk, '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (length > 1) out += "." + digits.substr(1);
    out += exponent < 0 ? "e-" : "e+";
    out += std::to_string(exponent < 0 ? -exponent : exponent);
  }
  return out;
}

namespace {

void AppendRecipeJson(std::string& out, const nlohmann::ordered_json& v) {
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        PyJsonAppendString(out, it.key());
        out += ": ";
        AppendRecipeJson(out, *it);
      }
      out += '}';
      break;
    }
    case nlohmann::ordered_json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        AppendRecipeJson(out, v[i]);
      }
      out += ']';
      break;
    }
    case nlohmann::ordered_json::value_t::string: PyJsonAppendString(out, v.get_ref<const std::string&>()); break;
    case nlohmann::ordered_json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case nlohmann::ordered_json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); break;
    case nlohmann::ordered_json::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
    case nlohmann::ordered_json::value_t::number_float: out += RecipeFloatRepr(v.get<double>()); break;
    default: out += "null"; break;
  }
}

}  // namespace

std::string RecipeJsonDumps(const nlohmann::ordered_json& value, bool python_floats) {
  if (python_floats) return PyJsonDumps(value);
  std::string out;
  AppendRecipeJson(out, value);
  return out;
}

std::string ToolSchemaLine(const ToolDefinition& tool, bool python_floats) {
  nlohmann::ordered_json line = nlohmann::ordered_json::object();
  line["name"] = tool.name;
  line["description"] = tool.description.value_or("");
  line["parameters"] = tool.parameters.is_null() ? nlohmann::ordered_json::object() : tool.parameters;
  return RecipeJsonDumps(line, python_floats);
}

Result<nlohmann::ordered_json> ParseToolArguments(std::string_view arguments, bool serde_numbers) {
  // The client's text, parsed with a depth bound and without recursion on its depth (it is inside a
  // string of the body, which bounded only the body's own depth).
  Result<nlohmann::ordered_json> parsed = serde_numbers ? ParseSerdeJson(arguments) : ParseOrderedJson(arguments);
  if (!parsed.ok()) return Status::InvalidArgument("tool call arguments are not valid JSON: " + parsed.status().message());
  if (!parsed->is_object()) return Status::InvalidArgument("tool call arguments are not a JSON object");
  return parsed;
}

std::string ResponseFormatText(const Conversation& c, bool v41) {
  switch (c.response_format) {
    case ResponseFormat::kText: return {};
    case ResponseFormat::kJsonObject:
      if (v41) {
        return "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
               "{\"type\": \"json_object\"}";
      }
      return "\n\nYou are a helpful assistant designed to output JSON.\n## Response Format:\n\nReply with JSON "
             "object ONLY.";
    case ResponseFormat::kJsonSchema:
      return "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n" +
             RecipeJsonDumps(c.response_schema, v41);
    case ResponseFormat::kRegex:
      return "\n\n## Response Format:\n\nYou MUST strictly adhere to the following regular expression to reply:\n" +
             c.response_regex;
  }
  return {};
}

void AppendTemplate(PromptBuilder& builder, std::string_view text, const DsmlTagNames& tags) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find('{', pos);
    if (open == std::string_view::npos) break;
    const size_t close = text.find('}', open);
    if (close == std::string_view::npos) break;
    const std::string_view name = text.substr(open + 1, close - open - 1);
    builder.Text(text.substr(pos, open - pos));
    if (name == "D") builder.Special(SpecialToken::kDsml);
    else if (name == "TS") builder.Special(SpecialToken::kThinkingStart);
    else if (name == "TE") builder.Special(SpecialToken::kThinkingEnd);
    else if (name == "calls") builder.Text(tags.calls);
    else if (name == "invoke") builder.Text(tags.invoke);
    else if (name == "parameter") builder.Text(tags.parameter);
    else builder.Text(text.substr(open, close + 1 - open));
    pos = close + 1;
  }
  builder.Text(text.substr(pos));
}

}  // namespace deepinfer::recipe
