#include "engine/request_codec.h"

#include <cmath>
#include <initializer_list>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/json.h"

namespace deepinfer::engine {
namespace {

using Json = nlohmann::json;
using Kind = grammar::ConstraintSpec::Kind;
using Whitespace = grammar::JsonSchemaOptions::Whitespace;

// The deepest a valid request nests: request → constraint → grammar → json options, logit_bias pairs.
constexpr int kMaxDepth = 6;

struct KindName {
  Kind kind;
  const char* name;
};
constexpr KindName kKinds[] = {{Kind::kJsonSchema, "json_schema"}, {Kind::kJsonObject, "json_object"},
                               {Kind::kRegex, "regex"},            {Kind::kEbnf, "ebnf"},
                               {Kind::kChoice, "choice"},          {Kind::kToolCalls, "tool_calls"}};
struct WhitespaceName {
  Whitespace whitespace;
  const char* name;
};
constexpr WhitespaceName kWhitespaces[] = {
    {Whitespace::kCompact, "compact"}, {Whitespace::kFlexible, "flexible"}, {Whitespace::kPython, "python"}};

Json IdsToJson(const std::vector<int32_t>& ids) {
  Json a = Json::array();
  for (int32_t id : ids) a.push_back(id);
  return a;
}

Json SamplingToJson(const sampling::SamplingParams& s) {
  Json j = Json::object();
  j["temperature"] = s.temperature;
  j["top_k"] = s.top_k;
  j["top_p"] = s.top_p;
  j["min_p"] = s.min_p;
  j["repetition_penalty"] = s.repetition_penalty;
  j["presence_penalty"] = s.presence_penalty;
  j["frequency_penalty"] = s.frequency_penalty;
  Json bias = Json::array();
  for (const auto& [id, value] : s.logit_bias) bias.push_back(Json::array({id, value}));
  j["logit_bias"] = std::move(bias);
  if (s.seed) j["seed"] = *s.seed;
  j["random_stream"] = s.random_stream;
  j["max_tokens"] = s.max_tokens;
  j["min_tokens"] = s.min_tokens;
  j["ignore_eos"] = s.ignore_eos;
  j["stop_token_ids"] = IdsToJson(s.stop_token_ids);
  j["stop"] = s.stop;
  j["include_stop_str_in_output"] = s.include_stop_str_in_output;
  j["n"] = s.n;
  j["logprobs"] = s.logprobs;
  j["top_logprobs"] = s.top_logprobs;
  return j;
}

Json ConstraintToJson(const sampling::OutputConstraint& c) {
  Json j = Json::object();
  if (c.grammar) {
    const grammar::ConstraintSpec& spec = *c.grammar;
    Json g = Json::object();
    for (const KindName& k : kKinds)
      if (k.kind == spec.kind) g["kind"] = k.name;
    g["text"] = spec.text;
    g["choices"] = spec.choices;
    Json options = Json::object();
    for (const WhitespaceName& w : kWhitespaces)
      if (w.whitespace == spec.json.whitespace) options["whitespace"] = w.name;
    options["strict"] = spec.json.strict;
    options["integer_fraction"] = spec.json.integer_fraction;
    options["draft7_without_schema"] = spec.json.draft7_without_schema;
    options["one_of_as_any_of"] = spec.json.one_of_as_any_of;
    options["max_schema_bytes"] = spec.json.max_schema_bytes;
    options["max_depth"] = spec.json.max_depth;
    g["json"] = std::move(options);
    j["grammar"] = std::move(g);
  }
  j["grammar_start_after_token"] = c.grammar_start_after_token;
  if (c.scripted_tokens) j["scripted_tokens"] = IdsToJson(*c.scripted_tokens);
  return j;
}

// ---- Reading ------------------------------------------------------------------------------------------

Status Invalid(const std::string& field, const std::string& what) {
  return Status::InvalidArgument("request: " + field + ": " + what);
}

// Refuses members not in `known` (a peer speaking another version of the format).
Status CheckKeys(const Json& object, const std::string& path, std::initializer_list<const char*> known) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool found = false;
    for (const char* k : known) found |= it.key() == k;
    if (!found) return Invalid(path.empty() ? it.key() : path + "." + it.key(), "unknown field");
  }
  return Status::Ok();
}

std::string Path(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }

// Each reader leaves *out as it is when the key is absent.
Status ReadBool(const Json& o, const char* key, const std::string& path, bool* out) {
  auto it = o.find(key);
  if (it == o.end()) return Status::Ok();
  if (!it->is_boolean()) return Invalid(Path(path, key), "must be a boolean");
  *out = it->get<bool>();
  return Status::Ok();
}

Status ReadInteger(const Json& o, const char* key, const std::string& path, int64_t lo, int64_t hi, int64_t* out) {
  auto it = o.find(key);
  if (it == o.end()) return Status::Ok();
  const std::string range = "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!it->is_number_integer()) return Invalid(Path(path, key), range);
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) return Invalid(Path(path, key), range);
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return Invalid(Path(path, key), range);
  *out = v;
  return Status::Ok();
}

template <class T>
Status ReadIntegerAs(const Json& o, const char* key, const std::string& path, T* out) {
  int64_t v = static_cast<int64_t>(*out);
  DI_RETURN_IF_ERROR(ReadInteger(o, key, path, static_cast<int64_t>(std::numeric_limits<T>::min()),
                                 static_cast<int64_t>(std::numeric_limits<T>::max()), &v));
  *out = static_cast<T>(v);
  return Status::Ok();
}

Status ReadNumber(const Json& o, const char* key, const std::string& path, double* out) {
  auto it = o.find(key);
  if (it == o.end()) return Status::Ok();
  if (!it->is_number()) return Invalid(Path(path, key), "must be a number");
  const double v = it->get<double>();
  if (!std::isfinite(v)) return Invalid(Path(path, key), "must be finite");
  *out = v;
  return Status::Ok();
}

Status ReadString(const Json& o, const char* key, const std::string& path, size_t max_bytes, std::string* out) {
  auto it = o.find(key);
  if (it == o.end()) return Status::Ok();
  if (!it->is_string()) return Invalid(Path(path, key), "must be a string");
  const std::string& s = it->get_ref<const std::string&>();
  if (s.size() > max_bytes) return Invalid(Path(path, key), "at most " + std::to_string(max_bytes) + " bytes");
  *out = s;
  return Status::Ok();
}

Status ReadStrings(const Json& o, const char* key, const std::string& path, size_t max_count, std::vector<std::string>* out) {
  auto it = o.find(key);
  if (it == o.end()) return Status::Ok();
  if (!it->is_array()) return Invalid(Path(path, key), "must be an array of strings");
  if (it->size() > max_count) return Invalid(Path(path, key), "at most " + std::to_string(max_count) + " strings");
  std::vector<std::string> strings;
  strings.reserve(it->size());
  for (const Json& s : *it) {
    if (!s.is_string()) return Invalid(Path(path, key), "must be an array of strings");
    strings.push_back(s.get<std::string>());
  }
  *out = std::move(strings);
  return Status::Ok();
}

// Token ids: integers in [0, 2^31).
Status ReadIds(const Json& ids, const std::string& field, size_t max_count, std::vector<int32_t>* out) {
  if (!ids.is_array()) return Invalid(field, "must be an array of token ids");
  if (ids.size() > max_count) return Invalid(field, "at most " + std::to_string(max_count) + " token ids");
  std::vector<int32_t> v;
  v.reserve(ids.size());
  for (const Json& id : ids) {
    if (!id.is_number_integer() || (id.is_number_unsigned() ? id.get<uint64_t>() > INT32_MAX
                                                            : id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX))
      return Invalid(field, "token ids are integers in [0, 2147483647]");
    v.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  *out = std::move(v);
  return Status::Ok();
}

Status ReadObject(const Json& o, const char* key, const std::string& path, const Json** out) {
  *out = nullptr;
  auto it = o.find(key);
  if (it == o.end()) return Status::Ok();
  if (!it->is_object()) return Invalid(Path(path, key), "must be an object");
  *out = &*it;
  return Status::Ok();
}

Status ReadSampling(const Json& j, sampling::SamplingParams* s) {
  const std::string p = "sampling";
  DI_RETURN_IF_ERROR(CheckKeys(j, p, {"temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                                      "presence_penalty", "frequency_penalty", "logit_bias", "seed", "random_stream",
                                      "max_tokens", "min_tokens", "ignore_eos", "stop_token_ids", "stop",
                                      "include_stop_str_in_output", "n", "logprobs", "top_logprobs"}));
  DI_RETURN_IF_ERROR(ReadNumber(j, "temperature", p, &s->temperature));
  DI_RETURN_IF_ERROR(ReadIntegerAs(j, "top_k", p, &s->top_k));
  DI_RETURN_IF_ERROR(ReadNumber(j, "top_p", p, &s->top_p));
  DI_RETURN_IF_ERROR(ReadNumber(j, "min_p", p, &s->min_p));
  DI_RETURN_IF_ERROR(ReadNumber(j, "repetition_penalty", p, &s->repetition_penalty));
  DI_RETURN_IF_ERROR(ReadNumber(j, "presence_penalty", p, &s->presence_penalty));
  DI_RETURN_IF_ERROR(ReadNumber(j, "frequency_penalty", p, &s->frequency_penalty));
  if (auto it = j.find("logit_bias"); it != j.end()) {
    const std::string field = Path(p, "logit_bias");
    if (!it->is_array()) return Invalid(field, "must be an array of [token id, bias] pairs");
    if (it->size() > sampling::kMaxLogitBias)
      return Invalid(field, "at most " + std::to_string(sampling::kMaxLogitBias) + " entries");
    s->logit_bias.clear();
    for (const Json& pair : *it) {
      std::vector<int32_t> id;
      if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number())
        return Invalid(field, "must be an array of [token id, bias] pairs");
      DI_RETURN_IF_ERROR(ReadIds(Json::array({pair[0]}), field, 1, &id));
      const double bias = pair[1].get<double>();
      if (!std::isfinite(bias) || std::fabs(bias) > 100) return Invalid(field, "biases are in [-100, 100]");
      s->logit_bias.emplace_back(id[0], static_cast<float>(bias));
    }
  }
  if (auto it = j.find("seed"); it != j.end()) {
    if (!it->is_number_integer() || (!it->is_number_unsigned() && it->get<int64_t>() < 0))
      return Invalid(Path(p, "seed"), "must be an integer in [0, 2^64)");
    s->seed = it->get<uint64_t>();
  }
  DI_RETURN_IF_ERROR(ReadIntegerAs(j, "random_stream", p, &s->random_stream));
  DI_RETURN_IF_ERROR(ReadIntegerAs(j, "max_tokens", p, &s->max_tokens));
  DI_RETURN_IF_ERROR(ReadIntegerAs(j, "min_tokens", p, &s->min_tokens));
  DI_RETURN_IF_ERROR(ReadBool(j, "ignore_eos", p, &s->ignore_eos));
  if (auto it = j.find("stop_token_ids"); it != j.end())
    DI_RETURN_IF_ERROR(ReadIds(*it, Path(p, "stop_token_ids"), sampling::kMaxStopTokenIds, &s->stop_token_ids));
  DI_RETURN_IF_ERROR(ReadStrings(j, "stop", p, sampling::kMaxStopStrings, &s->stop));
  DI_RETURN_IF_ERROR(ReadBool(j, "include_stop_str_in_output", p, &s->include_stop_str_in_output));
  DI_RETURN_IF_ERROR(ReadIntegerAs(j, "n", p, &s->n));
  DI_RETURN_IF_ERROR(ReadBool(j, "logprobs", p, &s->logprobs));
  DI_RETURN_IF_ERROR(ReadIntegerAs(j, "top_logprobs", p, &s->top_logprobs));
  // The ranges AddRequest checks, against the widest vocabulary (the engine checks ids against its own).
  Status valid = sampling::ValidateSamplingParams(*s, std::numeric_limits<int32_t>::max());
  if (!valid.ok()) return Invalid(p, valid.message());
  return Status::Ok();
}

Status ReadGrammar(const Json& j, grammar::ConstraintSpec* spec) {
  const std::string p = "constraint.grammar";
  DI_RETURN_IF_ERROR(CheckKeys(j, p, {"kind", "text", "choices", "json"}));
  auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string()) return Invalid(Path(p, "kind"), "required, a string");
  bool known = false;
  for (const KindName& k : kKinds) {
    if (*kind == k.name) {
      spec->kind = k.kind;
      known = true;
    }
  }
  if (!known) return Invalid(Path(p, "kind"), "unknown kind (json_schema, json_object, regex, ebnf, choice, tool_calls)");
  DI_RETURN_IF_ERROR(ReadString(j, "text", p, kMaxRequestJsonBytes, &spec->text));
  DI_RETURN_IF_ERROR(ReadStrings(j, "choices", p, kMaxConstraintChoices, &spec->choices));
  const Json* options = nullptr;
  DI_RETURN_IF_ERROR(ReadObject(j, "json", p, &options));
  if (options) {
    const std::string po = Path(p, "json");
    grammar::JsonSchemaOptions& o = spec->json;
    DI_RETURN_IF_ERROR(CheckKeys(*options, po, {"whitespace", "strict", "integer_fraction", "draft7_without_schema",
                                                "one_of_as_any_of", "max_schema_bytes", "max_depth"}));
    if (auto w = options->find("whitespace"); w != options->end()) {
      bool found = false;
      for (const WhitespaceName& name : kWhitespaces) {
        if (*w == name.name) {
          o.whitespace = name.whitespace;
          found = true;
        }
      }
      if (!found) return Invalid(Path(po, "whitespace"), "one of compact, flexible, python");
    }
    DI_RETURN_IF_ERROR(ReadBool(*options, "strict", po, &o.strict));
    DI_RETURN_IF_ERROR(ReadBool(*options, "integer_fraction", po, &o.integer_fraction));
    DI_RETURN_IF_ERROR(ReadBool(*options, "draft7_without_schema", po, &o.draft7_without_schema));
    DI_RETURN_IF_ERROR(ReadBool(*options, "one_of_as_any_of", po, &o.one_of_as_any_of));
    // The compiler's own limits cap these whatever they say.
    int64_t bytes = static_cast<int64_t>(o.max_schema_bytes);
    DI_RETURN_IF_ERROR(ReadInteger(*options, "max_schema_bytes", po, 0, static_cast<int64_t>(kMaxRequestJsonBytes), &bytes));
    o.max_schema_bytes = static_cast<size_t>(bytes);
    int64_t depth = o.max_depth;
    DI_RETURN_IF_ERROR(ReadInteger(*options, "max_depth", po, 0, 1024, &depth));
    o.max_depth = static_cast<uint32_t>(depth);
  }
  return Status::Ok();
}

Status ReadConstraint(const Json& j, sampling::OutputConstraint* c) {
  const std::string p = "constraint";
  DI_RETURN_IF_ERROR(CheckKeys(j, p, {"grammar", "grammar_start_after_token", "scripted_tokens"}));
  const Json* g = nullptr;
  DI_RETURN_IF_ERROR(ReadObject(j, "grammar", p, &g));
  if (g) {
    grammar::ConstraintSpec spec;
    DI_RETURN_IF_ERROR(ReadGrammar(*g, &spec));
    c->grammar = std::move(spec);
  }
  int64_t start = c->grammar_start_after_token;
  DI_RETURN_IF_ERROR(ReadInteger(j, "grammar_start_after_token", p, -1, INT32_MAX, &start));
  c->grammar_start_after_token = static_cast<int32_t>(start);
  if (auto it = j.find("scripted_tokens"); it != j.end()) {
    std::vector<int32_t> script;
    DI_RETURN_IF_ERROR(ReadIds(*it, Path(p, "scripted_tokens"), kMaxScriptedTokens, &script));
    c->scripted_tokens = std::move(script);
  }
  if (c->grammar && c->scripted_tokens) return Invalid(p, "a grammar and scripted tokens cannot be combined");
  return Status::Ok();
}

}  // namespace

std::string RequestToJson(const PlainRequest& request) {
  const RequestParams& p = request.params;
  Json j = Json::object();
  j["prompt"] = IdsToJson(request.prompt);
  j["sampling"] = SamplingToJson(p.sampling);
  j["priority"] = p.priority;
  j["deadline_nanos"] = p.deadline_nanos;
  j["cache_salt"] = p.cache_salt;
  j["kv_ttl_class"] = p.kv_ttl_class;
  j["constraint"] = ConstraintToJson(p.constraint);
  j["detokenize"] = p.detokenize;
  j["skip_special_tokens"] = p.skip_special_tokens;
  j["prompt_logprobs"] = p.prompt_logprobs;
  j["tag"] = p.tag;
  return DumpJson(j);
}

Result<PlainRequest> RequestFromJson(std::string_view json) {
  JsonLimits limits;
  limits.max_bytes = kMaxRequestJsonBytes;
  limits.max_depth = kMaxDepth;
  auto parsed = ParseJson(json, limits);
  if (!parsed.ok()) return Status::InvalidArgument("request: " + parsed.status().message());
  const Json& j = *parsed;
  if (!j.is_object()) return Status::InvalidArgument("request: must be a JSON object");
  DI_RETURN_IF_ERROR(CheckKeys(j, "", {"prompt", "sampling", "priority", "deadline_nanos", "cache_salt", "kv_ttl_class",
                                       "constraint", "detokenize", "skip_special_tokens", "prompt_logprobs", "tag"}));
  PlainRequest r;
  RequestParams& p = r.params;
  auto prompt = j.find("prompt");
  if (prompt == j.end()) return Invalid("prompt", "required");
  DI_RETURN_IF_ERROR(ReadIds(*prompt, "prompt", kMaxRequestPromptTokens, &r.prompt));
  const Json* sampling = nullptr;
  DI_RETURN_IF_ERROR(ReadObject(j, "sampling", "", &sampling));
  if (sampling) DI_RETURN_IF_ERROR(ReadSampling(*sampling, &p.sampling));
  DI_RETURN_IF_ERROR(ReadIntegerAs(j, "priority", "", &p.priority));
  DI_RETURN_IF_ERROR(ReadInteger(j, "deadline_nanos", "", 0, std::numeric_limits<int64_t>::max(), &p.deadline_nanos));
  DI_RETURN_IF_ERROR(ReadString(j, "cache_salt", "", kMaxSaltBytes, &p.cache_salt));
  DI_RETURN_IF_ERROR(ReadString(j, "kv_ttl_class", "", kMaxTtlClassBytes, &p.kv_ttl_class));
  const Json* constraint = nullptr;
  DI_RETURN_IF_ERROR(ReadObject(j, "constraint", "", &constraint));
  if (constraint) DI_RETURN_IF_ERROR(ReadConstraint(*constraint, &p.constraint));
  DI_RETURN_IF_ERROR(ReadBool(j, "detokenize", "", &p.detokenize));
  DI_RETURN_IF_ERROR(ReadBool(j, "skip_special_tokens", "", &p.skip_special_tokens));
  int64_t prompt_logprobs = p.prompt_logprobs;
  DI_RETURN_IF_ERROR(ReadInteger(j, "prompt_logprobs", "", -1, sampling::kMaxTopLogprobs, &prompt_logprobs));
  p.prompt_logprobs = static_cast<int>(prompt_logprobs);
  DI_RETURN_IF_ERROR(ReadString(j, "tag", "", kMaxTagBytes, &p.tag));
  return r;
}

}  // namespace deepinfer::engine
