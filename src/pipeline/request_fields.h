// Reading the request fields the codec does not read (internal to src/pipeline): each a JSON value checked
// against its range, or the 400 naming the parameter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "pipeline/api.h"
#include "pipeline/prepare.h"

namespace deepinfer::pipeline {

ApiError Invalid(std::string param, std::string message);

// Each leaves *out as it is when the body has no such field (or null).
std::optional<ApiError> ReadNumber(const nlohmann::json& body, const char* key, double lo, double hi, double* out);
std::optional<ApiError> ReadInteger(const nlohmann::json& body, const char* key, int64_t lo, int64_t hi, int64_t* out);
std::optional<ApiError> ReadBool(const nlohmann::json& body, const char* key, bool* out);

// Sampling fields beyond the codec's (penalties, ignore_eos, min_tokens, min_p, kv_ttl_class) and the
// test hook. `read_seed`: the body's `seed` is read here too (Responses and Messages, whose codec reads
// none; Chat's codec and the legacy Completions parser read their own).
std::optional<ApiError> ApplyExtras(std::string_view body, const PrepareOptions& options,
                                    engine::RequestParams* params, bool read_seed);
// The same from a body parsed already (a request body is read once where it can be: a long prompt makes
// every parse cost).
std::optional<ApiError> ApplyExtras(const nlohmann::json& body, const PrepareOptions& options,
                                    engine::RequestParams* params, bool read_seed);

// The legacy Completions API's request: parsed and checked, the model name and the context included.
PrepareOutcome PrepareCompletions(std::string_view body, const PrepareOptions& options);

}  // namespace deepinfer::pipeline
