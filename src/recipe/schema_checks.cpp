// JSON Schemas from requests (tool parameters, response formats): the strict-mode rewrite and the keyword
// checks deepseek-recipe applies, with its messages.
//
// Strict mode reads a schema as a typed value, the way deepseek-recipe's serde model does: a schema is a
// typed node ({"type": T, ...}), a type list of scalar names, an anyOf of typed nodes, or a $ref. Each
// type keeps only its keywords, in a fixed order (string: description, pattern, format, enum; integer and
// number: description, const, default, minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf;
// array: items, description; object: properties, additionalProperties false, required = every property,
// description); every other keyword is dropped. The walk recurses once per schema level; schemas come from
// a request body whose depth ParseBody bounds (kMaxJsonDepth), so the recursion is bounded too.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <unordered_set>

#include "recipe/request_internal.h"

namespace deepinfer::recipe::internal {
namespace {

// Rust's Display of an f64 as serde's Unexpected::Float writes it: positional digits, never an exponent,
// always a decimal point ("1.5", "1.0", "100000000000000000000.0").
std::string RustFloat(double v) {
  char buf[512];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  std::string out(buf, res.ptr);
  // to_chars(fixed) without precision gives the shortest round-trip digits in positional form.
  if (out.find('.') == std::string::npos && out.find("inf") == std::string::npos && out.find("nan") == std::string::npos) {
    out += ".0";
  }
  return out;
}

// serde's description of an unexpected JSON value ("invalid type: <this>, expected ...").
std::string Unexpected(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return v.get<bool>() ? "boolean `true`" : "boolean `false`";
  if (v.is_number_unsigned()) return "integer `" + std::to_string(v.get<uint64_t>()) + "`";
  if (v.is_number_integer()) return "integer `" + std::to_string(v.get<int64_t>()) + "`";
  if (v.is_number_float()) return "floating point `" + RustFloat(v.get<double>()) + "`";
  if (v.is_string()) return "string " + v.dump();
  if (v.is_array()) return "sequence";
  return "map";
}

std::string ListOf(std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out.append(", ");
    out.append("`").append(n).append("`");
  }
  return out;
}

// Two passes, as the oracle's deserialize-then-validate does: the typed read of the whole schema first
// (`semantic` false: only type errors), then the rules on the values (required lists, empty objects,
// additionalProperties true).
struct StrictWalk {
  std::string prefix;  // "Invalid tool parameters schema : " or "Invalid json schema: "
  std::string param;
  bool semantic = false;
  bool keep_bounds = false;       // minLength / maxLength / minItems / maxItems survive the rewrite
  bool any_required_list = false;  // a `required` list need not name every property

  RequestError Serde(const std::string& message) const { return Invalid(param, prefix + message); }
  RequestError Plain(const std::string& message) const { return Invalid(param, message); }

  // A field read as Option<String>: null is absent.
  Check String(const Json& node, const char* key, Json* out) const {
    const auto it = node.find(key);
    if (it == node.end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) return Serde("invalid type: " + Unexpected(*it) + ", expected a string");
    (*out)[key] = *it;
    return std::nullopt;
  }

  // integer bounds are i64; number bounds keep the request's number as written.
  Check Bound(const Json& node, const char* key, bool integer, Json* out) const {
    const auto it = node.find(key);
    if (it == node.end() || it->is_null()) return std::nullopt;
    if (integer) {
      if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return Serde("invalid value: integer `" + std::to_string(it->get<uint64_t>()) + "`, expected i64");
      }
      if (!it->is_number_integer()) return Serde("invalid type: " + Unexpected(*it) + ", expected i64");
    } else if (!it->is_number()) {
      return Serde("invalid type: " + Unexpected(*it) + ", expected a JSON number");
    }
    (*out)[key] = *it;
    return std::nullopt;
  }

  // Non-negative integer bounds, copied only when the walk keeps them (other values are no bound to keep).
  void KeepBounds(const Json& node, std::initializer_list<const char*> keys, Json* out) const {
    if (!keep_bounds) return;
    for (const char* key : keys) {
      const auto it = node.find(key);
      if (it != node.end() && it->is_number_unsigned()) (*out)[key] = *it;
    }
  }

  Check Node(const Json& node, bool top_level, Json* out) const {
    if (!node.is_object()) return Serde("invalid type: " + Unexpected(node) + ", expected struct Schema");
    const auto type = node.find("type");
    if (type != node.end() && !type->is_null()) {
      if (type->is_array()) return TypeList(node, *type, out);
      if (!type->is_string()) return Serde("invalid type: " + Unexpected(*type) + ", expected variant identifier");
      return Typed(node, type->get<std::string>(), top_level, out);
    }
    const auto any_of = node.find("anyOf");
    if (any_of != node.end() && !any_of->is_null()) {
      if (!any_of->is_array()) return Serde("field `anyOf`: invalid type: " + Unexpected(*any_of) + ", expected a sequence");
      Json members = Json::array();
      for (const Json& member : *any_of) {
        if (!member.is_object()) return Serde("field `anyOf`: invalid type: " + Unexpected(member) + ", expected struct TypedSchema");
        const auto t = member.find("type");
        if (t == member.end() || t->is_null()) return Serde("field `anyOf`: missing field `type`");
        if (!t->is_string()) return Serde("field `anyOf`: invalid type: " + Unexpected(*t) + ", expected variant identifier");
        Json normalized;
        DI_REQ_CHECK(Typed(member, t->get<std::string>(), false, &normalized));
        members.push_back(std::move(normalized));
      }
      *out = Json::object();
      (*out)["anyOf"] = std::move(members);
      return String(node, "description", out);  // a default (null or not) is dropped
    }
    const auto ref = node.find("$ref");
    if (ref != node.end() && !ref->is_null()) {
      if (!ref->is_string()) return Serde("field `$ref`: invalid type: " + Unexpected(*ref) + ", expected a string");
      *out = Json::object();
      (*out)["$ref"] = *ref;
      return std::nullopt;
    }
    return Serde("one of `type`, `anyOf`, `$ref` field is required");
  }

  Check TypeList(const Json& node, const Json& types, Json* out) const {
    for (const Json& t : types) {
      if (!t.is_string()) return Serde("field `type`: invalid type: " + Unexpected(t) + ", expected variant identifier");
      const std::string name = t.get<std::string>();
      if (name != "string" && name != "number" && name != "integer" && name != "boolean" && name != "null") {
        return Serde("field `type`: unknown variant `" + name + "`, expected one of " +
                     ListOf({"string", "number", "integer", "boolean", "null"}));
      }
    }
    *out = Json::object();
    (*out)["type"] = types;
    return String(node, "description", out);
  }

  Check Typed(const Json& node, const std::string& type, bool top_level, Json* out) const {
    *out = Json::object();
    (*out)["type"] = type;
    if (type == "string") {
      DI_REQ_CHECK(String(node, "description", out));
      DI_REQ_CHECK(String(node, "pattern", out));
      const auto format = node.find("format");
      if (format != node.end() && !format->is_null()) {
        if (!format->is_string()) return Serde("invalid type: " + Unexpected(*format) + ", expected variant identifier");
        const std::string f = format->get<std::string>();
        if (f != "email" && f != "hostname" && f != "ipv4" && f != "ipv6" && f != "uuid") {
          return Serde("unknown variant `" + f + "`, expected one of " + ListOf({"email", "hostname", "ipv4", "ipv6", "uuid"}));
        }
        (*out)["format"] = *format;
      }
      const auto values = node.find("enum");
      if (values != node.end() && !values->is_null()) {
        if (!values->is_array()) return Serde("invalid type: " + Unexpected(*values) + ", expected a sequence");
        for (const Json& v : *values) {
          if (!v.is_string()) return Serde("invalid type: " + Unexpected(v) + ", expected a string");
        }
        (*out)["enum"] = *values;
      }
      KeepBounds(node, {"minLength", "maxLength"}, out);
      return std::nullopt;
    }
    if (type == "integer" || type == "number") {
      DI_REQ_CHECK(String(node, "description", out));
      for (const char* key : {"const", "default", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}) {
        DI_REQ_CHECK(Bound(node, key, type == "integer", out));
      }
      return std::nullopt;
    }
    if (type == "boolean" || type == "null") return String(node, "description", out);
    if (type == "array") {
      const auto items = node.find("items");
      if (items == node.end()) return Serde("missing field `items`");
      Json normalized;
      if (items->is_null()) return Serde("one of `type`, `anyOf`, `$ref` field is required");
      DI_REQ_CHECK(Node(*items, false, &normalized));
      (*out)["items"] = std::move(normalized);
      KeepBounds(node, {"minItems", "maxItems"}, out);
      return String(node, "description", out);
    }
    if (type == "object") return Object(node, top_level, out);
    return Serde("unknown variant `" + type + "`, expected one of " +
                 ListOf({"object", "string", "number", "integer", "boolean", "array", "null"}));
  }

  Check Object(const Json& node, bool top_level, Json* out) const {
    Json props = Json::object();
    const auto properties = node.find("properties");
    if (properties != node.end() && !properties->is_null()) {
      if (!properties->is_object()) return Serde("invalid type: " + Unexpected(*properties) + ", expected a map");
      for (auto p = properties->begin(); p != properties->end(); ++p) {
        Json normalized;
        DI_REQ_CHECK(Node(*p, false, &normalized));
        props[p.key()] = std::move(normalized);
      }
    }
    const auto additional = node.find("additionalProperties");
    if (additional != node.end() && !additional->is_null() && !additional->is_boolean()) {
      return Serde("invalid type: " + Unexpected(*additional) + ", expected a boolean");
    }
    const auto required = node.find("required");
    std::vector<std::string> required_names;
    const bool has_required = required != node.end() && !required->is_null();
    if (has_required) {
      if (!required->is_array()) return Serde("invalid type: " + Unexpected(*required) + ", expected a sequence");
      for (const Json& r : *required) {
        if (!r.is_string()) return Serde("invalid type: " + Unexpected(r) + ", expected a string");
        required_names.push_back(r.get<std::string>());
      }
    }
    Json description = Json::object();
    DI_REQ_CHECK(String(node, "description", &description));
    if (semantic && has_required && !any_required_list) {
      std::unordered_set<std::string> seen;
      for (const std::string& name : required_names) {
        if (!seen.insert(name).second) return Plain("Duplicate required property '" + name + "'");
      }
      bool same = seen.size() == props.size();
      for (auto p = props.begin(); same && p != props.end(); ++p) same = seen.count(p.key()) > 0;
      if (!same) return Plain("Required properties must match all properties in the object");
    }
    if (semantic && additional != node.end() && additional->is_boolean() && additional->get<bool>()) {
      return Plain("additionalProperties should not be true");
    }
    if (semantic && props.empty() && !top_level) return Plain("An object with no properties is not allowed.");
    Json keys = Json::array();
    for (auto p = props.begin(); p != props.end(); ++p) keys.push_back(p.key());
    (*out)["properties"] = std::move(props);
    (*out)["additionalProperties"] = false;
    (*out)["required"] = std::move(keys);
    if (description.contains("description")) (*out)["description"] = description["description"];
    return std::nullopt;
  }
};

// ---- keyword checks (a JSON Schema 2020-12 meta-schema subset) ----------------------------------------------

const std::unordered_set<std::string_view>& SimpleTypes() {
  static const std::unordered_set<std::string_view> types = {"array", "boolean", "integer", "null",
                                                             "number", "object", "string"};
  return types;
}

bool IsInteger(const Json& v) {
  if (v.is_number_integer()) return true;
  return v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>();
}

// The first keyword of `node` that the meta-schema rejects, in jsonschema's wording ("-1 is less than the
// minimum of 0"); subschemas are pushed for the caller's walk.
std::optional<std::string> KeywordError(const Json& node, std::vector<const Json*>* subschemas) {
  if (!node.is_object()) {
    if (node.is_boolean()) return std::nullopt;
    return node.dump() + " is not of types \"boolean\", \"object\"";
  }
  auto not_of_type = [](const Json& v, const char* type) { return v.dump() + " is not of type \"" + type + "\""; };
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = *it;
    if (key == "type") {
      bool ok = v.is_string() && SimpleTypes().count(v.get<std::string>());
      if (v.is_array() && !v.empty()) {
        ok = true;
        std::unordered_set<std::string> seen;
        for (const Json& t : v) ok = ok && t.is_string() && SimpleTypes().count(t.get<std::string>()) && seen.insert(t.get<std::string>()).second;
      }
      if (!ok) return v.dump() + " is not valid under any of the schemas listed in the 'anyOf' keyword";
    } else if (key == "multipleOf") {
      if (!v.is_number()) return not_of_type(v, "number");
      if (v.get<double>() <= 0) return v.dump() + " is less than or equal to the minimum of 0";
    } else if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" || key == "exclusiveMaximum") {
      if (!v.is_number()) return not_of_type(v, "number");
    } else if (key == "minLength" || key == "maxLength" || key == "minItems" || key == "maxItems" ||
               key == "minProperties" || key == "maxProperties" || key == "minContains" || key == "maxContains") {
      if (!IsInteger(v)) return not_of_type(v, "integer");
      if (v.get<double>() < 0) return v.dump() + " is less than the minimum of 0";
    } else if (key == "required") {
      if (!v.is_array()) return not_of_type(v, "array");
      std::unordered_set<std::string> seen;
      for (const Json& r : v) {
        if (!r.is_string()) return not_of_type(r, "string");
        if (!seen.insert(r.get<std::string>()).second) return v.dump() + " has non-unique elements";
      }
    } else if (key == "enum") {
      if (!v.is_array()) return not_of_type(v, "array");
    } else if (key == "uniqueItems") {
      if (!v.is_boolean()) return not_of_type(v, "boolean");
    } else if (key == "description" || key == "title" || key == "format" || key == "$ref" || key == "pattern" ||
               key == "$id" || key == "$schema" || key == "$anchor" || key == "$comment") {
      if (!v.is_string()) return not_of_type(v, "string");
    } else if (key == "properties" || key == "$defs" || key == "definitions" || key == "patternProperties" ||
               key == "dependentSchemas") {
      if (!v.is_object()) return not_of_type(v, "object");
      for (const Json& sub : v) subschemas->push_back(&sub);
    } else if (key == "dependencies") {
      if (!v.is_object()) return not_of_type(v, "object");
    } else if (key == "anyOf" || key == "allOf" || key == "oneOf" || key == "prefixItems") {
      if (!v.is_array()) return not_of_type(v, "array");
      if (v.empty()) return "[] has less than 1 item";
      for (const Json& sub : v) subschemas->push_back(&sub);
    } else if (key == "items" || key == "additionalProperties" || key == "not" || key == "contains" ||
               key == "propertyNames" || key == "if" || key == "then" || key == "else" ||
               key == "unevaluatedItems" || key == "unevaluatedProperties") {
      if (!v.is_object() && !v.is_boolean()) return v.dump() + " is not of types \"boolean\", \"object\"";
      subschemas->push_back(&v);
    }
  }
  return std::nullopt;
}

}  // namespace

Check NormalizeStrictSchema(const Json& schema, StrictSchemaUse use, const std::string& param, Json* out) {
  const bool tool = use != StrictSchemaUse::kResponseFormat;
  StrictWalk walk{tool ? "Invalid tool parameters schema : " : "Invalid json schema: ", param};
  walk.keep_bounds = use == StrictSchemaUse::kToolCallGrammar || use == StrictSchemaUse::kImplicitToolCallGrammar;
  walk.any_required_list = use == StrictSchemaUse::kImplicitToolCallGrammar;
  // Tool parameters may be an object with no properties (a tool that takes none); a response format may not.
  DI_REQ_CHECK(walk.Node(schema, tool, out));
  walk.semantic = true;
  DI_REQ_CHECK(walk.Node(schema, tool, out));
  if (out->value("type", Json()) != "object") {
    return Invalid(param, tool
                              ? "The top level of the function parameters schema must be an object."
                              : "The top level of the json schema must be an object.");
  }
  return std::nullopt;
}

Check CheckSchemaKeywords(const Json& schema, const std::string& message_prefix, const std::string& param) {
  std::vector<const Json*> stack = {&schema};
  while (!stack.empty()) {
    const Json* node = stack.back();
    stack.pop_back();
    std::vector<const Json*> subschemas;
    if (auto error = KeywordError(*node, &subschemas)) return Invalid(param, message_prefix + *error);
    for (auto it = subschemas.rbegin(); it != subschemas.rend(); ++it) stack.push_back(*it);
  }
  return std::nullopt;
}

Check CheckToolParameters(const ToolDefinition& tool, const std::string& param, bool strict_rewritten) {
  // Strict tools are checked by their rewrite instead (NormalizeStrictSchema), where there is one.
  if (tool.parameters.is_null() || (strict_rewritten && tool.strict.value_or(false))) return std::nullopt;
  const std::string prefix = "Invalid schema for function '" + tool.name + "': ";
  const auto type = tool.parameters.find("type");
  if (type == tool.parameters.end() || *type != "object") {
    const std::string got = type == tool.parameters.end() ? "null" : type->dump();
    return Invalid(param, prefix + "schema must be a JSON Schema of 'type: \"object\"', got 'type: " + got + "'.");
  }
  return CheckSchemaKeywords(tool.parameters, prefix, param);
}

}  // namespace deepinfer::recipe::internal
