#include "grammar/tool_calls.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "grammar/json_schema.h"
#include "grammar/token_index.h"

namespace deepinfer::grammar {
namespace {

using Json = nlohmann::ordered_json;

constexpr uint32_t kFullWidthBar = 0xFF5C;  // '｜', the character `｜DSML｜` is spelled with

// Keywords that say nothing about which instances are valid (the standard lets a validator ignore them).
bool IsAnnotation(const std::string& key) {
  static const std::set<std::string> kAnnotations = {"title",   "description", "$comment", "examples", "default",
                                                     "deprecated", "readOnly", "writeOnly", "$schema", "$id"};
  return kAnnotations.count(key) != 0;
}

struct Tags {
  std::string_view calls, invoke, parameter;
  bool separated;  // parameters joined by "\n" and "\n" before the invoke's end tag (V4.1, V3.2)
};

Tags TagsOf(ToolCallGrammarSpec::Dialect d) {
  switch (d) {
    case ToolCallGrammarSpec::Dialect::kV4: return {"tool_calls", "invoke", "parameter", false};
    case ToolCallGrammarSpec::Dialect::kV41: return {" calls", " invoke", " parameter", true};
    case ToolCallGrammarSpec::Dialect::kV32: return {"function_calls", "invoke", "parameter", true};
  }
  return {"tool_calls", "invoke", "parameter", false};
}

class Builder {
 public:
  explicit Builder(const ToolCallGrammarSpec& spec) : spec_(spec), tags_(TagsOf(spec.dialect)) {}

  Result<Grammar> Run() {
    const uint32_t root = g_.AddRule("root");
    if (spec_.tools.empty()) return Status::InvalidArgument("strict tool calls need at least one tool");
    std::vector<ExprId> invokes;
    for (size_t i = 0; i < spec_.tools.size(); ++i) {
      DI_ASSIGN_OR_RETURN(ExprId e, Invoke(spec_.tools[i], i));
      invokes.push_back(e);
    }
    const uint32_t invoke_rule = g_.AddRule("invoke");
    g_.Define(invoke_rule, g_.Alt(std::move(invokes)));
    const uint32_t more_max = spec_.max_calls == 0 ? kUnbounded : spec_.max_calls - 1;
    ExprId calls = g_.Seq({g_.Ref(invoke_rule), g_.Repeat(g_.Seq({g_.Literal("\n"), g_.Ref(invoke_rule)}), 0, more_max)});
    ExprId body = g_.Seq({calls, g_.Literal("\n"), EndTag(tags_.calls)});
    if (spec_.opened) {
      g_.Define(root, body);
    } else {
      ExprId open = g_.Seq({g_.Literal("\n\n"), StartTag(tags_.calls), g_.Literal(">\n")});
      if (spec_.must_call) {
        g_.Define(root, g_.Seq({open, body}));
      } else if (spec_.answer.kind == ToolCallAnswer::Kind::kText) {
        g_.Define(root, g_.Seq({RawText(), g_.Optional(g_.Seq({open, body}))}));
      } else {
        DI_ASSIGN_OR_RETURN(ExprId answer, Answer());
        g_.Define(root, g_.Alt({answer, g_.Seq({open, body})}));
      }
    }
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  ExprId Marker() { return g_.Seq({g_.Bytes({{0xFF, 0xFF}}), g_.Bytes({{0x80, 0x80}})}); }
  ExprId StartTag(std::string_view tag) { return g_.Seq({g_.Literal("<"), Marker(), g_.Literal(tag)}); }
  ExprId EndTag(std::string_view tag) { return g_.Seq({g_.Literal("</"), Marker(), g_.Literal(tag), g_.Literal(">")}); }
  // Any text that cannot spell `｜DSML｜`: every code point but U+FF5C (and the surrogates, which UTF-8
  // cannot carry).
  ExprId RawText() {
    if (raw_text_ == kNone) {
      raw_text_ = g_.Star(g_.Chars({{0, 0xD7FF}, {0xE000, kFullWidthBar - 1}, {kFullWidthBar + 1, 0x10FFFF}}));
    }
    return raw_text_;
  }

  static std::string Where(const ToolCallTool& tool) { return "tool \"" + tool.name + "\": parameters"; }

  // The answer format's JSON, as response_format alone would constrain it.
  Result<ExprId> Answer() {
    JsonSchemaOptions options;
    options.strict = spec_.answer.strict;
    Grammar answer;
    if (spec_.answer.kind == ToolCallAnswer::Kind::kJsonObject) {
      answer = JsonObjectGrammar(options);
    } else {
      auto compiled = JsonSchemaToGrammar(spec_.answer.schema, options);
      if (!compiled.ok()) return Status(compiled.status().code(), "answer format: " + compiled.status().message());
      answer = std::move(*compiled);
    }
    return g_.Ref(g_.Import(answer, "answer."));
  }

  // One parameter of any name with any value (a tool with free arguments). The name is what the output
  // parser copies between quotes into the arguments JSON, up to the space before `string=`.
  ExprId FreeParameter() {
    if (free_parameter_ != kNone) return free_parameter_;
    ExprId name = g_.Repeat(g_.Chars({{0x21, 0x21},
                                      {0x23, 0x5B},
                                      {0x5D, 0x7E},
                                      {0xA0, 0xD7FF},
                                      {0xE000, kFullWidthBar - 1},
                                      {kFullWidthBar + 1, 0x10FFFF}}),
                            1, kUnbounded);
    JsonSchemaOptions options;
    options.whitespace = JsonSchemaOptions::Whitespace::kPython;
    options.integer_fraction = false;
    auto any = JsonSchemaToGrammar("{}", options);
    ExprId json = any.ok() ? g_.Ref(g_.Import(*any, "free.")) : g_.Literal("null");
    ExprId value = g_.Alt({g_.Seq({g_.Literal("true\">"), RawText()}), g_.Seq({g_.Literal("false\">"), json})});
    const uint32_t rule = g_.AddRule("free_parameter");
    g_.Define(rule, g_.Seq({StartTag(tags_.parameter), g_.Literal(" name=\""), name, g_.Literal("\" string=\""), value,
                            EndTag(tags_.parameter)}));
    free_parameter_ = g_.Ref(rule);
    return free_parameter_;
  }

  Result<ExprId> Invoke(const ToolCallTool& tool, size_t index) {
    if (tool.name.empty() || tool.name.find_first_of("\"<>\n") != std::string::npos ||
        tool.name.find("｜") != std::string::npos) {
      return Status::InvalidArgument("tool \"" + tool.name + "\": the name cannot be written in a DSML invoke tag");
    }
    ExprId head = g_.Seq({StartTag(tags_.invoke), g_.Literal(" name=\"" + tool.name + "\">\n")});
    ExprId end = tags_.separated ? g_.Seq({g_.Literal("\n"), EndTag(tags_.invoke)}) : EndTag(tags_.invoke);
    if (tool.free_arguments) {
      const ExprId p = FreeParameter();
      ExprId list = tags_.separated
                        ? g_.Optional(g_.Seq({p, g_.Repeat(g_.Seq({g_.Literal("\n"), p}), 0, kUnbounded)}))
                        : g_.Repeat(g_.Seq({p, g_.Literal("\n")}), 0, kUnbounded);
      return g_.Seq({head, list, end});
    }
    std::vector<ExprId> params;
    std::vector<uint8_t> required;
    if (!tool.parameters.empty()) {
      auto parsed = ParseOrderedJson(tool.parameters, JsonLimits{size_t{4} << 20, 512});
      if (!parsed.ok()) return Status::InvalidArgument(Where(tool) + ": " + parsed.status().message());
      DI_RETURN_IF_ERROR(Parameters(tool, *parsed, index, &params, &required));
    }
    ExprId list;
    if (params.empty()) {
      list = g_.Empty();
    } else if (tags_.separated) {
      // SepList: the parameters in order, each present or (when optional) not, joined by "\n".
      list = g_.SepList(params, required, g_.Literal("\n"), true, false, 0, kUnbounded);
    } else {
      for (ExprId& p : params) p = g_.Seq({p, g_.Literal("\n")});
      list = g_.SepList(params, required, g_.Empty(), false, false, 0, kUnbounded);
    }
    return g_.Seq({head, list, end});
  }

  Status Parameters(const ToolCallTool& tool, const Json& schema, size_t index, std::vector<ExprId>* params,
                    std::vector<uint8_t>* required) {
    if (!schema.is_object()) return Status::InvalidArgument(Where(tool) + ": must be an object schema");
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      const std::string& key = it.key();
      if (key == "type") {
        if (!it->is_string() || *it != "object") {
          return Status::InvalidArgument(Where(tool) + ".type: must be \"object\"");
        }
      } else if (key == "additionalProperties") {
        // Anything but the listed properties is never written, which every value of it allows.
        if (!it->is_boolean() && !it->is_object()) {
          return Status::InvalidArgument(Where(tool) + ".additionalProperties: must be a boolean or a schema");
        }
      } else if (key != "properties" && key != "required" && key != "$defs" && key != "definitions" &&
                 key != "strict" && !IsAnnotation(key)) {
        return Status::Unimplemented(Where(tool) + "." + key + ": not supported at the top of a strict tool's parameters");
      }
    }
    std::set<std::string> required_names;
    if (const auto r = schema.find("required"); r != schema.end()) {
      if (!r->is_array()) return Status::InvalidArgument(Where(tool) + ".required: must be an array of strings");
      for (const Json& n : *r) {
        if (!n.is_string()) return Status::InvalidArgument(Where(tool) + ".required: must be an array of strings");
        required_names.insert(n.get<std::string>());
      }
    }
    const auto props = schema.find("properties");
    if (props == schema.end()) {
      if (!required_names.empty()) {
        return Status::InvalidArgument(Where(tool) + ".required: names \"" + *required_names.begin() +
                                       "\", which is not in properties");
      }
      return Status::Ok();
    }
    if (!props->is_object()) return Status::InvalidArgument(Where(tool) + ".properties: must be an object");
    for (const std::string& n : required_names) {
      if (!props->contains(n)) {
        return Status::InvalidArgument(Where(tool) + ".required: names \"" + n + "\", which is not in properties");
      }
    }
    size_t p = 0;
    for (auto it = props->begin(); it != props->end(); ++it, ++p) {
      const std::string& name = it.key();
      const std::string path = Where(tool) + ".properties." + name;
      // The output parser ends the name at a space and copies it, quotes included, into the arguments
      // JSON: it must be its own JSON spelling and hold no space.
      bool writable = !name.empty() && name.find("｜") == std::string::npos;
      for (unsigned char ch : name) writable = writable && ch > 0x20 && ch != '"' && ch != '\\';
      if (!writable) return Status::InvalidArgument(path + ": this parameter name cannot be written in DSML");
      DI_ASSIGN_OR_RETURN(ExprId value, Value(schema, *it, path, index, p));
      ExprId head = g_.Seq({StartTag(tags_.parameter), g_.Literal(" name=\"" + name + "\" string=\"")});
      params->push_back(g_.Seq({head, value, EndTag(tags_.parameter)}));
      required->push_back(required_names.count(name) ? 1 : 0);
    }
    return Status::Ok();
  }

  // `true">RAW` or `false">JSON` for one parameter's schema.
  Result<ExprId> Value(const Json& root, const Json& prop, const std::string& path, size_t tool, size_t param) {
    if (prop.is_object()) {
      bool only_string_words = true;
      bool typed_string = false, typed_other = false;
      const Json* choices = nullptr;
      for (auto it = prop.begin(); it != prop.end(); ++it) {
        if (it.key() == "type") {
          typed_string = it->is_string() && *it == "string";
          typed_other = !typed_string;
        } else if (it.key() == "enum" && it->is_array() && !it->empty()) {
          choices = &*it;
        } else if (it.key() == "const") {
          choices = &*it;
        } else if (!IsAnnotation(it.key())) {
          only_string_words = false;
        }
      }
      if (only_string_words && !typed_other && (typed_string || choices)) {
        if (!choices) return g_.Seq({g_.Literal("true\">"), RawText()});
        std::vector<ExprId> alts;
        bool all_strings = true;
        auto add = [&](const Json& v) {
          if (!v.is_string()) all_strings = false;
          else alts.push_back(g_.Literal(v.get<std::string>()));
        };
        if (choices->is_array()) {
          for (const Json& v : *choices) add(v);
        } else {
          add(*choices);
        }
        if (all_strings && (prop.contains("enum") + prop.contains("const")) == 1) {
          return g_.Seq({g_.Literal("true\">"), g_.Alt(std::move(alts))});
        }
      }
    }
    // Everything else as JSON. Definitions the value refers to live at the top of the parameters schema:
    // they come along, so `#/$defs/...` references resolve as they did there.
    Json sub = prop;
    if (sub.is_object()) {
      for (const char* defs : {"$defs", "definitions"}) {
        if (root.contains(defs) && !sub.contains(defs)) sub[defs] = root[defs];
      }
    }
    JsonSchemaOptions options;
    options.whitespace = JsonSchemaOptions::Whitespace::kPython;
    options.strict = true;
    options.integer_fraction = false;
    auto value = JsonSchemaToGrammar(sub.dump(), options);
    if (!value.ok()) return Status(value.status().code(), path + ": " + value.status().message());
    std::string prefix = "t";
    prefix.append(std::to_string(tool)).append("p").append(std::to_string(param)).append(".");
    const uint32_t rule = g_.Import(*value, prefix);
    return g_.Seq({g_.Literal("false\">"), g_.Ref(rule)});
  }

  static constexpr ExprId kNone = 0xFFFFFFFFu;
  const ToolCallGrammarSpec& spec_;
  Tags tags_;
  Grammar g_;
  ExprId raw_text_ = kNone;
  ExprId free_parameter_ = kNone;
};

void PutField(std::string* out, std::string_view s) {
  out->append(std::to_string(s.size()));
  out->push_back(':');
  out->append(s);
}

bool TakeField(std::string_view* in, std::string_view* out) {
  const size_t colon = in->find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 12) return false;
  size_t n = 0;
  auto [end, ec] = std::from_chars(in->data(), in->data() + colon, n);
  if (ec != std::errc() || end != in->data() + colon || n > in->size() - colon - 1) return false;
  *out = in->substr(colon + 1, n);
  in->remove_prefix(colon + 1 + n);
  return true;
}

}  // namespace

Result<Grammar> ToolCallGrammar(const ToolCallGrammarSpec& spec) { return Builder(spec).Run(); }

std::string SerializeToolCallSpec(const ToolCallGrammarSpec& spec) {
  std::string out;
  PutField(&out, std::to_string(static_cast<int>(spec.dialect)));
  PutField(&out, spec.opened ? "1" : spec.must_call ? "2" : "0");
  PutField(&out, std::to_string(spec.max_calls));
  PutField(&out, std::to_string(static_cast<int>(spec.answer.kind)));
  PutField(&out, spec.answer.strict ? "1" : "0");
  PutField(&out, spec.answer.schema);
  PutField(&out, std::to_string(spec.tools.size()));
  for (const ToolCallTool& t : spec.tools) {
    PutField(&out, t.name);
    PutField(&out, t.free_arguments ? "1" : "0");
    PutField(&out, t.parameters);
  }
  return out;
}

Result<ToolCallGrammarSpec> ParseToolCallSpec(std::string_view text) {
  ToolCallGrammarSpec spec;
  std::string_view f;
  auto number = [&](uint64_t max, uint64_t* v) {
    if (!TakeField(&text, &f)) return false;
    auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), *v);
    return ec == std::errc() && end == f.data() + f.size() && *v <= max;
  };
  uint64_t dialect = 0, opened = 0, max_calls = 0, answer = 0, answer_strict = 0, count = 0;
  std::string_view answer_schema;
  if (!number(2, &dialect) || !number(2, &opened) || !number(0xFFFFFFFFu, &max_calls) || !number(2, &answer) ||
      !number(1, &answer_strict) || !TakeField(&text, &answer_schema) || !number(text.size(), &count)) {
    return Status::InvalidArgument("malformed tool-call grammar spec");
  }
  spec.dialect = static_cast<ToolCallGrammarSpec::Dialect>(dialect);
  spec.opened = opened == 1;
  spec.must_call = opened == 2;
  spec.max_calls = static_cast<uint32_t>(max_calls);
  spec.answer.kind = static_cast<ToolCallAnswer::Kind>(answer);
  spec.answer.strict = answer_strict == 1;
  spec.answer.schema = std::string(answer_schema);
  for (uint64_t i = 0; i < count; ++i) {
    ToolCallTool tool;
    std::string_view name, params;
    uint64_t free_arguments = 0;
    if (!TakeField(&text, &name) || !number(1, &free_arguments) || !TakeField(&text, &params)) {
      return Status::InvalidArgument("malformed tool-call grammar spec");
    }
    tool.name = std::string(name);
    tool.free_arguments = free_arguments == 1;
    tool.parameters = std::string(params);
    spec.tools.push_back(std::move(tool));
  }
  if (!text.empty()) return Status::InvalidArgument("malformed tool-call grammar spec");
  return spec;
}

}  // namespace deepinfer::grammar
