#include "pipeline/request_fields.h"

#include <algorithm>

#include "pipeline/json_body.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::pipeline {

using Json = nlohmann::json;

ApiError Invalid(std::string param, std::string message) {
  ApiError e;
  e.status = 400;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

// A JSON number as a double in [lo, hi], or an error naming the parameter.
std::optional<ApiError> ReadNumber(const Json& body, const char* key, double lo, double hi, double* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return Invalid(key, std::string(key) + " must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return Invalid(key, std::string(key) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = v;
  return std::nullopt;
}

std::optional<ApiError> ReadInteger(const Json& body, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) return Invalid(key, std::string(key) + " must be an integer");
  const int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : it->get<int64_t>();
  if (v < lo || v > hi)
    return Invalid(key, std::string(key) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = v;
  return std::nullopt;
}

std::optional<ApiError> ReadBool(const Json& body, const char* key, bool* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return Invalid(key, std::string(key) + " must be a boolean");
  *out = it->get<bool>();
  return std::nullopt;
}

// Sampling fields the chat codecs do not read (OpenAI's penalties, vLLM's extras) and, with
// --enable-test-hooks, the scripted output: a request's "deepinfer_test_output" text is tokenized with
// control-token spellings as control tokens, and the engine's logits mask allows exactly those tokens in
// order, so real reasoning, tool calls and content come back through the whole path.
std::optional<ApiError> ApplyExtras(std::string_view body_text, const PrepareOptions& options,
                                    engine::RequestParams* params, bool read_seed) {
  JsonBody json = ParseJsonObject(body_text);
  if (!json.ok()) return std::nullopt;  // the protocol parser already accepted it; nothing extra to read
  return ApplyExtras(json.value, options, params, read_seed);
}

std::optional<ApiError> ApplyExtras(const Json& body, const PrepareOptions& options, engine::RequestParams* params,
                                    bool read_seed) {
  sampling::SamplingParams& s = params->sampling;
  int64_t min_tokens = s.min_tokens;
  std::optional<ApiError> error;
  if (!error) error = ReadNumber(body, "presence_penalty", -2, 2, &s.presence_penalty);
  if (!error) error = ReadNumber(body, "frequency_penalty", -2, 2, &s.frequency_penalty);
  if (!error) error = ReadNumber(body, "repetition_penalty", 0.01, 10, &s.repetition_penalty);
  if (!error) error = ReadNumber(body, "min_p", 0, 1, &s.min_p);
  if (!error) error = ReadBool(body, "ignore_eos", &s.ignore_eos);
  if (!error) error = ReadInteger(body, "min_tokens", 0, int64_t{1} << 24, &min_tokens);
  // vLLM's: special added tokens (not the ones the output parser reads) are left out of the text unless false.
  if (!error) error = ReadBool(body, "skip_special_tokens", &params->skip_special_tokens);
  // Seeded sampling as on Chat Completions (an extension here, as in vLLM's sampling parameters): equal
  // seeded requests give equal outputs.
  if (int64_t seed = -1; !error && read_seed) {
    error = ReadInteger(body, "seed", 0, INT64_MAX, &seed);
    if (!error && seed >= 0) s.seed = static_cast<uint64_t>(seed);
  }
  // The KV store's retention class of this request's prefix blocks (extension; default: --kv-ttl-class).
  if (auto ttl = body.find("kv_ttl_class"); !error && ttl != body.end()) {
    if (!ttl->is_string() || (*ttl != "agent" && *ttl != "chat")) {
      error = Invalid("kv_ttl_class", "kv_ttl_class must be \"agent\" or \"chat\"");
    } else {
      params->kv_ttl_class = ttl->get<std::string>();
    }
  }
  if (error) return error;
  s.min_tokens = min_tokens;
  if (!options.enable_test_hooks) return std::nullopt;
  auto it = body.find("deepinfer_test_output");
  if (it == body.end()) return std::nullopt;
  if (!it->is_string()) return Invalid("deepinfer_test_output", "deepinfer_test_output must be a string");
  std::vector<int32_t> script = options.tokenizer->EncodeWithAddedTokens(it->get_ref<const std::string&>());
  params->constraint.scripted_tokens = script;
  params->sampling.max_tokens = std::max<int64_t>(params->sampling.max_tokens, static_cast<int64_t>(script.size()) + 1);
  return std::nullopt;
}

}  // namespace deepinfer::pipeline
